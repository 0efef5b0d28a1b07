import Foundation

/// The environment variables bgtaskd sets when it launches an app for a
/// background event (docs/DESIGN.md §3), read once where the SDK needs them.
///
/// A variable that is set but empty counts as unset.
enum LaunchEnvironment {
    /// Why the daemon launched the process: `fetch`, `remote-notification`, `location` or `transfer`.
    static let reasonVariable = "BGTASKD_LAUNCH_REASON"
    /// The app id the daemon launched the process as (its desktop-file id).
    static let appIDVariable = "BGTASKD_APP_ID"

    /// The launch reason the daemon put in the environment, if any.
    static var reason: LaunchReason? {
        value(of: reasonVariable).map(LaunchReason.init(rawValue:))
    }

    /// The app id the daemon put in the environment, if any.
    static var appID: String? {
        value(of: appIDVariable)
    }

    private static func value(of name: String) -> String? {
        guard let value = ProcessInfo.processInfo.environment[name], !value.isEmpty else { return nil }
        return value
    }
}
