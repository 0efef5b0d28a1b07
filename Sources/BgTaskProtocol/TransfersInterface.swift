/// `org.bgtaskd.BackgroundTasks1.Transfers`, the transfer mode's interface:
/// the names of its members and of its dictionaries' keys.
public enum TransfersInterface {
    public static let name = BgTaskNames.transfers

    public enum Method: String, Sendable, CaseIterable {
        case startDownload = "StartDownload"
        case startUpload = "StartUpload"
        case cancel = "Cancel"
        case listTransfers = "ListTransfers"
        case completeEvents = "CompleteEvents"
    }

    public enum Signal: String, Sendable, CaseIterable {
        case transferProgress = "TransferProgress"
        case transferFinished = "TransferFinished"
    }

    /// The keys of StartDownload's and StartUpload's `options`.
    public enum OptionKey: String, Sendable, CaseIterable {
        /// b: run only on AC power and an unmetered network.
        case discretionary
        /// b: may use a metered network (default true).
        case allowMetered = "allow_metered"
        /// d: give up this long after the start (default 7 days).
        case resourceTimeout = "resource_timeout_s"
        /// a{ss}: request headers.
        case headers
        /// s: StartUpload's HTTP method, `PUT` (default) or `POST`.
        case method
    }

    /// TransferFinished's `result`.
    public enum Result: String, Sendable, CaseIterable {
        /// The server answered 2xx and the file is at its destination (download) or sent (upload).
        case success
        /// The server answered an error status, or the transfer could not be done.
        case failed
        /// `resource_timeout_s` passed first.
        case timedOut
    }

    /// A transfer's `state` in ListTransfers.
    public enum State: String, Sendable, CaseIterable {
        /// Waits for its turn, the network, power, or a retry.
        case waiting
        /// Bytes are moving.
        case running
        /// Done; TransferFinished waits for CompleteEvents.
        case finished
    }

    /// The keys of each ListTransfers dictionary and of TransferFinished's `info`.
    public enum Key: String, Sendable, CaseIterable {
        case transferID = "transfer_id"
        case sessionID = "session_id"
        case appID = "app_id"
        case kind
        case url
        case path
        case state
        case bytesDone = "bytes_done"
        case bytesTotal = "bytes_total"
        case result
        case error
        case status
        case attempts
        /// Why a waiting transfer waits.
        case waitingFor = "waiting_for"
        /// b: a download continued from bytes it had (HTTP Range).
        case resumed
        /// b: the server could not resume, so the download started again from zero.
        case restarted
        case discretionary
        /// u, in TransferFinished's `info` only: how many TransferFinished its token carries.
        case tokenTransfers = "token_transfers"
    }
}
