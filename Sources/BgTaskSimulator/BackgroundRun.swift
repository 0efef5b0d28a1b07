public import BgTaskProtocol
import BgTaskCore

/// One time an app ran in the background during a simulation: a fetch the
/// planner asked for, or a silent push.
public struct BackgroundRun: Sendable, Equatable {
    public enum Kind: String, Sendable {
        case fetch
        case push
    }

    public var app: String
    /// Realtime µs.
    public var at: UInt64
    public var kind: Kind
    /// newData when content had appeared since the app was last up to date.
    public var result: FetchResult

    public init(app: String, at: UInt64, kind: Kind, result: FetchResult) {
        self.app = app
        self.at = at
        self.kind = kind
        self.result = result
    }
}
