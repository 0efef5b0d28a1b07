import ArgumentParser
import BgTaskCore
import BgTaskLocationCore
import Glibc

/// Figure: with many monitored regions, one location update costs little and
/// does not grow with all regions. In-process, no bus: the location core's
/// ``RegionMonitor`` (the spatial index and the hysteresis) on a virtual clock.
///
/// `--apps` apps monitor `--regions` circular regions each (100 m to 3 km),
/// spread over a 40 km wide city; a drive of `--fixes` fixes crosses it (60 m
/// per fix, one fix every 2 s, GPS noise of 20–80 m, as a phone in a car
/// reports); each ``RegionMonitor/update(with:)`` is timed alone on
/// CLOCK_MONOTONIC. The process's RSS with all regions monitored is printed too.
struct RegionsCommand: ParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "regions",
        abstract: "Cost of evaluating one location update against many monitored regions (in-process, no bus).")

    @Option(help: "Apps, each monitoring --regions regions.")
    var apps = 1_000

    @Option(help: "Regions per app.")
    var regions = 20

    @Option(help: "Timed location updates.")
    var fixes = 20_000

    @Option(help: "Seed of the pseudo-random regions and track.")
    var seed: UInt64 = 1

    @Option(help: "Target: the largest acceptable p99 of one update, in µs.")
    var maxP99Us = 1_000.0

    @Option(help: "Target: the largest acceptable RSS, in MiB.")
    var maxRssMiB = 64.0

    func run() throws {
        let (apps, regions, fixes) = (apps, regions, fixes)
        var random = SplitMix64(seed: seed)
        func unit() -> Double { Double(random.next() >> 11) / Double(1 << 53) }
        let city = GeoCoordinate(latitude: 48.8566, longitude: 2.3522)
        say("regions: \(apps) apps × \(regions) regions over a 40 km city, \(fixes) fixes of a noisy drive")

        var monitor = RegionMonitor()
        let building = MonotonicTime.nanoseconds()
        for app in 0..<apps {
            for number in 0..<regions {
                let center = city.moved(metres: unit() * 20_000, bearing: unit() * 360)
                let region = try MonitoredRegion(
                    validatingID: "region-\(number)", latitude: center.latitude, longitude: center.longitude,
                    radius: 100 + unit() * 2_900, minimumRadius: 100)
                monitor.add(region, for: "org.bgtaskd.Bench.App\(app)")
            }
        }
        say("  \(apps * regions) regions monitored in \(format(MonotonicTime.microseconds(since: building) / 1000, 0)) ms")

        var position = city
        var bearing = unit() * 360
        var samples: [Double] = []
        samples.reserveCapacity(fixes)
        var events = 0
        var sideChanges = 0
        let measuring = CPUTimes.now()
        for step in 0..<fixes {
            bearing += (unit() - 0.5) * 20
            position = position.moved(metres: 60, bearing: bearing)
            if position.distance(to: city) > 20_000 { bearing += 180 }
            let accuracy = 20 + unit() * 60
            let fix = LocationFix(
                coordinate: position.moved(metres: unit() * accuracy, bearing: unit() * 360), accuracy: accuracy,
                time: 1_750_000_000_000_000 + UInt64(step) * 2_000_000)
            let a = MonotonicTime.nanoseconds()
            let crossings = monitor.update(with: fix)
            // What the plugin persists after each update: the sides that changed.
            sideChanges += monitor.drainSideChanges().count
            let b = MonotonicTime.nanoseconds()
            samples.append(Double(b - a) / 1000)
            events += crossings.count
        }
        let machine = CPUTimes.brief(since: measuring)
        let stats = LatencyStats(samples)
        let rss = ProcStatus(pid: getpid()).residentMiB ?? .nan
        say("  update: p50 \(format(stats.median, 2)) µs, p99 \(format(stats.p99, 2)) µs, max \(format(stats.max, 1)) µs;"
            + " \(events) crossings, \(sideChanges) changes of side over \(format(Double(fixes) * 2 / 3600, 1)) h of driving")
        Figure.atMost("regions-p99", "one location update, \(apps) apps × \(regions) regions, p99 of \(fixes) (p50 \(format(stats.median, 1)) µs, \(events) crossings)",
                      value: stats.p99, limit: maxP99Us, unit: "µs", decimals: 1, machine: machine).report()
        Figure.atMost("regions-rss", "RSS of this process with \(apps * regions) regions monitored",
                      value: rss, limit: maxRssMiB, unit: "MiB", decimals: 1).report()
    }
}
