import BgTaskProtocol
// Implementation notes
//
// An app's pushes wait here from DeliverPush until the app completes them.
// A new push is:
//   - dropped when already expired, or when it has expiration 0 ("now or
//     never") and cannot go now;
//   - delivered now when it shows an alert (alerts are not rate-limited), or
//     when it is silent and the app's bucket has a token — provided the app
//     may be woken (Background App Refresh available). The budget counts
//     wakes: a token spent on a wake that then did not happen (the app
//     could not be launched) goes back;
//   - held otherwise: over the silent budget, refresh not available, or a
//     push that asks for no wake at all. Held pushes ride along with the
//     app's next wake of any kind, without spending tokens.
// A newer push with the same collapse id replaces a held one, and one due
// with no wake yet; one on its way whose wake comes after the newer one
// arrived goes then, as does one that expired while it waited for its wake
// (the machine asleep, the app starting, a restart). Over `limit`
// waiting pushes (held, or due with no wake yet: an app being launched that
// never checks in keeps them due), the oldest silent ones go, then the
// oldest alerts; a push on its way to the app never does.

/// One app's waiting pushes and silent-push budget, with the rules for them.
public struct PushInbox: Sendable, Equatable {
    /// What happens to a new push.
    public enum Admission: Sendable, Equatable {
        case deliverNow
        case hold
        case drop(String)
    }

    /// Counters for `bgtaskctl` and logs.
    public struct Counts: Sendable, Equatable, Codable {
        public var received = 0
        public var delivered = 0
        public var expired = 0
        public var overflowed = 0
        public var collapsed = 0
        public var offences = 0
    }

    /// Waiting pushes an app may have before the oldest silent ones (then the oldest alerts) are dropped.
    public static let limit = 1000

    public private(set) var pushes: [PushRecord] = []
    public var bucket: TokenBucket
    /// Due silent pushes that spent a token on a wake that has not come yet
    /// (in memory only: after a restart what they spent stays spent).
    private var spentOnWake: Set<String> = []
    public var counts = Counts()

    public init(bucket: TokenBucket) {
        self.bucket = bucket
    }

    public var heldCount: Int {
        // By index: no copy of each push (with its payload) per count.
        var count = 0
        for index in pushes.indices where pushes[index].state == .held { count += 1 }
        return count
    }

    /// Puts a push that was stored earlier back (after a restart), in order.
    public mutating func restore(_ push: PushRecord) {
        let index = pushes.firstIndex { $0.sequence > push.sequence } ?? pushes.count
        pushes.insert(push, at: index)
    }

    /// Decides a new push's fate and applies it. Returns the decision (the push's
    /// state is set to match) and the pushes this removed, with why.
    /// `isOnItsWay` names the pushes a wake carries now: never dropped.
    /// A silent push to an app in the foreground (`inForeground`) wakes
    /// nothing, so it takes nothing of the hourly budget of silent wakes.
    /// While the machine sleeps (`isAsleep`) nothing reaches the app now: a
    /// push with expiration 0 (now or never) is dropped.
    public mutating func admit(
        _ push: inout PushRecord, canWake: Bool, inForeground: Bool = false, isAsleep: Bool = false, now: UInt64,
        isOnItsWay: (PushRecord) -> Bool = { _ in false }
    ) -> (admission: Admission, removed: [(push: PushRecord, reason: String)]) {
        counts.received += 1
        if push.isExpired(at: now) {
            counts.expired += 1
            return (.drop("it expired before it arrived"), [])
        }
        if push.expiration == 0, isAsleep {
            counts.expired += 1
            return (.drop("it had expiration 0 (now or never) and the machine sleeps"), [])
        }
        var admission: Admission
        if push.hasAlert {
            admission = canWake ? .deliverNow : .hold
        } else if push.isSilent, canWake, inForeground || bucket.take(at: now) {
            admission = .deliverNow
            if !inForeground { spentOnWake.insert(push.id) }
        } else {
            admission = .hold
        }
        if admission == .hold, push.expiration == 0 {
            counts.expired += 1
            return (.drop("it had expiration 0 (now or never) and cannot be delivered now"), [])
        }
        var removed: [(push: PushRecord, reason: String)] = []
        if let collapse = push.collapseID {
            // One on its way goes when its wake comes (dropStale): its token is out.
            for old in pushes where old.collapseID == collapse && !isOnItsWay(old) {
                removed.append((old, "replaced by \(push.id) (collapse id \(collapse))"))
                counts.collapsed += 1
                spentOnWake.remove(old.id)
            }
            pushes.removeAll { $0.collapseID == collapse && !isOnItsWay($0) }
        }
        push.state = admission == .deliverNow ? .due : .held
        pushes.append(push)
        // Counted only past the limit: most apps hold a few pushes.
        guard pushes.count > Self.limit else { return (admission, removed) }
        var waiting = pushes.count { !isOnItsWay($0) }
        let reason = "the app had more than \(Self.limit) pushes waiting"
        var droppedItself = false
        // Silent ones first; an alert (shown when it came) only when no silent one is left,
        // so that a sender of alerts alone cannot fill the disk either.
        while waiting > Self.limit,
              let oldest = pushes.firstIndex(where: { !$0.hasAlert && !isOnItsWay($0) }) ?? pushes.firstIndex(where: { !isOnItsWay($0) }) {
            let dropped = pushes.remove(at: oldest)
            spentOnWake.remove(dropped.id)
            counts.overflowed += 1
            waiting -= 1
            // The new push itself (a silent one among alerts): dropped as it came, not stored and acknowledged.
            if dropped.id == push.id { droppedItself = true } else { removed.append((dropped, reason)) }
        }
        return (droppedItself ? .drop(reason) : admission, removed)
    }

    /// Every held push, oldest first, now due: they ride along with a wake.
    public mutating func takeHeld() -> [PushRecord] {
        var taken: [PushRecord] = []
        for index in pushes.indices where pushes[index].state == .held {
            pushes[index].state = .due
            taken.append(pushes[index])
        }
        return taken
    }

    /// Pushes that are due (to deliver), oldest first.
    public var due: [PushRecord] { pushes.filter { $0.state == .due } }

    /// Whether push `id` spent a token on a wake that has not come yet.
    public func spentOnWake(_ id: String) -> Bool { spentOnWake.contains(id) }

    /// The wake of push `id` came: what it spent stays spent.
    public mutating func wakeCame(_ id: String) {
        spentOnWake.remove(id)
    }

    /// Removes pushes past their expiration and returns them.
    public mutating func dropExpired(at now: UInt64) -> [PushRecord] {
        let expired = pushes.filter { $0.state == .held && $0.isExpired(at: now) }
        pushes.removeAll { $0.state == .held && $0.isExpired(at: now) }
        counts.expired += expired.count
        return expired
    }

    /// A push on its way whose wake came (the app can take it now) that
    /// should no longer reach the app: it expired while it waited for the
    /// wake (the machine asleep, the app starting, the daemon restarting),
    /// or a newer push with the same collapse id came meanwhile. Removes it
    /// and says why; nil: it goes to the app.
    public mutating func dropStale(_ id: String, at now: UInt64) -> String? {
        guard let index = pushes.firstIndex(where: { $0.id == id }) else { return nil }
        let push = pushes[index]
        spentOnWake.remove(id)
        if push.isExpired(at: now) {
            pushes.remove(at: index)
            counts.expired += 1
            return "it expired before it reached the app"
        }
        // Pushes are in the order they came.
        if let collapse = push.collapseID, let newer = pushes[(index + 1)...].last(where: { $0.collapseID == collapse }) {
            pushes.remove(at: index)
            counts.collapsed += 1
            return "replaced by \(newer.id) (collapse id \(collapse))"
        }
        return nil
    }

    /// The earliest expiration among held pushes (Unix seconds).
    public var earliestExpiration: UInt64? {
        // By index: no copy of each push (with its payload).
        var earliest: UInt64?
        for index in pushes.indices where pushes[index].state == .held {
            guard let expiration = pushes[index].expiration, expiration > 0 else { continue }
            earliest = min(earliest ?? expiration, expiration)
        }
        return earliest
    }

    /// The app handled a push: it is done.
    @discardableResult
    public mutating func complete(_ id: String) -> PushRecord? {
        guard let index = pushes.firstIndex(where: { $0.id == id }) else { return nil }
        spentOnWake.remove(id)
        counts.delivered += 1
        return pushes.remove(at: index)
    }

    /// Due pushes that `isWaiting` names go back to wait for the next wake
    /// (in one pass: an app may have thousands due); returns them, held.
    /// `refundAt`: their wakes did not happen (the app could not be woken),
    /// so the tokens they spent go back, at that time.
    public mutating func holdDue(refundAt: UInt64? = nil, where isWaiting: (PushRecord) -> Bool) -> [PushRecord] {
        var held: [PushRecord] = []
        for index in pushes.indices where pushes[index].state == .due && isWaiting(pushes[index]) {
            pushes[index].state = .held
            held.append(pushes[index])
            settle(pushes[index].id, refundAt: refundAt)
        }
        return held
    }

    /// A push leaves the due ones before its wake came: the token it spent
    /// goes back if `refundAt` says its wake did not happen; else it stays spent.
    private mutating func settle(_ id: String, refundAt: UInt64?) {
        guard spentOnWake.remove(id) != nil, let refundAt else { return }
        bucket.giveBack(at: refundAt)
    }

    /// Held pushes with expiration 0 (now or never): their wake did not
    /// happen, so they never reach the app. Removed and returned.
    public mutating func dropNowOrNever() -> [PushRecord] {
        let dropped = pushes.filter { $0.state == .held && $0.expiration == 0 }
        guard !dropped.isEmpty else { return [] }
        pushes.removeAll { $0.state == .held && $0.expiration == 0 }
        counts.expired += dropped.count
        return dropped
    }

    /// A push whose wake failed or expired goes back to wait for the next wake;
    /// `refundAt` as in ``holdDue(refundAt:where:)``.
    public mutating func hold(_ id: String, refundAt: UInt64? = nil) {
        guard let index = pushes.firstIndex(where: { $0.id == id }) else { return }
        pushes[index].state = .held
        settle(id, refundAt: refundAt)
    }
}
