import BgTaskProtocol

/// What the daemon knows about an app.
public struct AppInfo: Sendable, Equatable {
    /// Whether it runs in the foreground (`active` or `inactive`).
    public var isInForeground: Bool { running && ApplicationState.isForeground(state) }
    /// An instance runs and is not being launched: what waits for the app can
    /// go to it now (it will not check in again, as a launched one does).
    public var hasRunningInstance: Bool { running && !launching }

    /// It has a desktop entry.
    public var known: Bool
    /// A connection checked in as it.
    public var running: Bool
    /// The daemon is launching it.
    public var launching: Bool
    /// `active`, `inactive` or `background` while running.
    public var state: String?
    /// `available`, `denied` or `restricted`.
    public var refreshStatus: String
    /// The modes its desktop entry declares.
    public var modes: [String]
    /// Its desktop entry's Name.
    public var name: String?
    /// Its desktop entry's Icon.
    public var icon: String?
}
