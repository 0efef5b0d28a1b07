/// How far a location event made in this run has got toward its app: what
/// ``LocationMode`` reads to tell whether a new crossing restates the side
/// the app was last told.
enum EventDelivery: Equatable {
    /// Not sent yet. `anchored`: the side the app was told before it is
    /// known (it followed an event the app was told or took, or nothing);
    /// not when an event before it was dropped unsent, or came from before
    /// a restart.
    case unsent(anchored: Bool)
    /// Its signal went out to the app.
    case sent

    var isUnsent: Bool {
        if case .unsent = self { true } else { false }
    }
}
