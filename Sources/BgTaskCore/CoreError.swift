/// An error the core answers a request with. The shell maps ``Code`` to a
/// D-Bus error name and sends ``message`` as its text.
public struct CoreError: Error, Equatable, Sendable, CustomStringConvertible {
    /// What kind of error; extensible, so modes can add their own.
    public struct Code: Hashable, Sendable, RawRepresentable, CustomStringConvertible {
        public let rawValue: String
        public init(rawValue: String) { self.rawValue = rawValue }

        /// A malformed or out-of-range argument (`org.freedesktop.DBus.Error.InvalidArgs`).
        public static let invalidArgs = Code(rawValue: "InvalidArgs")
        /// The task is unknown or belongs to someone else.
        public static let noSuchTask = Code(rawValue: "NoSuchTask")
        /// The caller may not do this.
        public static let notPermitted = Code(rawValue: "NotPermitted")
        /// The app has no desktop entry.
        public static let unknownApplication = Code(rawValue: "UnknownApplication")
        /// The app's desktop entry does not declare the mode.
        public static let modeNotDeclared = Code(rawValue: "ModeNotDeclared")
        /// Background App Refresh is off or restricted for the app.
        public static let refreshDisabled = Code(rawValue: "RefreshDisabled")
        /// A per-connection or per-app limit was reached.
        public static let limitExceeded = Code(rawValue: "LimitExceeded")
        /// A push payload over the size limit.
        public static let payloadTooLarge = Code(rawValue: "PayloadTooLarge")
        /// A wake token that is unknown, spent or someone else's.
        public static let noSuchToken = Code(rawValue: "NoSuchToken")
        /// A write could not be made durable; nothing of the request took effect.
        public static let storageFailed = Code(rawValue: "StorageFailed")
        /// Anything else (`org.freedesktop.DBus.Error.Failed`).
        public static let failed = Code(rawValue: "Failed")

        public var description: String { rawValue }
    }

    public var code: Code
    public var message: String

    public init(_ code: Code, _ message: String) {
        self.code = code
        self.message = message
    }

    public var description: String { "\(code): \(message)" }
}
