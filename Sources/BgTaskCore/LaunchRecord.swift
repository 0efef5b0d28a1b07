/// The daemon launching, or having launched, an app for background events.
struct LaunchRecord: Sendable {
    /// The wake reason the app is launched for (its first token's).
    var reason: String
    /// The launched process, once the shell reports it started.
    var process: ProcessRef?
    /// A connection of the launched app checked in: the launch worked, whatever
    /// happens to that connection afterwards.
    var checkedIn = false
}
