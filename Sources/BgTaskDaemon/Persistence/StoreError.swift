/// Why ``StateStore`` could not open the state database or carry out a call.
///
/// ``description`` is the whole message, written for the person who has to
/// act on it: it names the file, says what is wrong and what to do. Start-up
/// refusals (``Code-swift.struct/newerSchema``, ``Code-swift.struct/notADatabase``,
/// ``Code-swift.struct/corrupt``, ``Code-swift.struct/notWritable``) never
/// modify the file: the daemon stops rather than reset state it cannot read.
public struct StoreError: Error, CustomStringConvertible {
    /// The kind of failure; an extensible set of names, not a closed enum.
    public struct Code: Hashable, Sendable, CustomStringConvertible {
        public let name: String

        public init(_ name: String) { self.name = name }

        public var description: String { name }

        /// The database holds migrations this version does not know.
        public static let newerSchema = Code("newerSchema")
        /// The file is not an SQLite database, or one of another program.
        public static let notADatabase = Code("notADatabase")
        /// SQLite found the database damaged.
        public static let corrupt = Code("corrupt")
        /// The state directory or the database cannot be created or written.
        public static let notWritable = Code("notWritable")
        /// Another process holds the database locked beyond the busy timeout.
        public static let busy = Code("busy")
        /// A read or write failed at run time (an I/O error, …).
        public static let operationFailed = Code("operationFailed")
        /// The file system of the state directory has no room left: nothing
        /// was written; writes work again once there is room.
        public static let diskFull = Code("diskFull")
        /// A value cannot be stored as given (e.g. a timestamp beyond `Int64.max`).
        public static let invalidArgument = Code("invalidArgument")
        /// The body of ``StateStore/transaction(_:)`` threw; nothing of it was committed.
        public static let transactionAborted = Code("transactionAborted")
        /// The store was used after ``StateStore/close()``.
        public static let closed = Code("closed")
    }

    /// What went wrong.
    public var code: Code
    /// The database file (or the directory that should hold it).
    public var path: String
    /// The complete, human-readable message, starting with ``path``.
    public var message: String
    /// The SQLite, system or caller error behind this one, if any.
    public var underlying: (any Error)?

    public init(_ code: Code, path: String, message: String, underlying: (any Error)? = nil) {
        self.code = code
        self.path = path
        self.message = message
        self.underlying = underlying
    }

    public var description: String { message }
}
