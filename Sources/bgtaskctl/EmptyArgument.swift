import ArgumentParser

/// An optional argument given but empty (`"$APP"` with APP unset) is
/// refused rather than read as left out: leaving it out means every app,
/// which a command meant for one must not silently do.
enum EmptyArgument {
    /// Throws when `value` is given and empty; `leaveOut` says what leaving it out does.
    static func refuse(_ value: String?, as name: String, leaveOut: String) throws {
        if value?.isEmpty == true { throw ValidationError("\(name) is empty; leave it out to \(leaveOut)") }
    }
}
