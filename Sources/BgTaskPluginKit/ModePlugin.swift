public import BgTaskProtocol
/// A mode plugin written in Swift. Conform, then export it with
/// ``PluginExport/descriptor(for:)`` from a `@_cdecl("bgtaskd_plugin_entry")`
/// function:
///
/// ```swift
/// @_cdecl("bgtaskd_plugin_entry")
/// public func bgtaskdPluginEntry() -> UnsafeRawPointer {
///     PluginExport.descriptor(for: FetchMode.self)
/// }
/// ```
///
/// Everything runs on the daemon's loop thread: never block.
public protocol ModePlugin: AnyObject {
    /// The mode this plugin implements (`fetch`, `remote-notification`, `location`, `transfer`);
    /// the library must be named `libbgtaskd-mode-<name>.so`.
    static var name: String { get }
    /// The plugin's own version.
    static var version: String { get }
    /// The keys of the plugin's configuration section, for the daemon to
    /// parse, check and document (see ``ConfigKey``).
    static var configKeys: [ConfigKey] { get }
    /// The D-Bus error names the plugin answers calls with, besides the bus's
    /// own `org.freedesktop.DBus.Error.*`.
    static var errorNames: [ModeError.Code] { get }
    /// Whether Background App Refresh governs the plugin's wakes: when it
    /// stops being available for an app, the daemon fails the plugin's wakes
    /// still waiting for that app in the background (``PluginEvent/launchFailed(app:token:reason:)``),
    /// and the plugin keeps their events for a later wake.
    static var wakesNeedRefresh: Bool { get }
    /// Whether the plugin is told how other modes' wakes end
    /// (``PluginEvent/appWakeEnded(app:reason:completed:)``); each such event
    /// is a batch of the plugin's, on the path of every wake.
    static var wantsWakeEnds: Bool { get }
    /// Creates the plugin; throw to refuse to load (the message is logged).
    init(host: PluginHost) throws
    /// Exports interfaces, loads records, schedules.
    func start() throws
    /// The daemon is stopping: finish writing.
    func stop()
    /// A method of one of the plugin's interfaces was called. Reply with
    /// ``PluginCall/reply(_:)``, or throw a ``ModeError`` to answer with it, or
    /// keep the call to answer later.
    func handle(_ call: PluginCall) throws
    /// Something happened that the plugin may care about.
    func handle(_ event: PluginEvent)
    /// Adds what the plugin knows about an app to `bgtaskctl apps`.
    func describe(app: String, into description: inout [String: PluginValue])
    /// How many events the plugin holds for `app` without a wake asked for,
    /// to deliver once it checks in: `CheckIn`'s `pending` counts them.
    func waitingEvents(for app: String) -> Int
    /// A batch of writes begins (a call with the events it sets off, or a
    /// group of events), or starts again right after a signal that went out
    /// at once (this is then called from inside ``PluginHost/emit(_:interface:to:_:)``):
    /// remember what ``rollBack()`` must restore. Keep it cheap, an
    /// ``UndoLog`` cleared, not a copy of everything.
    func checkpoint()
    /// The batch's writes could not be committed (a full disk): restore the
    /// memory remembered at ``checkpoint()``, so that nothing of it remains.
    /// The events the batch was handed that it did not set off come again
    /// later, in order: handle them as if for the first time.
    func rollBack()
    /// The batch's writes were committed, and what it sent has gone out:
    /// what ``checkpoint()`` kept for ``rollBack()`` may be let go now, after
    /// the apps were told, rather than at the start of the next batch.
    func committed()
}

extension ModePlugin {
    public static var configKeys: [ConfigKey] { [] }
    public static var errorNames: [ModeError.Code] { [] }
    public static var wakesNeedRefresh: Bool { false }
    public static var wantsWakeEnds: Bool { false }
    public func stop() {}
    public func describe(app: String, into description: inout [String: PluginValue]) {}
    public func waitingEvents(for app: String) -> Int { 0 }
    /// By default a plugin keeps what a failed batch changed in memory.
    public func checkpoint() {}
    public func rollBack() {}
    public func committed() {}
}
