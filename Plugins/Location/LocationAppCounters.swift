/// What the location mode counts per app, for `bgtaskctl apps`.
struct LocationAppCounters: Codable, Equatable {
    /// Events the app completed.
    var delivered: UInt64 = 0
    /// Events it did not complete in time.
    var offences: UInt64 = 0

    /// The record as JSON, written by hand (JSONEncoder costs more than the rest of a completion).
    var json: [UInt8] { Array("{\"delivered\":\(delivered),\"offences\":\(offences)}".utf8) }
}
