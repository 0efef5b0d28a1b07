import Foundation

/// Where the device stands against one region, with hysteresis as iOS has it:
/// a fix counts for a side only when it is a margin beyond the boundary and
/// its accuracy circle does not straddle it; a side counts only after fixes
/// have kept to it for ``dwell``. A fix for the other side starts over (once
/// a pending side that had held by its time counts); a fix that decides
/// nothing changes nothing.
public struct RegionBoundary: Sendable, Equatable {
    public enum Side: Sendable, Equatable {
        case inside
        case outside
    }

    /// How long a side must hold before it counts, unless told otherwise:
    /// 20 s (realtime µs), as iOS.
    public static let dwell: UInt64 = 20_000_000

    /// Fixes for a side, at least, before a fix completes it (one stray fix
    /// farther off than its accuracy says must not start a crossing that a
    /// second one then completes).
    public static let minimumAgreeing = 3

    /// How long a source must have said nothing after its latest fix before
    /// a pending side with fewer than ``minimumAgreeing`` fixes for it holds
    /// by the settle timer: a quarter of the dwell, 5 s at the default 20 s
    /// (shorter dwells, set for tests, keep their proportion). A source that
    /// reports only movement (GeoClue past its distance threshold) falls
    /// silent when the device stays, and its one decisive fix must then
    /// carry the side; one that still reports every second has not. The
    /// timer fired a second after a second stray fix, for a pending side
    /// begun minutes before by the first, and entered a region whose edge
    /// the device was parked 4 m outside of (seed 1002 of `bgtaskd-bench
    /// track`).
    public static func silence(dwell: UInt64) -> UInt64 { dwell / 4 }

    /// The side that counts; nil until the first one has held.
    public private(set) var side: Side?
    /// The side the fixes keep to now, and since when, while it has not held long enough.
    public private(set) var pending: (side: Side, since: UInt64)?
    /// Fixes for the pending side so far.
    public private(set) var agreeing = 0
    /// How the latest fixes lean, since the pending side began: each fix
    /// whose centre lies on that side of the boundary counts +1, on the
    /// other side −1, decisive or not, older fixes weighing less
    /// (×``leanDecay`` per fix). A side holds only while the fixes lean its
    /// way: a device parked a few metres inside a boundary sends, now and
    /// then, a fix far enough out to decide, but most of its fixes lean in.
    public private(set) var lean = 0.0

    /// How much a fix's lean weighs one fix later.
    public static let leanDecay = 0.75

    /// The margin a fix's centre must lie beyond the boundary to decide
    /// (metres; its accuracy counts too, see ``side(of:in:)``). GPS error
    /// does not grow with a region's radius, so neither does this: a margin
    /// of a twelfth of the radius (up to 150 m) only made a walk across a
    /// large region wait a minute more, and kept off no flap the evidence
    /// below does not.
    public static let margin = 20.0

    /// A pending side holds only when the device is, by its recent fixes,
    /// a real margin on it: where a straight-line fit of their offsets past
    /// the boundary against time puts it at the latest fix must lie
    /// ``evidenceMargin`` beyond the boundary and ``evidence`` standard
    /// errors more. Each fix weighs the inverse of its variance (its
    /// accuracy taken as two standard deviations, so that one decisive fix,
    /// from a source that reports seldom, is evidence enough by itself) and
    /// less with age (``evidenceWindow``). Over the whole run, as before, the
    /// standard error shrank with every 1 Hz fix until a device parked a few
    /// metres inside decided, the moment it stepped out; and a mean lagged a
    /// moving device by half its run, so a graze driven through settled just
    /// after it had left.
    public static let evidence = 2.0

    /// Metres the fitted position must lie beyond the boundary, besides the
    /// standard errors: half the ``margin``, for with the window's standard
    /// error (≥ 4 m even at 20 m accuracy) it asks about 20 m at least.
    public static let evidenceMargin = 10.0

    /// How fast older fixes stop counting: a fix weighs e^(−age/window),
    /// age in seconds since the latest fix. Short, for the fit looks at
    /// where the device is, not where it was while the side held, and a
    /// straight line fitted to a path that curves (a region's edge driven
    /// past) overshoots by about its curvature × window²: with 10 s, 3
    /// grazes in 128 tracks settled an enter just as the car left; with 5 s,
    /// a car through the middle of a 154 m region, where its path turns
    /// sharply, was still put 30 m inside a second after it had left (seed
    /// 342 of `bgtaskd-bench track`). Three seconds still weigh about three
    /// and a half fixes at 1 Hz.
    public static let evidenceWindow = 3.0

    /// Metres past the boundary beyond which a fix says no more: it counts
    /// as this far (or three of its standard deviations and the margin, if
    /// that is farther, so that coarse fixes can still decide). Unbounded, one fix hundreds of kilometres off (from the
    /// network, before GPS) tilted the fitted line so far that the fixes
    /// after it, 11 km out, were fitted inside, and the side never held.
    public static let evidenceCap = 1000.0

    /// Since the pending side began, each fix weighed w (the inverse of its
    /// variance, decayed with age): Σ w, Σ w·x, Σ w·t, Σ w·t², Σ w·t·x, with x
    /// the metres its centre lies beyond the boundary toward that side and t
    /// its time in seconds before the latest fix (≤ 0).
    private var weights = 0.0
    private var weightedOffsets = 0.0
    private var weightedTimes = 0.0
    private var weightedSquaredTimes = 0.0
    private var weightedTimeOffsets = 0.0
    /// When the latest fix weighed was taken.
    private var weighedAt: UInt64 = 0

    public init() {}

    /// A boundary whose side is known already (restored after a restart).
    public init(side: Side?) {
        self.side = side
    }

    public static func == (lhs: RegionBoundary, rhs: RegionBoundary) -> Bool {
        lhs.side == rhs.side && lhs.pending?.side == rhs.pending?.side && lhs.pending?.since == rhs.pending?.since
            && lhs.agreeing == rhs.agreeing && lhs.lean == rhs.lean && lhs.weights == rhs.weights
            && lhs.weightedOffsets == rhs.weightedOffsets && lhs.weightedTimes == rhs.weightedTimes
            && lhs.weightedSquaredTimes == rhs.weightedSquaredTimes && lhs.weightedTimeOffsets == rhs.weightedTimeOffsets
            && lhs.weighedAt == rhs.weighedAt
    }

    /// What `fix` says of `region`: a side, or nil when it decides nothing.
    public static func side(of fix: LocationFix, in region: MonitoredRegion) -> Side? {
        let distance = region.center.distance(to: fix.coordinate)
        let slack = max(Self.margin, fix.accuracy)
        if distance + slack <= region.radius { return .inside }
        if distance - slack >= region.radius { return .outside }
        return nil
    }

    /// Takes a fix; returns the event it completes: a crossing, or, the first
    /// time a side holds, that side's event when `region.notifyOnStart`; or
    /// the event of a pending side that had held by the fix's time.
    public mutating func update(with fix: LocationFix, in region: MonitoredRegion, dwell: UInt64 = Self.dwell) -> RegionEvent? {
        // A side that had held by the time this fix came holds, whether or
        // not the settle timer ran first (a busy loop, a wake from sleep): a
        // fix against it starts a new side from there instead of taking its place.
        // Not with a dwell of 0: the side the fix starts would hold at once
        // too, two events from one fix. With a dwell, after a side held the
        // fix can only start a new one: at most one event comes.
        guard dwell > 0, pending != nil else { return update(after: fix, in: region, dwell: dwell) }
        let settled = settle(at: fix.time, in: region, dwell: dwell)
        let event = update(after: fix, in: region, dwell: dwell)
        assert(settled == nil || event == nil, "a fix after a side held cannot also complete a crossing")
        return settled ?? event
    }

    private mutating func update(after fix: LocationFix, in region: MonitoredRegion, dwell: UInt64) -> RegionEvent? {
        if let current = pending {
            let distance = region.center.distance(to: fix.coordinate)
            let inside = distance < region.radius
            lean = lean * Self.leanDecay + ((inside == (current.side == .inside)) ? 1 : -1)
            weigh(fix, distance: distance, in: region, toward: current.side)
        }
        guard let observed = Self.side(of: fix, in: region) else { return nil }
        if observed == side {
            pending = nil
            return nil
        }
        guard let current = pending, current.side == observed else {
            pending = (observed, fix.time)
            agreeing = 1
            lean = 1
            (weights, weightedOffsets, weightedTimes, weightedSquaredTimes, weightedTimeOffsets) = (0, 0, 0, 0, 0)
            weigh(fix, distance: region.center.distance(to: fix.coordinate), in: region, toward: observed)
            // No time to hold: the side holds now, as the settle timer would
            // say at once anyway (a dwell of 0 is for tests and benchmarks).
            return dwell == 0 ? settle(at: fix.time, in: region, dwell: 0) : nil
        }
        agreeing += 1
        guard agreeing >= Self.minimumAgreeing else { return nil }
        return settle(at: fix.time, in: region, dwell: dwell)
    }

    /// The pending side holds if it has for `dwell` by `now` with no fix
    /// against it (a location source reports only movement, so no news means
    /// the device stayed), and, with fewer than ``minimumAgreeing`` fixes for
    /// it, the source has been silent for ``silence(dwell:)``. Returns the
    /// event, as ``update(with:in:)`` does.
    public mutating func settle(at now: UInt64, in region: MonitoredRegion, dwell: UInt64 = Self.dwell) -> RegionEvent? {
        guard let current = pending, now >= current.since, now - current.since >= dwell, lean > 0, isEvident else { return nil }
        // Fewer fixes for the side than an update needs: only silence lets it hold.
        if agreeing < Self.minimumAgreeing, now < weighedAt || now - weighedAt < Self.silence(dwell: dwell) { return nil }
        let first = side == nil
        side = current.side
        pending = nil
        if first && !region.notifyOnStart { return nil }
        return current.side == .inside ? .enter : .exit
    }

    /// When the pending side will have held for `dwell` (and, with fewer than
    /// ``minimumAgreeing`` fixes for it, the source been silent for
    /// ``silence(dwell:)``), if one is pending and the latest fixes lean its
    /// way. Leaning the other way it cannot settle until a fix changes that,
    /// and a fix is taken with ``update(with:in:dwell:)``: a time here would
    /// be a timer that fires and settles nothing, again and again.
    public func settlesAt(dwell: UInt64 = Self.dwell) -> UInt64? {
        guard lean > 0, isEvident, let current = pending else { return nil }
        // A time past the end of the clock (a dwell set absurdly long) is never.
        func after(_ start: UInt64, _ span: UInt64) -> UInt64 { start > .max - span ? .max : start + span }
        let held = after(current.since, dwell)
        return agreeing < Self.minimumAgreeing ? max(held, after(weighedAt, Self.silence(dwell: dwell))) : held
    }

    private mutating func weigh(_ fix: LocationFix, distance: Double, in region: MonitoredRegion, toward side: Side) {
        let sigma = fix.accuracy.isFinite ? max(fix.accuracy / 2, 1) : 1e6
        // Capped beyond what the fix's own spread could reach: a fix of 2 km accuracy 5 km out still decides.
        let cap = max(Self.evidenceCap, 3 * sigma + Self.evidenceMargin)
        let offset = min(max(side == .outside ? distance - region.radius : region.radius - distance, -cap), cap)
        // Times count back from the newest fix: move the sums to it, older fixes weighing less.
        let gap = weights > 0 && fix.time > weighedAt ? Double(fix.time - weighedAt) / 1e6 : 0
        let decay = exp(-gap / Self.evidenceWindow)
        weightedSquaredTimes = (weightedSquaredTimes - 2 * gap * weightedTimes + gap * gap * weights) * decay
        weightedTimes = (weightedTimes - gap * weights) * decay
        weightedTimeOffsets = (weightedTimeOffsets - gap * weightedOffsets) * decay
        weights *= decay
        weightedOffsets *= decay
        weighedAt = max(weighedAt, fix.time)
        let w = 1 / (sigma * sigma)
        weights += w
        weightedOffsets += w * offset
    }

    /// Whether the recent fixes put the device a margin on the pending side
    /// beyond chance (``evidence``).
    private var isEvident: Bool {
        guard weights > 0 else { return false }
        // x = a + b·t fitted by weighted least squares; a is the position at
        // the latest fix, its variance S2 / det.
        let det = weights * weightedSquaredTimes - weightedTimes * weightedTimes
        guard det > 1e-9 * weights * weightedSquaredTimes else {
            // Fixes all at one time (or one fix): no motion to fit, the mean.
            return weightedOffsets / weights >= Self.evidenceMargin + Self.evidence / weights.squareRoot()
        }
        let position = (weightedSquaredTimes * weightedOffsets - weightedTimes * weightedTimeOffsets) / det
        return position >= Self.evidenceMargin + Self.evidence * (weightedSquaredTimes / det).squareRoot()
    }
}
