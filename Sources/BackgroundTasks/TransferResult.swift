import BgTaskProtocol

/// How a background transfer ended (`TransferFinished`), handed to the
/// transfer handler.
public struct TransferResult: Sendable, Equatable {
    /// The outcome, as the daemon names it.
    public enum Outcome: Sendable, Equatable {
        /// 2xx; a download is at its destination.
        case success
        /// An error status, or a file that could not be read or written (``TransferInfo/error`` says why).
        case failed
        /// `resource_timeout_s` passed first.
        case timedOut
        /// An outcome this SDK does not know yet.
        case other(String)

        init(wire: String) {
            switch TransfersInterface.Result(rawValue: wire) {
            case .success: self = .success
            case .failed: self = .failed
            case .timedOut: self = .timedOut
            case nil: self = .other(wire)
            }
        }
    }

    public var outcome: Outcome
    /// The transfer, as it finished.
    public var transfer: TransferInfo

    public init(outcome: Outcome, transfer: TransferInfo) {
        self.outcome = outcome
        self.transfer = transfer
    }
}
