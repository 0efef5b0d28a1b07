import ArgumentParser
import BgTaskCore
import BgTaskLocationCore
import Foundation

/// Figures: on a generated, recorded-style track, region monitoring reports
/// every real crossing once, flaps never, and reports a crossing 20–40 s after
/// it happened. In-process, no bus: the location core's ``RegionMonitor``,
/// fed each fix and settled when its ``RegionMonitor/nextSettle`` comes, as
/// the plugin's timer does.
///
/// The track: `--legs` legs between places, each walked (1.4 m/s) or driven
/// (14 m/s), with a stay of one to ten minutes at each place; a fix every
/// second, reporting an accuracy of 20–80 m and displaced by Gaussian noise of
/// that size (σ = accuracy / 2: one fix in twenty lies outside the circle it
/// reports). Each place is a monitored region (150 m to 1 km) that the track
/// enters and leaves through its middle; more regions lie beside the route,
/// some of them grazed.
///
/// Judged against the noiseless track: a **flap** is an event that says the
/// opposite of where the device really was when it was reported (an enter
/// while it was outside, an exit while inside); a **miss** is a clear
/// crossing — the noiseless track goes 100 m beyond the boundary and stays
/// 20 s — with no event of its kind between the region's clear crossings
/// before and after it (for the last, within two minutes). Grazing an edge
/// may be reported or not. The **delay** of a clear crossing runs from the
/// moment the noiseless track crossed the boundary to the event that answered
/// it (its figure is the mean; the median is printed too). A stay just inside
/// a boundary (a stop within another place's region) lengthens it: nothing
/// may be decided until the position is a margin beyond the boundary. So the
/// delay from the moment the noiseless track was last a margin
/// (``RegionBoundary/margin``) past the boundary on the side it ended on,
/// the earliest any rule could tell, is printed beside it (not a figure).
struct TrackCommand: ParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "track",
        abstract: "Flapping, missed crossings and delay of region monitoring on a generated noisy track (in-process, no bus).")

    @Option(help: "Legs of the track (each to a new place).")
    var legs = 40

    @Option(help: "Seed of the pseudo-random track and noise.")
    var seed: UInt64 = 1

    @Option(help: ArgumentHelp("Run every seed from A to B instead and print one summary: flaps and misses in all, the seeds that had them, and the mean delay per track (average, largest, tracks over 40 s).", valueName: "A-B"))
    var seeds: String?

    /// What one track came to.
    struct Outcome {
        var flaps: Int
        var missed: Int
        /// Clear crossings that got their event.
        var matched: Int
        /// Mean delay from a clear crossing to its event, in seconds.
        var meanDelay: Double
        /// The same from the moment the track was a margin past the boundary.
        var meanDelayPastMargin: Double
    }

    func validate() throws {
        if seeds != nil, seedRange == nil { throw ValidationError("--seeds must be A-B with A ≤ B") }
    }

    private var seedRange: ClosedRange<UInt64>? {
        guard let parts = seeds?.split(separator: "-"), parts.count == 2,
              let low = UInt64(parts[0]), let high = UInt64(parts[1]), low <= high else { return nil }
        return low...high
    }

    func run() throws {
        guard let range = seedRange else {
            let outcome = try track(seed: seed, quiet: false)
            Figure.atMost("track-flaps", "region events saying the opposite of where the device was (noisy track; \(outcome.matched) clear crossings reported)",
                          value: Double(outcome.flaps), limit: 0, unit: "", decimals: 0).report()
            Figure.atMost("track-missed", "clear crossings with no region event within 2 min", value: Double(outcome.missed), limit: 0, unit: "", decimals: 0).report()
            Figure(id: "track-delay", what: "mean delay from a clear boundary crossing to its event",
                   value: format(outcome.meanDelay, 1) + " s", target: "20-40 s", passed: (20...40).contains(outcome.meanDelay), machine: "").report()
            return
        }
        var outcomes: [(seed: UInt64, outcome: Outcome)] = []
        for seed in range { outcomes.append((seed, try track(seed: seed, quiet: true))) }
        func seedList(_ picked: [(seed: UInt64, outcome: Outcome)], _ detail: (Outcome) -> String) -> String {
            picked.isEmpty ? "none" : picked.map { "\($0.seed) (\(detail($0.outcome)))" }.joined(separator: ", ")
        }
        let delays = outcomes.map(\.outcome.meanDelay)
        let pastMargin = outcomes.map(\.outcome.meanDelayPastMargin)
        let flapped = outcomes.filter { $0.outcome.flaps > 0 }
        let missing = outcomes.filter { $0.outcome.missed > 0 }
        let slow = outcomes.filter { !(20...40).contains($0.outcome.meanDelay) }
        say("track, seeds \(range.lowerBound)-\(range.upperBound) (\(outcomes.count) tracks):")
        say("  flaps \(flapped.map(\.outcome.flaps).reduce(0, +)): \(seedList(flapped) { "\($0.flaps)" })")
        say("  missed \(missing.map(\.outcome.missed).reduce(0, +)): \(seedList(missing) { "\($0.missed)" })")
        say("  mean delay per track: average \(format(delays.reduce(0, +) / Double(delays.count), 1)) s, largest \(format(delays.max() ?? .nan, 1)) s;"
            + " outside 20-40 s: \(seedList(slow) { format($0.meanDelay, 1) + " s" })")
        say("  counted from \(Int(RegionBoundary.margin)) m past the boundary: average \(format(pastMargin.reduce(0, +) / Double(pastMargin.count), 1)) s,"
            + " smallest \(format(pastMargin.min() ?? .nan, 1)) s, largest \(format(pastMargin.max() ?? .nan, 1)) s")
    }

    /// Walks the track of `seed`; unless `quiet`, prints each flap and miss and the track's delays.
    func track(seed: UInt64, quiet: Bool) throws -> Outcome {
        func note(_ text: String) { if !quiet { say(text) } }
        var random = SplitMix64(seed: seed)
        func unit() -> Double { Double(random.next() >> 11) / Double(1 << 53) }
        let second: UInt64 = 1_000_000
        var monitor = RegionMonitor()
        var truth = RegionMonitor()
        var regions: [MonitoredRegion] = []

        // Places along the route, each a region the track goes through the middle of.
        var position = GeoCoordinate(latitude: 45.764, longitude: 4.8357)
        var route: [(point: GeoCoordinate, speed: Double, stay: Int)] = []
        for leg in 0..<legs {
            let driving = leg % 3 == 2
            let distance = driving ? 3_000 + unit() * 9_000 : 600 + unit() * 1_500
            position = position.moved(metres: distance, bearing: unit() * 360)
            route.append((position, driving ? 14 : 1.4, 60 + Int(unit() * 540)))
            let radius = 150 + unit() * 850
            regions.append(try MonitoredRegion(
                validatingID: "place-\(leg)", latitude: position.latitude, longitude: position.longitude, radius: radius,
                minimumRadius: 100))
            // A region beside the route, grazed or missed.
            let beside = position.moved(metres: radius + 200 + unit() * 800, bearing: unit() * 360)
            regions.append(try MonitoredRegion(
                validatingID: "beside-\(leg)", latitude: beside.latitude, longitude: beside.longitude,
                radius: 150 + unit() * 500, minimumRadius: 100))
        }
        for region in regions {
            monitor.add(region, for: "org.bgtaskd.Bench.Track")
            truth.add(region, for: "org.bgtaskd.Bench.Track")
        }

        // Walk the route a second at a time.
        var t: UInt64 = 1_750_000_000_000_000
        var here = GeoCoordinate(latitude: 45.764, longitude: 4.8357)
        var real: [RegionMonitor.Key: [(event: RegionEvent, at: UInt64, crossedAt: UInt64, pastMarginAt: UInt64)]] = [:]
        var flaps = 0
        var delays: [Double] = []
        var reported: [RegionMonitor.Key: [(event: RegionEvent, at: UInt64)]] = [:]
        var inside: [String: Bool] = [:]
        var lastCrossing: [String: UInt64] = [:]
        // Whether the noiseless track is a margin inside (true) or outside (false), and since when.
        var beyondMargin: [String: Bool] = [:]
        var beyondMarginSince: [String: UInt64] = [:]
        var fixes = 0
        func step() {
            for region in regions {
                let distance = region.center.distance(to: here)
                let now = distance <= region.radius
                if inside[region.id] != now {
                    inside[region.id] = now
                    lastCrossing[region.id] = t
                }
                let past: Bool? = distance <= region.radius - RegionBoundary.margin ? true
                    : distance >= region.radius + RegionBoundary.margin ? false : nil
                if let past, beyondMargin[region.id] != past {
                    beyondMargin[region.id] = past
                    beyondMarginSince[region.id] = t
                }
            }
            // Clear crossings: the noiseless position, 100 m beyond the boundary for 20 s.
            for crossing in truth.update(with: LocationFix(coordinate: here, accuracy: 100, time: t)) {
                real[crossing.key, default: []].append(
                    (crossing.event, t, lastCrossing[crossing.key.region] ?? t, beyondMarginSince[crossing.key.region] ?? t))
            }
            let accuracy = 20 + unit() * 60
            // Box–Muller: a normal offset of σ = accuracy / 2 in a random direction.
            let gauss = (-2 * log(max(unit(), 1e-12))).squareRoot() * cos(2 * .pi * unit())
            let noisy = here.moved(metres: abs(gauss) * accuracy / 2, bearing: unit() * 360)
            // The plugin's settle timer: a side that has held by now with no
            // fix against it counts before this fix is taken, as in the daemon
            // (reported now, up to a second after the timer would fire).
            if let next = monitor.nextSettle, next <= t {
                for crossing in monitor.settle(at: t) { report(crossing) }
            }
            for crossing in monitor.update(with: LocationFix(coordinate: noisy, accuracy: accuracy, time: t)) { report(crossing) }
            _ = monitor.drainSideChanges()
            _ = truth.drainSideChanges()
            fixes += 1
            t += second
        }
        func report(_ crossing: RegionMonitor.Crossing) {
            reported[crossing.key, default: []].append((crossing.event, t))
            let truly = inside[crossing.key.region] ?? false
            if truly != (crossing.event == .enter) {
                flaps += 1
                let region = regions.first { $0.id == crossing.key.region }!
                note("  flap: \(crossing.key.region) \(crossing.event) at \((t - 1_750_000_000_000_000) / second) s; radius"
                    + " \(Int(region.radius)) m, the device \(Int(region.center.distance(to: here))) m from the centre,"
                    + " \(Double(t - (lastCrossing[crossing.key.region] ?? t)) / 1e6) s after it last crossed the boundary")
            }
            delays.append(Double(t - min(t, lastCrossing[crossing.key.region] ?? t)) / 1e6)
        }
        for (point, speed, stay) in route {
            let distance = here.distance(to: point)
            let steps = max(1, Int(distance / speed))
            let start = here
            for index in 1...steps {
                // Straight there: a great circle is near enough over a few km.
                let fraction = Double(index) / Double(steps)
                here = GeoCoordinate(
                    latitude: start.latitude + (point.latitude - start.latitude) * fraction,
                    longitude: start.longitude + (point.longitude - start.longitude) * fraction)
                step()
            }
            for _ in 0..<stay { step() }
        }

        // A clear crossing is missed if no event of its kind came between the
        // region's clear crossings before and after it (the last one: within two minutes).
        var missed = 0
        // The delay of each clear crossing: from the moment the noiseless track
        // crossed the boundary to the event that answered it.
        var crossingDelays: [Double] = []
        var pastMarginDelays: [Double] = []
        for (key, crossings) in real {
            let events = reported[key] ?? []
            for (index, crossing) in crossings.enumerated() {
                let from = index > 0 ? crossings[index - 1].at : 0
                let to = index + 1 < crossings.count ? crossings[index + 1].at : crossing.at + 120 * second
                if let answer = events.first(where: { $0.event == crossing.event && $0.at >= from && $0.at <= to }) {
                    crossingDelays.append(Double(answer.at - min(answer.at, crossing.crossedAt)) / 1e6)
                    pastMarginDelays.append(Double(answer.at - min(answer.at, crossing.pastMarginAt)) / 1e6)
                } else {
                    missed += 1
                    note("  missed: \(key.region) \(crossing.event) at \((crossing.at - 1_750_000_000_000_000) / second) s")
                }
            }
        }
        let matched = real.values.map(\.count).reduce(0, +) - missed
        let mean = crossingDelays.isEmpty ? .nan : crossingDelays.reduce(0, +) / Double(crossingDelays.count)
        let meanPastMargin = pastMarginDelays.isEmpty ? .nan : pastMarginDelays.reduce(0, +) / Double(pastMarginDelays.count)
        let sorted = crossingDelays.sorted()
        let eventMean = delays.isEmpty ? .nan : delays.reduce(0, +) / Double(delays.count)
        note("track: \(legs) legs, \(fixes) fixes (\(format(Double(fixes) / 3600, 1)) h), \(regions.count) regions;"
            + " \(real.values.map(\.count).reduce(0, +)) clear crossings, \(reported.values.map(\.count).reduce(0, +)) events")
        note("  delay from a clear crossing to its event: mean \(format(mean, 1)) s, median \(format(LatencyStats.median(sorted), 1)) s,"
            + " min \(format(sorted.first ?? .nan, 0)) s, max \(format(sorted.last ?? .nan, 0)) s")
        note("  the same from \(Int(RegionBoundary.margin)) m past the boundary (the earliest any rule could tell): mean \(format(meanPastMargin, 1)) s,"
            + " median \(format(LatencyStats.median(pastMarginDelays.sorted()), 1)) s, max \(format(pastMarginDelays.max() ?? .nan, 0)) s")
        note("  every event, grazes and stays beside a boundary included (since the last boundary crossing): mean \(format(eventMean, 1)) s,"
            + " max \(format(delays.max() ?? .nan, 0)) s")
        return Outcome(flaps: flaps, missed: missed, matched: matched, meanDelay: mean, meanDelayPastMargin: meanPastMargin)
    }
}
