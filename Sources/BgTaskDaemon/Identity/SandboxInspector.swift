public import BgTaskCore
import Foundation

/// Learns what the kernel says about a caller's app: a Flatpak sandbox's app
/// id, or the app id in its systemd unit name (docs/DESIGN.md §3). The parsers are
/// pure and unit-tested; ``inspect(pid:)`` reads `/proc`.
public enum SandboxInspector {
    /// What a process's sandbox and cgroup say about it.
    public struct Finding: Equatable, Sendable {
        public var appID: AppID?
        public var source: CallerIdentity.AppIDSource?
        public var isSandboxed: Bool
    }

    /// Reads `/proc/PID/root/.flatpak-info` and `/proc/PID/cgroup`. The caller
    /// must re-check afterwards that `pid` is still the same process.
    public static func inspect(pid: Int32) -> Finding {
        let flatpakInfo = "/proc/\(pid)/root/.flatpak-info"
        var status = stat()
        switch flatpakInfoPresence(statResult: stat(flatpakInfo, &status), errno: errno) {
        case .present:
            // A sandbox whose id cannot be read is still a sandbox: it gets no id and no trust.
            let text = head(of: flatpakInfo) ?? ""
            return Finding(appID: flatpakAppID(fromInfo: text), source: .flatpak, isSandboxed: true)
        case .unknown:
            return Finding(appID: nil, source: nil, isSandboxed: true)
        case .absent:
            break
        }
        if let cgroup = try? String(contentsOfFile: "/proc/\(pid)/cgroup", encoding: .utf8),
           let unit = unitName(fromCgroup: cgroup), let id = appID(fromUnit: unit) {
            return Finding(appID: id, source: .systemdUnit, isSandboxed: false)
        }
        return Finding(appID: nil, source: nil, isSandboxed: false)
    }

    /// Whether a caller's root holds a `.flatpak-info`, or whether that cannot be told.
    enum FlatpakInfoPresence: Equatable {
        case present, absent, unknown
    }

    /// What `stat` of `/proc/PID/root/.flatpak-info` (its result and errno)
    /// says. Only "no such file" means no sandbox: a process that made
    /// itself undumpable (`PR_SET_DUMPABLE`) keeps the daemon out of its
    /// root (EACCES), and counting that as "no sandbox" made a sandboxed
    /// app an unsandboxed, trusted caller of the user's.
    static func flatpakInfoPresence(statResult: Int32, errno: Int32) -> FlatpakInfoPresence {
        if statResult == 0 { return .present }
        return errno == ENOENT || errno == ENOTDIR ? .absent : .unknown
    }

    /// How much of a `.flatpak-info` is read: Flatpak writes a few hundred
    /// bytes, `[Application]` first. The file is in a root the caller may
    /// have made itself: read whole, a huge one stalled the daemon's loop.
    static let flatpakInfoLimit = 64 * 1024

    /// The first ``flatpakInfoLimit`` bytes of a regular file; nil for anything else.
    static func head(of path: String) -> String? {
        RegularFileText.read(path, limit: flatpakInfoLimit, beyond: .cut)
    }

    /// `name=` in the `[Application]` group of a `.flatpak-info` file.
    public static func flatpakAppID(fromInfo text: String) -> AppID? {
        var inApplication = false
        for raw in text.split(separator: "\n") {
            let line = raw.trimmingCharacters(in: .whitespaces)
            if line.hasPrefix("[") {
                inApplication = line == "[Application]"
            } else if inApplication, line.hasPrefix("name=") {
                return try? AppID(validating: String(line.dropFirst(5)))
            }
        }
        return nil
    }

    /// The innermost `.scope` or `.service` unit in a `/proc/PID/cgroup` text,
    /// from the unified hierarchy (`0::`) or, failing that, `name=systemd`.
    public static func unitName(fromCgroup text: String) -> String? {
        var path: Substring?
        for line in text.split(separator: "\n") {
            if line.hasPrefix("0::") { path = line.dropFirst(3); break }
            if line.contains(":name=systemd:"), let colon = line.lastIndex(of: ":") {
                path = line[line.index(after: colon)...]
            }
        }
        guard let path else { return nil }
        return path.split(separator: "/").reversed()
            .first { $0.hasSuffix(".scope") || $0.hasSuffix(".service") }
            .map(String.init)
    }

    /// The app id in a unit named after the XDG convention:
    /// `app[-<launcher>]-<id>-<random>.scope` or `app[-<launcher>]-<id>[@<random>].service`.
    /// Dashes inside the id are escaped as `\x2d`; the launcher never holds a dot.
    public static func appID(fromUnit unit: String) -> AppID? {
        guard unit.hasPrefix("app-") else { return nil }
        var body = Substring(unit.dropFirst(4))
        if body.hasSuffix(".scope") {
            body = body.dropLast(6)
            guard let dash = body.lastIndex(of: "-") else { return nil }
            body = body[..<dash]
        } else if body.hasSuffix(".service") {
            body = body.dropLast(8)
            if let at = body.firstIndex(of: "@") { body = body[..<at] }
        } else {
            return nil
        }
        if let dash = body.firstIndex(of: "-"), !body[..<dash].contains(".") {
            body = body[body.index(after: dash)...]
        }
        return try? AppID(validating: unescapeUnitName(String(body)))
    }

    /// Undoes systemd's `\xNN` escaping.
    static func unescapeUnitName(_ text: String) -> String {
        EscapedText.decode(text, marker: "\\x", digits: 2, radix: 16)
    }
}
