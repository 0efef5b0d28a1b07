/// What an app answers a fetch wake with (`CompleteFetch`), as iOS's
/// `UIBackgroundFetchResult`.
public enum FetchResult: String, Sendable, Codable, CaseIterable {
    case newData
    case noData
    case failed

    /// Parses the D-Bus spelling; throws `InvalidArgs` for anything else.
    public init(parsing text: String) throws(CoreError) {
        guard let result = FetchResult(rawValue: text) else {
            throw CoreError(.invalidArgs, "unknown fetch result '\(text.prefix(64))' (expected newData, noData or failed)")
        }
        self = result
    }
}
