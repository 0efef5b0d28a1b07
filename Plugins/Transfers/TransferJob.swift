import BgTaskTransferCore

/// What one attempt of a transfer needs, copied off the loop for the HTTP client's threads.
struct TransferJob: Sendable {
    var id: String
    /// Whose directories the file must stay in.
    var app: String
    var kind: TransferRecord.Kind
    var url: String
    /// The destination (download) or the source (upload).
    var path: String
    /// The download's partial file, beside its destination.
    var partial: String
    /// Its name alone, opened relative to the checked directory.
    var partialName: String
    var headers: [String: String]
    var method: String
    /// The validator the partial file was downloaded under: resume only against it.
    var validator: String?
    /// The file's size announced under `validator` (0 while unknown): a range of another size is of another file.
    var total: UInt64

    init(_ record: TransferRecord) {
        id = record.id
        app = record.app
        kind = record.kind
        url = record.url
        path = record.path
        partial = TransferPath.partialFile(for: record.path, id: record.id)
        partialName = TransferPath.partialName(for: String(record.path[record.path.index(after: record.path.lastIndex(of: "/")!)...]), id: record.id)
        headers = record.options.headers
        method = record.options.method
        validator = record.validator
        total = record.bytesTotal
    }
}

/// What an attempt tells the loop, in order: `started` once the server
/// answered, `progress` now and then, `ended` exactly once.
enum TransferReport: Sendable {
    case started(id: String, status: Int, validator: String?, done: UInt64, total: UInt64, resumed: Bool, restarted: Bool)
    case progress(id: String, done: UInt64, total: UInt64)
    case ended(id: String, TransferOutcome)
}

/// How an attempt ended.
enum TransferOutcome: Sendable, Equatable {
    /// 2xx, every byte moved; a download's partial file is flushed to disk.
    case success(status: Int, bytes: UInt64)
    /// The server answered a status that is not success.
    case status(Int, retryAfter: Double?)
    /// The network failed it (reset, timeout, refused, a body cut short): worth retrying.
    case network(String)
    /// It cannot work however often it is tried (a file that cannot be opened, a bad URL).
    case fatal(String)
    /// Cancelled from the loop (Cancel, sleep, stop).
    case cancelled
}
