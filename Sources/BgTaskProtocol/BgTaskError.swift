/// An error answered on the bus: a D-Bus error name and a message for people.
///
/// The engine, the plugins, the SDK and the command-line tool all use this one
/// type and its one table of names (docs/DESIGN.md §1).
public struct BgTaskError: Error, Equatable, Sendable, CustomStringConvertible {
    /// A full D-Bus error name.
    public struct Code: Hashable, Sendable, RawRepresentable, CustomStringConvertible {
        public let rawValue: String
        public init(rawValue: String) { self.rawValue = rawValue }

        /// One of bgtaskd's own names, `org.bgtaskd.BackgroundTasks1.Error.<short>`.
        public static func bgtaskd(_ short: String) -> Code { Code(rawValue: BgTaskNames.errorPrefix + short) }

        /// A malformed or out-of-range argument.
        public static let invalidArgs = Code(rawValue: "org.freedesktop.DBus.Error.InvalidArgs")
        /// Anything else.
        public static let failed = Code(rawValue: "org.freedesktop.DBus.Error.Failed")
        /// The task is unknown or belongs to someone else.
        public static let noSuchTask = bgtaskd("NoSuchTask")
        /// The caller may not do this.
        public static let notPermitted = bgtaskd("NotPermitted")
        /// The app has no desktop entry.
        public static let unknownApplication = bgtaskd("UnknownApplication")
        /// The app's desktop entry does not declare the mode.
        public static let modeNotDeclared = bgtaskd("ModeNotDeclared")
        /// Background App Refresh is off or restricted for the app.
        public static let refreshDisabled = bgtaskd("RefreshDisabled")
        /// A per-connection or per-app limit was reached.
        public static let limitExceeded = bgtaskd("LimitExceeded")
        /// A push payload over the size limit (the remote-notification mode).
        public static let payloadTooLarge = bgtaskd("PayloadTooLarge")
        /// A wake token that is unknown, spent or someone else's.
        public static let noSuchToken = bgtaskd("NoSuchToken")
        /// A write could not be made durable (the disk is full, an I/O error):
        /// nothing of the call took effect. The message says why.
        public static let storageFailed = bgtaskd("StorageFailed")

        /// Every name bgtaskd or its bundled modes answer with.
        public static let all: [Code] = [
            invalidArgs, failed, noSuchTask, notPermitted, unknownApplication, modeNotDeclared, refreshDisabled,
            limitExceeded, payloadTooLarge, noSuchToken, storageFailed,
        ]

        /// The last component (`NoSuchTask`, `InvalidArgs`).
        public var shortName: String { rawValue.split(separator: ".").last.map(String.init) ?? rawValue }

        public var description: String { rawValue }
    }

    public var code: Code
    public var message: String

    public init(_ code: Code, _ message: String) {
        self.code = code
        self.message = message
    }

    /// The full D-Bus error name.
    public var name: String { code.rawValue }

    /// `org.freedesktop.DBus.Error.InvalidArgs` with `message`.
    public static func invalidArgs(_ message: String) -> BgTaskError { BgTaskError(.invalidArgs, message) }

    /// `org.freedesktop.DBus.Error.Failed` with `message`.
    public static func failed(_ message: String) -> BgTaskError { BgTaskError(.failed, message) }

    public var description: String { "\(code.shortName): \(message)" }

    /// Why a string argument cannot be read (sd-bus answers `-EBADMSG`).
    public static let unreadableString =
        "a string argument cannot be read: it is not valid UTF-8, or it holds a Unicode noncharacter "
        + "(U+FDD0–U+FDEF, or a code point ending in FFFE or FFFF), which the D-Bus specification allows "
        + "but the bus library bgtaskd is built on (libsystemd's sd-bus) refuses"
}
