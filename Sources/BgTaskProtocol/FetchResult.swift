/// What a background fetch found, as iOS's `UIBackgroundFetchResult`: the
/// value an app passes to the completion of its fetch handler, and of its
/// notification handler (iOS uses the same type for both).
///
/// The daemon records it and learns from it: apps that keep answering
/// ``noData`` are woken less often, apps that find ``newData`` keep their
/// place in the schedule.
///
/// ```swift
/// manager.setFetchHandler { completion in
///     Task {
///         do {
///             completion(try await feed.refresh() ? .newData : .noData)
///         } catch {
///             completion(.failed)
///         }
///     }
/// }
/// ```
public enum FetchResult: String, Sendable, Hashable, Codable, CaseIterable, CustomStringConvertible {
    /// New content was downloaded (`newData` on the bus).
    ///
    /// ```swift
    /// completion(.newData)
    /// ```
    case newData

    /// The fetch worked but there was nothing new (`noData` on the bus).
    ///
    /// ```swift
    /// completion(.noData)
    /// ```
    case noData

    /// The fetch did not work: no network, a server error … (`failed` on the bus).
    ///
    /// ```swift
    /// completion(.failed)
    /// ```
    case failed

    /// The D-Bus spelling (`newData`, `noData`, `failed`).
    ///
    /// ```swift
    /// "\(FetchResult.noData)"   // "noData"
    /// ```
    public var description: String { rawValue }

    /// Parses the D-Bus spelling; throws `InvalidArgs` for anything else,
    /// naming what the result answers (`fetch`, `notification`).
    public init(parsing text: String, of what: String) throws(BgTaskError) {
        guard let result = FetchResult(rawValue: text) else {
            throw .invalidArgs("unknown \(what) result '\(text.prefix(64))' (expected newData, noData or failed)")
        }
        self = result
    }
}
