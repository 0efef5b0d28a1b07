import BgTaskProtocol
import SDBus

/// An error from the daemon or from the way to it.
///
/// ``code`` says what went wrong in terms an app can act on; ``name`` and
/// ``message`` are the D-Bus error as it arrived (`busctl` shows the same), so
/// nothing is lost when the SDK does not know a name.
///
/// ```swift
/// do {
///     try await manager.endBackgroundTask(id)
/// } catch let error as BackgroundTasksError where error.code == .noSuchTask {
///     // It already expired; nothing to end.
/// }
/// ```
public struct BackgroundTasksError: Error, CustomStringConvertible {
    /// What kind of error this is. An open set (new daemon versions may add
    /// errors): switch with a `default` case.
    ///
    /// ```swift
    /// switch error.code {
    /// case .daemonUnavailable: runWithoutBackgroundTime()
    /// case .noSuchTask: break
    /// default: throw error
    /// }
    /// ```
    public struct Code: RawRepresentable, Hashable, Sendable, CustomStringConvertible {
        /// A short camel-case name (`noSuchTask`).
        ///
        /// ```swift
        /// print(error.code.rawValue)   // "noSuchTask"
        /// ```
        public let rawValue: String

        /// Wraps a code name.
        ///
        /// ```swift
        /// let code = BackgroundTasksError.Code(rawValue: "noSuchTask")   // == .noSuchTask
        /// ```
        public init(rawValue: String) {
            self.rawValue = rawValue
        }

        /// The task id is unknown, or belongs to another connection, or the
        /// task already expired (`…Error.NoSuchTask`).
        ///
        /// ```swift
        /// if error.code == .noSuchTask { /* already gone */ }
        /// ```
        public static let noSuchTask = Code(rawValue: "noSuchTask")

        /// The caller may not do this: checking in as another app, or a call
        /// only trusted callers may make (`…Error.NotPermitted`).
        ///
        /// ```swift
        /// if error.code == .notPermitted { print(error.message) }
        /// ```
        public static let notPermitted = Code(rawValue: "notPermitted")

        /// A limit was reached, such as the open tasks one connection may hold
        /// (`…Error.LimitExceeded`).
        ///
        /// ```swift
        /// if error.code == .limitExceeded { /* end some tasks first */ }
        /// ```
        public static let limitExceeded = Code(rawValue: "limitExceeded")

        /// An argument was refused; ``BackgroundTasksError/message`` says why
        /// (`org.freedesktop.DBus.Error.InvalidArgs`).
        ///
        /// ```swift
        /// if error.code == .invalidArgument { print(error.message) }
        /// ```
        public static let invalidArgument = Code(rawValue: "invalidArgument")

        /// The app id is not known to the daemon (`…Error.UnknownApplication`).
        ///
        /// ```swift
        /// if error.code == .unknownApplication { /* install the desktop file */ }
        /// ```
        public static let unknownApplication = Code(rawValue: "unknownApplication")

        /// The app's desktop entry does not declare the mode it used
        /// (`X-BgTaskd-Modes=`; `…Error.ModeNotDeclared`).
        ///
        /// ```swift
        /// if error.code == .modeNotDeclared { /* add the mode to X-BgTaskd-Modes */ }
        /// ```
        public static let modeNotDeclared = Code(rawValue: "modeNotDeclared")

        /// The user or the system turned background refresh off
        /// (`…Error.RefreshDisabled`).
        ///
        /// ```swift
        /// if error.code == .refreshDisabled { /* refresh in the foreground only */ }
        /// ```
        public static let refreshDisabled = Code(rawValue: "refreshDisabled")

        /// A wake token is unknown or was already completed (`…Error.NoSuchToken`).
        ///
        /// ```swift
        /// if error.code == .noSuchToken { /* the wake is over */ }
        /// ```
        public static let noSuchToken = Code(rawValue: "noSuchToken")

        /// A push payload is larger than the daemon accepts (`…Error.PayloadTooLarge`).
        ///
        /// ```swift
        /// if error.code == .payloadTooLarge { /* send less */ }
        /// ```
        public static let payloadTooLarge = Code(rawValue: "payloadTooLarge")

        /// The daemon could not store what the call asked for (its disk is
        /// full, or an I/O error), so nothing of it took effect; the message
        /// says why. Try again later (`…Error.StorageFailed`).
        ///
        /// ```swift
        /// if error.code == .storageFailed { retryLater() }
        /// ```
        public static let storageFailed = Code(rawValue: "storageFailed")

        /// bgtaskd cannot be reached: no bus to connect to, nobody owns
        /// `org.bgtaskd.BackgroundTasks1` and it cannot be activated, or it
        /// did not answer within the call timeout. Apps should carry on
        /// without background time.
        ///
        /// ```swift
        /// if error.code == .daemonUnavailable { runWithoutBackgroundTime() }
        /// ```
        public static let daemonUnavailable = Code(rawValue: "daemonUnavailable")

        /// The manager's bus connection is closed (``BackgroundTaskManager/close()``
        /// was called, or the bus went away); the daemon has closed its tasks.
        ///
        /// ```swift
        /// if error.code == .disconnected { manager = try await .connect() }
        /// ```
        public static let disconnected = Code(rawValue: "disconnected")

        /// Any other error; see ``BackgroundTasksError/name``.
        ///
        /// ```swift
        /// if error.code == .other { print(error.name, error.message) }
        /// ```
        public static let other = Code(rawValue: "other")

        /// The raw value.
        ///
        /// ```swift
        /// "\(BackgroundTasksError.Code.noSuchTask)"   // "noSuchTask"
        /// ```
        public var description: String { rawValue }
    }

    /// What kind of error this is.
    ///
    /// ```swift
    /// if error.code == .daemonUnavailable { runWithoutBackgroundTime() }
    /// ```
    public var code: Code

    /// The D-Bus error name, such as `org.bgtaskd.BackgroundTasks1.Error.NoSuchTask`.
    ///
    /// ```swift
    /// print(error.name)
    /// ```
    public var name: String

    /// The human-readable text that came with the error.
    ///
    /// ```swift
    /// print(error.message)   // "no task 7 is open on this connection"
    /// ```
    public var message: String

    /// An error with all three parts given (for tests and wrappers).
    ///
    /// ```swift
    /// let error = BackgroundTasksError(code: .noSuchTask,
    ///     name: "org.bgtaskd.BackgroundTasks1.Error.NoSuchTask", message: "no task 7")
    /// ```
    public init(code: Code, name: String, message: String) {
        self.code = code
        self.name = name
        self.message = message
    }

    /// `name: message`, as `busctl` prints an error.
    ///
    /// ```swift
    /// print(error)   // org.bgtaskd.BackgroundTasks1.Error.NoSuchTask: no task 7 is open on this connection
    /// ```
    public var description: String { "\(name): \(message)" }
}

// MARK: - Mapping from the bus

extension BackgroundTasksError {
    /// The daemon's own errors and InvalidArgs (docs/DESIGN.md §1), by D-Bus name.
    private static let codesByName: [String: Code] = [
        BgTaskError.Code.noSuchTask.rawValue: .noSuchTask,
        BgTaskError.Code.notPermitted.rawValue: .notPermitted,
        BgTaskError.Code.limitExceeded.rawValue: .limitExceeded,
        BgTaskError.Code.invalidArgs.rawValue: .invalidArgument,
        BgTaskError.Code.unknownApplication.rawValue: .unknownApplication,
        BgTaskError.Code.modeNotDeclared.rawValue: .modeNotDeclared,
        BgTaskError.Code.refreshDisabled.rawValue: .refreshDisabled,
        BgTaskError.Code.noSuchToken.rawValue: .noSuchToken,
        BgTaskError.Code.payloadTooLarge.rawValue: .payloadTooLarge,
        BgTaskError.Code.storageFailed.rawValue: .storageFailed,
        // The bus says nobody owns the name and it cannot be activated.
        "org.freedesktop.DBus.Error.ServiceUnknown": .daemonUnavailable,
        "org.freedesktop.DBus.Error.NameHasNoOwner": .daemonUnavailable,
        "org.freedesktop.DBus.Error.Timeout": .daemonUnavailable,
        "org.freedesktop.DBus.Error.TimedOut": .daemonUnavailable,
        // The daemon runs without the plugin of the mode called.
        "org.freedesktop.DBus.Error.UnknownMethod": .daemonUnavailable,
        "org.freedesktop.DBus.Error.UnknownInterface": .daemonUnavailable,
        "org.freedesktop.DBus.Error.UnknownObject": .daemonUnavailable,
        "org.freedesktop.DBus.Error.Disconnected": .disconnected,
        // What sd-bus returns for a call on a connection that is gone (-ENOTCONN).
        "System.Error.ENOTCONN": .disconnected,
    ]

    /// Classifies an error that a call (or the connection) ran into.
    init(_ error: BusError) {
        var code = Self.codesByName[error.name] ?? .other
        if error.name == "org.freedesktop.DBus.Error.NoReply" {
            // sd-bus answers pending calls with NoReply "Connection terminated"
            // when our own connection drops; any other NoReply (the daemon
            // left without answering, or the call timed out) means the daemon
            // is not there to answer.
            code = error.message == "Connection terminated" ? .disconnected : .daemonUnavailable
        }
        self.init(code: code, name: error.name, message: error.message)
    }

    /// The bus itself could not be reached, so neither can the daemon.
    init(connecting error: BusError) {
        // The message already names the bus ("connecting to the session bus: …").
        self.init(code: .daemonUnavailable, name: error.name, message: error.message)
    }

    /// The daemon answered with a reply this SDK cannot read.
    init(badReplyTo member: String, _ error: BusError) {
        self.init(
            code: .other, name: "org.freedesktop.DBus.Error.InconsistentMessage",
            message: "unexpected reply to \(member): \(error.message)")
    }

    /// The manager was closed.
    static let closed = BackgroundTasksError(
        code: .disconnected, name: "org.freedesktop.DBus.Error.Disconnected",
        message: "the background task manager's bus connection is closed")
}
