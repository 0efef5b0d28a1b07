import SDBus

/// Which message bus a ``BackgroundTaskManager`` talks to the daemon on.
///
/// ```swift
/// let manager = try await BackgroundTaskManager.connect(bus: .session)
/// let test = try await BackgroundTaskManager.connect(bus: .address("unix:path=/tmp/test-bus"))
/// ```
public enum BusAddress: Sendable, Hashable, CustomStringConvertible {
    /// The user's session bus: `$DBUS_SESSION_BUS_ADDRESS`, else
    /// `$XDG_RUNTIME_DIR/bus`. Where the per-user daemon normally runs.
    ///
    /// ```swift
    /// try await BackgroundTaskManager.connect(bus: .session)
    /// ```
    case session

    /// The system bus (`$DBUS_SYSTEM_BUS_ADDRESS`, else
    /// `/run/dbus/system_bus_socket`), for a system-wide daemon.
    ///
    /// ```swift
    /// try await BackgroundTaskManager.connect(bus: .system)
    /// ```
    case system

    /// Any D-Bus address, such as `unix:path=/tmp/bus` (a private test bus).
    ///
    /// ```swift
    /// try await BackgroundTaskManager.connect(bus: .address("unix:path=/tmp/bus"))
    /// ```
    case address(String)

    /// Parses a command-line value the way `bgtaskd --bus` does: `session`
    /// (or `user`), `system`, or else an address.
    ///
    /// ```swift
    /// BusAddress(parsing: "session")             // .session
    /// BusAddress(parsing: "unix:path=/tmp/bus")  // .address("unix:path=/tmp/bus")
    /// ```
    public init(parsing text: String) {
        switch Bus.Address(parsing: text) {
        case .session: self = .session
        case .system: self = .system
        case .address(let address): self = .address(address)
        }
    }

    /// `session`, `system` or the address itself.
    ///
    /// ```swift
    /// print(BusAddress.session)   // session
    /// ```
    public var description: String {
        switch self {
        case .session: "session"
        case .system: "system"
        case .address(let address): address
        }
    }

    /// The same address in the bus layer's terms.
    var busAddress: Bus.Address {
        switch self {
        case .session: .session
        case .system: .system
        case .address(let address): .address(address)
        }
    }
}
