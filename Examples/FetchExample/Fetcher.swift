import BackgroundTasks
import Foundation
#if canImport(FoundationNetworking)
import FoundationNetworking  // URLSession lives here on Linux (it uses libcurl)
#endif

/// Why a fetch failed, in words.
struct FetchError: Error, CustomStringConvertible {
    var description: String
}

/// The app's actual work: download the source, compare it with what the app
/// already has (the cache file), keep the new copy, and say what was found.
///
/// This is what an iOS app does in `application(_:performFetchWithCompletionHandler:)`:
/// a short download, then `.newData`, `.noData` or `.failed`, which the
/// daemon uses to decide how often the app is worth waking.
struct Fetcher: Sendable {
    /// Where the content comes from: a `file://` URL, or an `http://` URL
    /// (`https://` works too where libcurl has TLS).
    var source: URL
    /// Where the last copy is kept.
    var cache: URL
    /// How long a download may take. Well under the daemon's wake budget
    /// (`Fetch.WakeBudgetSec`, 30 s by default), so that the app always gets
    /// to answer, even if only with `.failed`.
    var timeout: TimeInterval = 15

    /// The outcome of one fetch.
    struct Outcome: Sendable {
        var result: FetchResult
        /// Size of the content fetched.
        var bytes: Int
    }

    /// Fetches once. Throws when the source cannot be read or the cache
    /// cannot be written; the caller then completes with `.failed`.
    func fetch() async throws -> Outcome {
        let content = try await download()
        // A missing or unreadable cache means we have nothing yet: all is new.
        let cached = try? Data(contentsOf: cache)
        if cached == content {
            return Outcome(result: .noData, bytes: content.count)
        }
        do {
            // Atomic: a process terminated mid-write never leaves half a file.
            try content.write(to: cache, options: .atomic)
        } catch {
            throw FetchError(description: "cannot write the cache \(cache.path): \(EventLog.describe(error))")
        }
        return Outcome(result: .newData, bytes: content.count)
    }

    /// The source's bytes.
    private func download() async throws -> Data {
        if source.isFileURL {
            // URLSession on Linux does not read file:// URLs; Foundation's Data does.
            do {
                return try Data(contentsOf: source)
            } catch {
                throw FetchError(description: "cannot read \(source.path): \(EventLog.describe(error))")
            }
        }
        var request = URLRequest(url: source, cachePolicy: .reloadIgnoringLocalCacheData, timeoutInterval: timeout)
        request.httpMethod = "GET"
        let (data, response) = try await URLSession.shared.data(for: request)
        if let http = response as? HTTPURLResponse, !(200..<300).contains(http.statusCode) {
            throw FetchError(description: "\(source.absoluteString) answered HTTP \(http.statusCode)")
        }
        return data
    }
}
