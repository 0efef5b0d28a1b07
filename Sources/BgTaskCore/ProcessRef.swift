/// A process the shell holds a race-free handle (pidfd) for.
///
/// The `serial` is assigned by the shell and never reused, so a reference to a
/// process that has exited can never reach a new process that got its pid.
public struct ProcessRef: Hashable, Sendable, CustomStringConvertible {
    public let pid: Int32
    public let serial: UInt64

    public init(pid: Int32, serial: UInt64) {
        self.pid = pid
        self.serial = serial
    }

    public var description: String { "pid \(pid)" }
}
