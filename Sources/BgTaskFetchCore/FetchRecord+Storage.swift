public import BgTaskProtocol
// Storage format of a FetchRecord, version 1, little-endian:
//
//   u8  version (1)
//   u8  interval kind (0 never, 1 minimum, 2 custom)   f64 custom seconds (0 unless custom)
//   u64 registeredAt   u8 has lastFetchAt   u64 lastFetchAt
//   u32 offences
//   u16 history count, then per outcome: u64 at, u8 result (0 missed, 1 newData, 2 noData, 3 failed)
//
// A record is written on every fetch wake and read for every app at start-up;
// Foundation's JSON coders took 180 µs per record with a full history, most of
// a wake's cost and of the daemon's start-up. Records written as JSON by an
// earlier build (first byte '{') still load.

import Foundation

extension FetchRecord {
    static let storageVersion: UInt8 = 1

    /// The record in its storage format.
    public func storageBytes() -> [UInt8] {
        var bytes: [UInt8] = [Self.storageVersion]
        bytes.reserveCapacity(32 + history.count * 9)
        switch interval {
        case .never: bytes.append(0); bytes.append(double: 0)
        case .minimum: bytes.append(1); bytes.append(double: 0)
        case .custom(let seconds): bytes.append(2); bytes.append(double: seconds)
        }
        bytes.append(integer: registeredAt)
        bytes.append(lastFetchAt == nil ? 0 : 1)
        bytes.append(integer: lastFetchAt ?? 0)
        bytes.append(integer: UInt32(clamping: offences))
        let kept = history.suffix(Int(UInt16.max))
        bytes.append(integer: UInt16(kept.count))
        for outcome in kept {
            bytes.append(integer: outcome.at)
            bytes.append(outcome.result.map { UInt8(FetchResult.allCases.firstIndex(of: $0)! + 1) } ?? 0)
        }
        return bytes
    }

    /// Reads a record in its storage format (or the JSON of earlier builds).
    public init(storageBytes bytes: [UInt8]) throws(BgTaskError) {
        if bytes.first == UInt8(ascii: "{") {
            do {
                self = try JSONDecoder().decode(FetchRecord.self, from: Data(bytes))
                return
            } catch {
                throw BgTaskError(.failed, "unreadable fetch record: \(error)")
            }
        }
        var reader = ByteReader(bytes: bytes)
        guard try reader.byte() == Self.storageVersion else {
            throw BgTaskError(.failed, "fetch record of an unknown format version \(bytes.first ?? 0)")
        }
        let kind = try reader.byte()
        let seconds = Double(bitPattern: try reader.integer(UInt64.self))
        let interval: FetchInterval
        switch kind {
        case 0: interval = .never
        case 1: interval = .minimum
        case 2: interval = .custom(seconds)
        default: throw BgTaskError(.failed, "fetch record with an unknown interval kind \(kind)")
        }
        self.init(interval: interval, registeredAt: try reader.integer(UInt64.self))
        let hasLastFetch = try reader.byte() != 0
        let lastFetch = try reader.integer(UInt64.self)
        lastFetchAt = hasLastFetch ? lastFetch : nil
        offences = Int(try reader.integer(UInt32.self))
        let count = Int(try reader.integer(UInt16.self))
        history.reserveCapacity(count)
        for _ in 0..<count {
            let at = try reader.integer(UInt64.self)
            let code = try reader.byte()
            guard code <= FetchResult.allCases.count else { throw BgTaskError(.failed, "fetch record with an unknown result \(code)") }
            history.append(Outcome(at: at, result: code == 0 ? nil : FetchResult.allCases[Int(code) - 1]))
        }
    }
}
