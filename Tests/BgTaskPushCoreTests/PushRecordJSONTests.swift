@testable import BgTaskPushCore
import Foundation
import Testing

/// The hand-written record JSON must stay what JSONEncoder writes, field for
/// field: records are read back with JSONDecoder, and those of older runs too.
struct PushRecordJSONTests {
    let push = PushRecord(
        id: "p1-\"quoted\"\\\n\t\u{1}é", app: "org.example.App", payload: "{\"aps\":{\"alert\":\"a \\\"b\\\" \u{2028} c/d\"}}",
        priority: 10, expiration: 1_900_000_000, collapseID: "c/1", receivedAt: 1_700_000_000_123_456,
        sequence: 42, hasAlert: true, isSilent: false, state: .held)

    func state() throws -> PushAppState {
        var bucket = TokenBucket(capacity: 3, period: 3600, now: 1_700_000_000_000_000)
        _ = bucket.take(at: 1_700_000_000_500_001)
        var counts = try JSONDecoder().decode(PushInbox.Counts.self, from: Data(
            "{\"received\":0,\"delivered\":0,\"expired\":0,\"overflowed\":0,\"collapsed\":0,\"offences\":0}".utf8))
        (counts.received, counts.delivered, counts.expired, counts.overflowed, counts.collapsed, counts.offences) =
            (1_234_567_890, 0, 4, 3, 2, 1)
        return PushAppState(bucket: bucket, counts: counts, version: 7)
    }

    /// Each type's stored properties are the ones the writer knows: a field
    /// added to one of them fails here until the writer writes it.
    @Test func writerKnowsEveryStoredProperty() throws {
        let state = try state()
        func labels(_ value: Any) -> [String] { Mirror(reflecting: value).children.compactMap(\.label) }
        #expect(labels(push) == [
            "id", "app", "payload", "priority", "expiration", "collapseID", "receivedAt", "sequence", "hasAlert", "isSilent", "state",
        ])
        #expect(labels(state.bucket) == ["capacity", "period", "tokens", "updatedAt"])
        #expect(labels(state.counts) == ["received", "delivered", "expired", "overflowed", "collapsed", "offences"])
        #expect(labels(state) == ["bucket", "counts", "version"])
    }

    @Test func writesTheKeysJSONEncoderWrites() throws {
        let state = try state()
        #expect(try keys(PushRecordJSON.write(push)) == keys(Array(JSONEncoder().encode(push))))
        #expect(try keys(PushRecordJSON.write(state)) == keys(Array(JSONEncoder().encode(state))))
    }

    @Test func readsBackEqual() throws {
        let state = try state()
        let decoder = JSONDecoder()
        #expect(try decoder.decode(PushRecord.self, from: Data(PushRecordJSON.write(push))) == push)
        let decoded = try decoder.decode(PushAppState.self, from: Data(PushRecordJSON.write(state)))
        #expect(decoded.bucket == state.bucket && decoded.counts == state.counts && decoded.version == 7)
        let stored = try decoder.decode(StoredPush.self, from: Data(PushRecordJSON.encode(push, appState: state)))
        #expect(stored.push == push)
        #expect(stored.appState?.version == 7)
    }

    /// The keys of a JSON object, nested objects' as `outer.inner`, sorted.
    private func keys(_ bytes: [UInt8]) throws -> [String] {
        let object = try #require(try JSONSerialization.jsonObject(with: Data(bytes)) as? [String: Any])
        return object.flatMap { key, value in
            [key] + ((value as? [String: Any])?.keys.map { key + "." + $0 } ?? [])
        }.sorted()
    }
}
