import Foundation

/// How a transfer's URL is shown in logs and in what the daemon tells of a
/// transfer: without the password its userinfo may carry
/// (`https://user:secret@host/`). The URL requested stays as the app gave it.
public enum TransferURL {
    /// What replaces a hidden password.
    public static let mask = "***"

    /// `url` with the password of its userinfo replaced by ``mask``
    /// (`http://user:***@host/…`); a userinfo without a password is masked
    /// whole, as it is often a token (`https://***@host/…`). Works on the
    /// text alone, so a string no parser takes is hidden alike; cut the
    /// result, not `url`, as a cut could drop the `@` that marks a password.
    public static func redacted(_ url: some StringProtocol) -> String {
        // Scalars, not Characters: "@" followed by a combining mark is still the "@" a parser sees.
        let text = Array(url.unicodeScalars)
        // The authority follows the scheme's "//" (or starts the text) and ends at the path, query or fragment.
        let scheme = text.indices.dropLast(2).first { text[$0] == ":" && text[$0 + 1] == "/" && text[$0 + 2] == "/" }
        let start = scheme.map { $0 + 3 } ?? 0
        let end = text[start...].firstIndex { $0 == "/" || $0 == "?" || $0 == "#" } ?? text.endIndex
        // The last "@" ends the userinfo: a password may hold an unescaped "@" of its own.
        guard let at = text[start..<end].lastIndex(of: "@"), at > start else { return String(url) }
        let kept = text[start..<at].firstIndex(of: ":").map { $0 + 1 } ?? start
        var shown = String.UnicodeScalarView(text[..<kept])
        shown.append(contentsOf: mask.unicodeScalars)
        shown.append(contentsOf: text[at...])
        return String(shown)
    }

    /// The longest URL transferred, in bytes.
    public static let maximumBytes = 8192

    /// Why `url` cannot be transferred, or nil: http or https, with a host,
    /// a port from 1 to 65535, at most ``maximumBytes``. For the app's URLs
    /// and for every redirect target alike: the HTTP client traps on a port
    /// that does not fit 16 bits, so such a URL is refused here, never handed on.
    public static func problem(with url: String) -> String? {
        guard url.utf8.count <= maximumBytes else { return "the URL is longer than \(maximumBytes) bytes" }
        guard let components = URLComponents(string: url), let scheme = components.scheme?.lowercased() else {
            return "'\(redacted(url).prefix(200))' is not a URL"
        }
        guard scheme == "http" || scheme == "https" else { return "only http and https URLs are transferred, not \(scheme.prefix(20))" }
        guard let hostName = components.host, !hostName.isEmpty else { return "'\(redacted(url).prefix(200))' names no host" }
        // The range is in the components' own (escaped) string: a user name or
        // password with an escaped character makes it longer than `url`.
        if let range = components.rangeOfPort, !range.isEmpty, let escaped = components.string {
            let port = escaped[range]
            guard let number = Int(port), (1...65535).contains(number) else { return "port \(port.prefix(40)) is not between 1 and 65535" }
        }
        // And as the HTTP client itself reads the URL, whatever the above made of it.
        if let port = URL(string: url)?.port, !(1...65535).contains(port) { return "port \(port) is not between 1 and 65535" }
        return nil
    }

    /// The `Authorization` a URL's userinfo asks for (`Basic` with the user
    /// and password, percent-decoded), or nil when it has none: the HTTP
    /// client sends no credentials of a URL by itself.
    public static func basicAuthorization(of url: String) -> String? {
        guard let components = URLComponents(string: url), let user = components.user else { return nil }
        return "Basic " + Data("\(user):\(components.password ?? "")".utf8).base64EncodedString()
    }
}
