/// An app's life-cycle state, as UIKit's `UIApplication.State`.
public enum ApplicationState: String, Sendable, CaseIterable {
    /// In the foreground and receiving events; the background clock is paused.
    case active
    /// In the foreground but not receiving events (a transition); the clock is paused.
    case inactive
    /// In the background: the background clock runs.
    case background

    /// Parses the D-Bus spelling; throws `InvalidArgs` for anything else.
    public init(parsing text: String) throws(CoreError) {
        guard let state = ApplicationState(rawValue: text) else {
            throw CoreError(.invalidArgs, "unknown application state '\(text.prefix(64))' (expected active, inactive or background)")
        }
        self = state
    }
}
