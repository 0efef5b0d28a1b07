import Foundation

/// A record of the `pushes` collection: the push, and its app's state beside
/// it (absent in records of earlier versions), read in one pass.
public struct StoredPush: Decodable, Sendable {
    public var push: PushRecord
    public var appState: PushAppState?

    private enum Key: String, CodingKey { case appState }

    public init(from decoder: any Decoder) throws {
        push = try PushRecord(from: decoder)
        // A state that cannot be read costs the state, never the push.
        appState = (try? decoder.container(keyedBy: Key.self).decodeIfPresent(PushAppState.self, forKey: .appState)) ?? nil
    }
}
