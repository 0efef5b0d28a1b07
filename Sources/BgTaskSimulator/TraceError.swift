/// A trace that cannot be read: what is wrong, and on which line.
public struct TraceError: Error, Equatable, Sendable, CustomStringConvertible {
    /// The 1-based line number; 0 when the problem is not on one line.
    public var line: Int
    public var message: String

    public init(line: Int, _ message: String) {
        self.line = line
        self.message = message
    }

    public var description: String { line > 0 ? "line \(line): \(message)" : message }
}
