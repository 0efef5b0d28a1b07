import BgTaskProtocol
import BgTaskPushCore
import Testing

@Suite struct PushPayloadTests {
    @Test func silentAlertAndData() throws {
        let silent = try PushPayload(json: #"{"aps":{"content-available":1},"content-id":42}"#, maximumBytes: 4096)
        #expect(silent.isSilent && silent.alert == nil)
        let alert = try PushPayload(json: #"{"aps":{"alert":{"title":"Rain","body":"at 5"}}}"#, maximumBytes: 4096)
        #expect(alert.alert == .init(title: "Rain", body: "at 5"))
        #expect(!alert.isSilent)
        let plain = try PushPayload(json: #"{"aps":{"alert":"Hello"}}"#, maximumBytes: 4096)
        #expect(plain.alert?.body == "Hello")
        let both = try PushPayload(json: #"{"aps":{"alert":"Hi","content-available":1}}"#, maximumBytes: 4096)
        #expect(both.contentAvailable && !both.isSilent)
        let neither = try PushPayload(json: #"{"aps":{},"x":[1,{"y":null}]}"#, maximumBytes: 4096)
        #expect(!neither.contentAvailable && neither.alert == nil)
    }

    @Test(arguments: [
        ("{", "not valid JSON"),
        ("[1,2]", "must be a JSON object, not an array"),
        (#""hi""#, "must be a JSON object, not a string"),
        (#"{"x":1}"#, "no \"aps\" object"),
        (#"{"aps":[1]}"#, "\"aps\" must be an object, not an array"),
        (#"{"aps":{"content-available":"yes"}}"#, "content-available\" must be 1"),
        (#"{"aps":{"content-available":2}}"#, "content-available\" must be 1 (or 0), not 2"),
        // It said "not a number" of a number.
        (#"{"aps":{"content-available":18446744073709551617}}"#, "content-available\" must be 1 (or 0), not 1.8446744073709552e+19"),
        (#"{"aps":{"alert":7}}"#, "\"aps.alert\" must be a string or an object"),
        (#"{"aps":{"alert":{"title":7}}}"#, "\"aps.alert.title\" must be a string"),
        (#"{"aps":{"alert":"\ud800"}}"#, "not valid UTF-8"),
        (#"{"aps":{"alert":"\udc00x"}}"#, "not valid UTF-8"),
        (#"{"aps":{},"n":1e999}"#, "not valid JSON"),
    ])
    func badPayloadsSayWhy(_ json: String, _ reason: String) {
        let error = #expect(throws: BgTaskError.self) { try PushPayload(json: json, maximumBytes: 4096) }
        #expect(error?.code == .invalidArgs)
        #expect(error?.message.contains(reason) == true, "\(error?.message ?? "")")
    }

    @Test func surrogatePairsAreFine() throws {
        _ = try PushPayload(json: #"{"aps":{"alert":"\ud83d\ude00"}}"#, maximumBytes: 4096)
    }

    @Test func nestingDeeperThan32IsRefused() throws {
        func nested(_ depth: Int) -> String {
            #"{"aps":{},"d":"# + String(repeating: "[", count: depth - 1) + String(repeating: "]", count: depth - 1) + "}"
        }
        _ = try PushPayload(json: nested(32), maximumBytes: 4096)
        let error = #expect(throws: BgTaskError.self) { try PushPayload(json: nested(33), maximumBytes: 4096) }
        #expect(error?.message.contains("deeper than 32") == true)
        // Brackets inside strings do not count.
        _ = try PushPayload(json: #"{"aps":{},"s":""# + String(repeating: "[", count: 100) + #""}"#, maximumBytes: 4096)
    }

    @Test func oversizePayloadIsPayloadTooLarge() {
        let json = #"{"aps":{},"pad":""# + String(repeating: "x", count: 5000) + #""}"#
        let error = #expect(throws: BgTaskError.self) { try PushPayload(json: json, maximumBytes: 4096) }
        #expect(error?.code == .payloadTooLarge)
        #expect(error?.message.contains("4096") == true)
    }
}

@Suite struct TokenBucketTests {
    let t0: UInt64 = 1_000_000_000_000

    @Test func spendsThenRefillsOverThePeriod() {
        var bucket = TokenBucket(capacity: 2, period: 3600, now: t0)
        let taken = [t0, t0, t0, t0 + 1_700_000_000, t0 + 1_800_000_000].map { bucket.take(at: $0) }
        // Two at once, then none; 28 min later 0.94 of a token; 30 min later one.
        #expect(taken == [true, true, false, false, true])
        #expect(bucket.available(at: t0 + 100 * 3_600_000_000) == 2, "never more than the capacity")
    }

    /// Spent while the clock was a year ahead, then the clock was set back:
    /// the bucket refills from then on. Before, it stayed empty (and silent
    /// pushes held) until the clock had caught up with the year.
    @Test func aClockSetBackRefillsFromThen() {
        let ahead = t0 + 365 * 86_400_000_000
        var bucket = TokenBucket(capacity: 2, period: 3600, now: ahead)
        #expect(bucket.take(at: ahead) && bucket.take(at: ahead))
        let taken = [t0, t0 + 1_800_000_000].map { bucket.take(at: $0) }
        #expect(taken == [false, true])
    }

    @Test func zeroCapacityNeverWakes() {
        var bucket = TokenBucket(capacity: 0, now: t0)
        let taken = bucket.take(at: t0 + 10 * 3_600_000_000)
        #expect(!taken)
    }
}

@Suite struct PushInboxTests {
    let now: UInt64 = 1_700_000_000_000_000
    var sequence: UInt64 = 0

    mutating func push(_ id: String, silent: Bool = true, alert: Bool = false, expiration: UInt64? = nil,
                       collapse: String? = nil) -> PushRecord {
        sequence += 1
        return PushRecord(id: id, app: "org.example.App", payload: "{}", priority: alert ? 10 : 5, expiration: expiration,
                          collapseID: collapse, receivedAt: now, sequence: sequence, hasAlert: alert, isSilent: silent && !alert,
                          state: .held)
    }

    @Test mutating func silentBudgetThenHeldThenRideAlongWithTheNextAlert() {
        var inbox = PushInbox(bucket: TokenBucket(capacity: 2, now: now))
        var admissions: [PushInbox.Admission] = []
        for i in 1...5 {
            var p = push("s\(i)")
            admissions.append(inbox.admit(&p, canWake: true, now: now).admission)
        }
        #expect(admissions == [.deliverNow, .deliverNow, .hold, .hold, .hold])
        var alert = push("a1", alert: true)
        #expect(inbox.admit(&alert, canWake: true, now: now).admission == .deliverNow, "alerts are not rate-limited")
        #expect(inbox.takeHeld().map(\.id) == ["s3", "s4", "s5"])
        #expect(inbox.heldCount == 0)
    }

    /// A silent push to an app in the foreground wakes nothing: it is
    /// delivered whatever the budget, and takes nothing of it.
    @Test mutating func silentPushesInTheForegroundSpendNothing() {
        var inbox = PushInbox(bucket: TokenBucket(capacity: 1, now: now))
        for i in 1...3 {
            var p = push("f\(i)")
            #expect(inbox.admit(&p, canWake: true, inForeground: true, now: now).admission == .deliverNow)
        }
        #expect(inbox.bucket.available(at: now) == 1)
    }

    /// The budget counts wakes: a token spent on a wake that did not happen
    /// (the app could not be launched) goes back; one whose wake came, or
    /// that the app overstayed, stays spent. Before, a failed launch spent
    /// the budget, and a fixed app got no silent wake for up to an hour.
    @Test mutating func aWakeThatDidNotHappenGivesItsTokenBack() {
        var inbox = PushInbox(bucket: TokenBucket(capacity: 2, now: now))
        var first = push("s1"), second = push("s2")
        #expect(inbox.admit(&first, canWake: true, now: now).admission == .deliverNow)
        #expect(inbox.admit(&second, canWake: true, now: now).admission == .deliverNow)
        #expect(inbox.bucket.available(at: now) == 0)
        // s1's launch failed; s2 waited its turn behind it: both back.
        inbox.hold("s1", refundAt: now)
        #expect(inbox.holdDue(refundAt: now) { _ in true }.map(\.id) == ["s2"])
        #expect(inbox.bucket.available(at: now) == 2)
        // Held, they ride along later for free: nothing more to give back.
        inbox.hold("s1", refundAt: now)
        #expect(inbox.bucket.available(at: now) == 2)

        var third = push("s3"), fourth = push("s4")
        #expect(inbox.admit(&third, canWake: true, now: now).admission == .deliverNow)
        #expect(inbox.admit(&fourth, canWake: true, now: now).admission == .deliverNow)
        inbox.wakeCame("s3")
        inbox.hold("s3", refundAt: now)  // woken, then it failed: the wake happened
        inbox.hold("s4")                 // overstayed: no refund asked
        #expect(inbox.bucket.available(at: now) == 0)
    }

    @Test mutating func refreshOffHoldsEvenAlertsButSpendsNothing() {
        var inbox = PushInbox(bucket: TokenBucket(capacity: 1, now: now))
        var silent = push("s1")
        var alert = push("a1", alert: true)
        #expect(inbox.admit(&silent, canWake: false, now: now).admission == .hold)
        #expect(inbox.admit(&alert, canWake: false, now: now).admission == .hold)
        #expect(inbox.bucket.available(at: now) == 1)
    }

    @Test mutating func collapseReplacesTheHeldOne() {
        var inbox = PushInbox(bucket: TokenBucket(capacity: 0, now: now))
        var first = push("c1", collapse: "score")
        var other = push("x", collapse: "other")
        var second = push("c2", collapse: "score")
        _ = inbox.admit(&first, canWake: true, now: now)
        _ = inbox.admit(&other, canWake: true, now: now)
        let result = inbox.admit(&second, canWake: true, now: now)
        #expect(result.removed.map(\.push.id) == ["c1"])
        #expect(inbox.pushes.map(\.id) == ["x", "c2"])
        #expect(inbox.counts.collapsed == 1)
    }

    /// A push due with no wake yet (waiting its turn among those on their
    /// way) was kept beside the newer one with its collapse id: both reached
    /// the app (found by an outside test). One on its way stays until its wake.
    @Test mutating func collapseReplacesOneDueButNotOnItsWay() {
        var inbox = PushInbox(bucket: TokenBucket(capacity: 0, now: now))
        var flying = push("c1", alert: true, collapse: "score")
        var waiting = push("c2", alert: true, collapse: "score")
        var newest = push("c3", alert: true, collapse: "score")
        #expect(inbox.admit(&flying, canWake: true, now: now).admission == .deliverNow)
        #expect(inbox.admit(&waiting, canWake: true, now: now) { $0.id == "c1" }.removed.isEmpty)
        let result = inbox.admit(&newest, canWake: true, now: now) { $0.id == "c1" }
        #expect(result.removed.map(\.push.id) == ["c2"])
        #expect(inbox.pushes.map(\.id) == ["c1", "c3"])
    }

    /// A push on its way whose wake came late: dropped if it expired or a
    /// newer push with its collapse id came meanwhile (found by an outside
    /// test: the machine asleep, both reached the app at the wake, and one
    /// expired long before); otherwise it goes.
    @Test mutating func aPushWhoseWakeCameLateIsDroppedIfStale() {
        var inbox = PushInbox(bucket: TokenBucket(capacity: 0, now: now))
        let second = now / 1_000_000
        var records = [push("e1", alert: true, expiration: second + 2)]
        records.append(push("c1", alert: true, collapse: "score"))
        records.append(push("c2", alert: true, collapse: "score"))
        records.append(push("p1", alert: true, expiration: second + 100))
        // All on their way: none replaces another as it comes.
        for index in records.indices { _ = inbox.admit(&records[index], canWake: true, now: now) { _ in true } }
        let later = now + 5_000_000
        #expect(inbox.dropStale("e1", at: later) == "it expired before it reached the app")
        #expect(inbox.dropStale("c1", at: later) == "replaced by c2 (collapse id score)")
        #expect(inbox.dropStale("c2", at: later) == nil)
        #expect(inbox.dropStale("p1", at: later) == nil)
        #expect(inbox.pushes.map(\.id) == ["c2", "p1"])
        #expect(inbox.counts.expired == 1 && inbox.counts.collapsed == 1)
    }

    @Test mutating func expiration() {
        var inbox = PushInbox(bucket: TokenBucket(capacity: 0, now: now))
        var stale = push("old", expiration: now / 1_000_000 - 1)
        #expect(inbox.admit(&stale, canWake: true, now: now).admission == .drop("it expired before it arrived"))
        var nowOrNever = push("zero", expiration: 0)
        if case .drop = inbox.admit(&nowOrNever, canWake: true, now: now).admission {} else { Issue.record("expiration 0 held") }
        var later = push("later", expiration: now / 1_000_000 + 60)
        _ = inbox.admit(&later, canWake: true, now: now)
        #expect(inbox.earliestExpiration == now / 1_000_000 + 60)
        #expect(inbox.dropExpired(at: now + 59_000_000).isEmpty)
        #expect(inbox.dropExpired(at: now + 60_000_000).map(\.id) == ["later"])
        #expect(inbox.counts.expired == 3)
    }

    @Test mutating func nowOrNeverGoesWhenItCannotGoNow() {
        var inbox = PushInbox(bucket: TokenBucket(capacity: 5, now: now))
        var asleep = push("asleep", expiration: 0)
        #expect(inbox.admit(&asleep, canWake: true, isAsleep: true, now: now).admission
                == .drop("it had expiration 0 (now or never) and the machine sleeps"))
        var awake = push("awake", expiration: 0)
        #expect(inbox.admit(&awake, canWake: true, now: now).admission == .deliverNow)
        var kept = push("kept")
        _ = inbox.admit(&kept, canWake: true, now: now)
        // Their wake failed: both go back to wait, and the one for now or never goes.
        inbox.hold("awake")
        inbox.hold("kept")
        #expect(inbox.dropNowOrNever().map(\.id) == ["awake"])
        #expect(inbox.pushes.map(\.id) == ["kept"])
    }

    @Test mutating func overflowDropsTheOldestSilentNeverAnAlert() {
        var inbox = PushInbox(bucket: TokenBucket(capacity: 0, now: now))
        var alert = push("alert", alert: true)
        _ = inbox.admit(&alert, canWake: false, now: now)
        for i in 0..<PushInbox.limit {
            var p = push("s\(i)")
            _ = inbox.admit(&p, canWake: true, now: now)
        }
        #expect(inbox.heldCount == PushInbox.limit)
        #expect(inbox.pushes.first?.id == "alert")
        #expect(!inbox.pushes.contains { $0.id == "s0" })
        #expect(inbox.counts.overflowed == 1)
    }

    /// Alerts alone have a bound too: over the limit the oldest goes. A
    /// sender of alerts (a UnifiedPush server) filled the disk with them.
    @Test mutating func overflowOfAlertsAloneDropsTheOldestAlert() {
        var inbox = PushInbox(bucket: TokenBucket(capacity: 0, now: now))
        for i in 0...PushInbox.limit {
            var alert = push("a\(i)", alert: true)
            _ = inbox.admit(&alert, canWake: false, now: now)
        }
        #expect(inbox.heldCount == PushInbox.limit)
        #expect(inbox.pushes.first?.id == "a1" && inbox.pushes.last?.id == "a\(PushInbox.limit)")
        #expect(inbox.counts.overflowed == 1)
    }

    /// Alerts to an app being launched that never checks in stay due (each
    /// wants a wake now): they were never counted against the limit, and
    /// 3,000 of them were kept. Those waiting count now, whatever their
    /// state; those a wake carries are never dropped.
    @Test mutating func duePushesWithNoWakeCountAgainstTheLimit() {
        var inbox = PushInbox(bucket: TokenBucket(capacity: 0, now: now))
        let onTheirWay: Set<String> = ["a0", "a1"]
        for i in 0...(PushInbox.limit + 2) {
            var alert = push("a\(i)", alert: true)
            #expect(inbox.admit(&alert, canWake: true, now: now) { onTheirWay.contains($0.id) }.admission == .deliverNow)
        }
        #expect(inbox.heldCount == 0)
        #expect(inbox.pushes.count == PushInbox.limit + 2, "1,000 waiting and the two on their way")
        #expect(inbox.pushes.prefix(3).map(\.id) == ["a0", "a1", "a3"], "the oldest waiting one went, not those on their way")
        #expect(inbox.counts.overflowed == 1)
    }

    /// A silent push arriving when 1,000 alerts wait is the one the cap
    /// drops: it was still answered as held, stored and acknowledged, and
    /// came back after a restart as the 1,001st.
    @Test mutating func aNewPushTheCapDropsIsDroppedAsItComes() {
        var inbox = PushInbox(bucket: TokenBucket(capacity: 0, now: now))
        for i in 0..<PushInbox.limit {
            var alert = push("a\(i)", alert: true)
            _ = inbox.admit(&alert, canWake: false, now: now)
        }
        var silent = push("new")
        let (admission, removed) = inbox.admit(&silent, canWake: false, now: now)
        #expect(admission == .drop("the app had more than \(PushInbox.limit) pushes waiting"))
        #expect(removed.isEmpty, "none of the alerts goes for it")
        #expect(inbox.pushes.count == PushInbox.limit && !inbox.pushes.contains { $0.id == "new" })
        #expect(inbox.counts.overflowed == 1)
    }
}
