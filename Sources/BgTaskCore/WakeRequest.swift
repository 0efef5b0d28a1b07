/// A plugin's request to wake an app (see ``BackgroundEngine/requestWake(_:)``).
public struct WakeRequest: Sendable, Equatable {
    public var app: AppID
    /// The mode (`fetch`, `remote-notification`, `location`, `transfer`); also the launch reason.
    public var reason: String
    public var plugin: String
    public var budget: Duration
    /// One-shot and unguessable; made by the shell (the core draws no randomness).
    public var token: String

    public init(app: AppID, reason: String, plugin: String, budget: Duration, token: String) {
        self.app = app
        self.reason = reason
        self.plugin = plugin
        self.budget = budget
        self.token = token
    }
}
