import Foundation

/// The redirects of one transfer attempt, as the transfer runner follows
/// them itself: the HTTP client, left to follow them, kept the app's own
/// headers (an API key, a session header) on a redirect to another host,
/// dropping only `Authorization` and cookies.
///
/// At most ``limit`` redirects, no cycles, to http and https URLs only. The
/// app's headers and the URL's credentials go only to the first URL's
/// origin: its scheme, host and port, or the same host upgraded from http
/// to https on the default ports.
public struct TransferRedirects: Sendable {
    /// Redirects followed at most, as the HTTP client followed before.
    public static let limit = 10
    /// The statuses that redirect when they come with a `Location`.
    public static let statuses: Set<Int> = [301, 302, 303, 307, 308]

    /// What to do with an answer.
    public enum Step: Equatable, Sendable {
        /// It is no redirect: the answer stands.
        case none
        /// Ask this URL next.
        case follow(String)
        /// The transfer fails, for this reason: asking again later would only go the same way.
        case refuse(String)
    }

    private let first: Origin?
    private var visited: [String]

    public init(url: String) {
        first = URL(string: url).flatMap(Origin.init)
        visited = [url]
    }

    /// The next step after an answer of `status` with `location` to a request of `current`.
    public mutating func next(status: Int, location: String?, from current: String) -> Step {
        guard Self.statuses.contains(status), let location, !location.isEmpty else { return .none }
        guard let base = URL(string: current), let target = URL(string: location, relativeTo: base)?.absoluteURL,
              Origin(target) != nil
        else {
            return .refuse("the server redirects to \(TransferURL.redacted(location).prefix(200)), which is no http or https URL")
        }
        let text = target.absoluteString
        // Checked as the app's own URL is: a port past 65535 made the HTTP client trap, and the daemon with it.
        if let problem = TransferURL.problem(with: text) { return .refuse("the server redirects to a URL that cannot be used: \(problem)") }
        if visited.contains(text) { return .refuse("the server's redirects go round in a cycle") }
        if visited.count > Self.limit { return .refuse("the server redirects more than \(Self.limit) times") }
        visited.append(text)
        return .follow(text)
    }

    /// Whether the app's headers and the URL's credentials may go to `url`.
    public func mayCarryTheAppsHeaders(to url: String) -> Bool {
        guard let first, let origin = URL(string: url).flatMap(Origin.init) else { return false }
        return origin.continues(first)
    }

    /// Scheme, host and port (the scheme's default when none is given).
    struct Origin: Equatable, Sendable {
        var scheme: String
        var host: String
        var port: Int

        init?(_ url: URL) {
            guard let scheme = url.scheme?.lowercased(), scheme == "http" || scheme == "https",
                  let host = url.host?.lowercased(), !host.isEmpty else { return nil }
            self.scheme = scheme
            self.host = host
            port = url.port ?? (scheme == "https" ? 443 : 80)
        }

        /// The same origin as `first`, or its upgrade from http to https on the default ports.
        func continues(_ first: Origin) -> Bool {
            if self == first { return true }
            return host == first.host && first.scheme == "http" && first.port == 80 && scheme == "https" && port == 443
        }
    }
}
