/// What an app answers a fetch wake (`CompleteFetch`) or a push
/// (`CompleteNotification`) with, as iOS's `UIBackgroundFetchResult`.
public enum FetchResult: String, Sendable, Codable, CaseIterable {
    case newData
    case noData
    case failed

    /// Parses the D-Bus spelling; throws `InvalidArgs` for anything else,
    /// naming what the result answers (`fetch`, `notification`).
    public init(parsing text: String, of what: String) throws(CoreError) {
        guard let result = FetchResult(rawValue: text) else {
            throw CoreError(.invalidArgs, "unknown \(what) result '\(text.prefix(64))' (expected newData, noData or failed)")
        }
        self = result
    }
}
