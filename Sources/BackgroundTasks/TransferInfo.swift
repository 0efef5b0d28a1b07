import BgTaskProtocol
import SDBus

/// A background transfer as the daemon describes it (`ListTransfers`, and
/// the `info` of `TransferFinished`).
public struct TransferInfo: Sendable, Equatable {
    /// Download or upload.
    public enum Kind: String, Sendable, Equatable {
        case download, upload
    }

    /// Where the transfer stands.
    public enum State: String, Sendable, Equatable {
        /// Waits for its turn, the network, power, or a retry (``TransferInfo/waitingFor``).
        case waiting
        /// Bytes are moving.
        case running
        /// Done; its result waits for the app.
        case finished
    }

    public var id: String
    public var session: String
    public var kind: Kind
    /// The URL, with any password in it shown as `***` (`http://user:***@host/…`);
    /// the transfer itself uses it as given.
    public var url: String
    /// Where the download lands, or what the upload sends.
    public var path: String
    public var state: State
    public var bytesDone: UInt64
    /// 0 while unknown.
    public var bytesTotal: UInt64
    /// Failed attempts so far (each retried).
    public var attempts: Int
    /// The download went on from bytes it had (HTTP Range).
    public var resumed: Bool
    /// The server could not resume it, so it started again from zero.
    public var restarted: Bool
    public var discretionary: Bool
    /// The last HTTP status, once there is one.
    public var status: Int?
    /// Why the last attempt failed, or why the transfer did.
    public var error: String?
    /// What a waiting transfer waits for (`its turn`, `a retry`, `network`,
    /// `unmetered network`, `AC power` …).
    public var waitingFor: String?
    /// In a result: how many results its wake carries (when the daemon says).
    var resultsInWake: UInt64?

    /// Reads one `a{sv}` of the daemon's; unknown keys are skipped, so a
    /// newer daemon's dictionaries still read.
    init(_ value: BusValue) {
        var fields: [String: BusValue] = [:]
        if case .dictionary(_, _, let entries) = value {
            for entry in entries { if case .string(let key) = entry.key { fields[key] = entry.value.unwrapped } }
        }
        typealias Key = TransfersInterface.Key
        func string(_ key: Key) -> String? { if case .string(let text)? = fields[key.rawValue] { text } else { nil } }
        func number(_ key: Key) -> UInt64? {
            switch fields[key.rawValue] {
            case .uint64(let n)?: n
            case .uint32(let n)?: UInt64(n)
            default: nil
            }
        }
        func flag(_ key: Key) -> Bool { if case .bool(let b)? = fields[key.rawValue] { b } else { false } }
        id = string(.transferID) ?? ""
        session = string(.sessionID) ?? ""
        kind = string(.kind).flatMap(Kind.init(rawValue:)) ?? .download
        url = string(.url) ?? ""
        path = string(.path) ?? ""
        state = string(.state).flatMap(State.init(rawValue:)) ?? .waiting
        bytesDone = number(.bytesDone) ?? 0
        bytesTotal = number(.bytesTotal) ?? 0
        attempts = Int(clamping: number(.attempts) ?? 0)
        resumed = flag(.resumed)
        restarted = flag(.restarted)
        discretionary = flag(.discretionary)
        status = number(.status).map { Int(clamping: $0) }
        error = string(.error)
        waitingFor = string(.waitingFor)
        resultsInWake = number(.tokenTransfers)
    }
}
