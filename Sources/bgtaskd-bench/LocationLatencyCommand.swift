import ArgumentParser
import BgTaskProtocol
import Glibc
import SDBus

/// Figures: GeoClue's `LocationUpdated` → `RegionEvent` reaching an app that
/// is already running, against one Echo round trip of the C baseline
/// (median of rounds), and its p99.
///
/// The benchmark plays GeoClue2 on the private system bus the daemon was
/// started with (``FakeGeoClue``, answering as fast as the real service) and
/// the app on the session bus: a connection checked in with an app id whose
/// desktop entry declares `location`, monitoring one region of 200 m. Each
/// sample moves the device across the boundary (in, out, in …): it is the
/// time from sending `LocationUpdated` to the moment the app's connection
/// dispatches the `RegionEvent` (CLOCK_MONOTONIC, one process). On the way
/// the daemon reads the Location object from GeoClue (`GetAll`), evaluates
/// the regions, stores the event durably, wakes the app and sends the signal.
/// The app then answers `CompleteEvent(token)`. Run the daemon with
/// `--set Location.DwellSec=0`: the 20 s a side must hold is the hysteresis
/// the track benchmark measures, not the daemon's speed.
///
/// Rounds alternate with the baseline's `callbench echo`, as `push-latency`.
struct LocationLatencyCommand: ParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "location-latency",
        abstract: "GeoClue LocationUpdated → RegionEvent at a running app, against one Echo call of the C baseline (median of rounds), and its p99.",
        discussion: "Start the daemon with DBUS_SYSTEM_BUS_ADDRESS set to --system-bus and --set Location.DwellSec=0.")

    @OptionGroup var target: BusOptions

    @Option(help: ArgumentHelp("The private system bus the daemon follows GeoClue on; the benchmark plays GeoClue there.", valueName: "ADDRESS"))
    var systemBus: String

    @Option(help: ArgumentHelp("The baseline's callbench binary.", valueName: "PATH"))
    var callbench: String

    @Option(help: "Interleaved rounds of `callbench echo` and of crossings.")
    var rounds = 5

    @Option(help: "Echo calls per round.")
    var echoCalls = 4000

    @Option(help: "Crossings timed per round.")
    var events = 2000

    @Option(help: "Untimed crossings before the first round.")
    var warmup = 200

    @Option(help: "The app id the benchmark checks in as.")
    var appID = "org.bgtaskd.Bench.Location"

    @Option(help: ArgumentHelp("XDG_DATA_HOME the daemon reads desktop entries from (default: $XDG_DATA_HOME); the app's entry is written there.", valueName: "DIR"))
    var dataHome: String?

    @Option(help: "Target: the largest acceptable crossing / echo ratio (medians).")
    var maxRatio = 3.0

    @Option(help: "Target: the largest acceptable p99 of LocationUpdated → RegionEvent, in ms.")
    var maxP99Ms = 5.0

    /// The region, and a point well outside it.
    static let center = (latitude: 48.8566, longitude: 2.3522)
    static let outside = (latitude: 48.8566 + 2000 / 111_195.0, longitude: 2.3522)

    func validate() throws {
        guard rounds >= 1, events >= 10 else { throw ValidationError("need at least 1 round and 10 crossings") }
    }

    func run() throws {
        let geoclue = try FakeGeoClue(address: systemBus)
        let app = try target.connect()
        let daemon = try target.daemon(via: app)
        let home = dataHome ?? DesktopEntries.defaultDataHome
        let wrote = try DesktopEntries.write(id: appID, modes: ["location"], dataHome: home)
        try monitor(app, geoclue: geoclue, wrote: wrote)
        say("location-latency: daemon pid \(daemon.pid); app \(appID) monitoring 1 region of 200 m; GeoClue asked for fixes every"
            + " \(geoclue.distanceThreshold) m as '\(geoclue.desktopID)'; \(rounds) rounds of callbench echo \(echoCalls) / \(events) crossings")

        let probe = try CrossingProbe(app: app, geoclue: geoclue)
        // The first fix tells the side the device is on: no event.
        try probe.settleOutside()
        for _ in 0..<warmup { _ = try probe.cross() }

        let baseline = try? ProcStatus(pid: app.ownerPID(of: "org.bgtaskd.Baseline"))
        var rounds = WakeLatencyRounds(path: "LocationUpdated→RegionEvent", reply: "LocationUpdated→GetAll at GeoClue", complete: LocationInterface.Method.completeEvent.rawValue)
        let runStart = CPUTimes.now()
        try rounds.run(rounds: self.rounds, echoCalls: echoCalls, wakes: events, callbench: callbench, baseline: baseline, daemon: daemon) {
            try probe.cross()
        }
        let machine = CPUTimes.brief(since: runStart)
        rounds.summarize("location-latency", noun: "crossings", cpuNote: "crossing (GetAll + event stored + RegionEvent + CompleteEvent)")
        let signal = rounds.signal
        say("  RegionEvent signals seen \(probe.signals); daemon VmRSS \(format(daemon.residentMiB ?? .nan, 1)) MiB")
        // A crossing carries four messages each way over a bus daemon where Echo
        // carries two: what it takes beyond two Echo calls is the daemon's two
        // turns plus the benchmark's own GeoClue and app. The ratio's target
        // leaves that one Echo call.
        let excess = zip(rounds.wakeMedians, rounds.echoMedians).map { $0 - 2 * $1 }
        say("  beyond two Echo calls (the daemon's two turns, GeoClue's answer, the app's dispatch): median of rounds"
            + " \(format(LatencyStats.median(excess), 1)) µs = \(format(LatencyStats.median(zip(excess, rounds.echoMedians).map { $0 / $1 }), 2)) Echo calls"
            + " (rounds: \(excess.map { format($0, 1) }.joined(separator: " ")))")
        Figure.atMost("location", "LocationUpdated→RegionEvent / 1 Echo call (median of \(self.rounds) rounds; p50 \(format(rounds.wakeMedian, 0)) µs)",
                      value: rounds.ratio, limit: maxRatio, unit: "x", decimals: 3, machine: machine).report()
        Figure.atMost("location-p99", "LocationUpdated→RegionEvent p99 (n=\(signal.count), p50 \(milliseconds(signal.median)) ms)",
                      value: signal.p99 / 1000, limit: maxP99Ms, unit: "ms", decimals: 3, machine: machine).report()
    }

    /// Checks in and starts monitoring, retrying while the daemon has not yet
    /// read the app's desktop entry; then waits for the daemon to start GeoClue's client.
    private func monitor(_ app: ManagerClient, geoclue: FakeGeoClue, wrote: Bool) throws {
        let start = MonotonicTime.nanoseconds()
        while true {
            do throws(BusError) {
                try app.checkIn(appID)
                try app.setState("background")
                let call = try app.bus.newMethodCall(
                    destination: BgTaskNames.busName, path: BgTaskNames.objectPath, interface: BgTaskNames.location,
                    member: LocationInterface.Method.startMonitoringRegion.rawValue)
                try call.append("bench")
                try call.append(Self.center.latitude)
                try call.append(Self.center.longitude)
                try call.append(200.0)
                _ = try app.bus.call(call)
                break
            } catch {
                let unknown = [BgTaskError.Code.unknownApplication.rawValue, BgTaskError.Code.modeNotDeclared.rawValue].contains(error.name)
                if !unknown || MonotonicTime.microseconds(since: start) > 10e6 {
                    throw ValidationError("the daemon does not take regions for \(appID) (its desktop entry was"
                        + " \(wrote ? "written" : "found") in \(dataHome ?? DesktopEntries.defaultDataHome)/applications): \(error)")
                }
                MonotonicTime.sleep(seconds: 0.05)
            }
        }
        let asked = MonotonicTime.nanoseconds()
        while !geoclue.active {
            try geoclue.process()
            if MonotonicTime.microseconds(since: asked) > 10e6 {
                throw ValidationError("the daemon did not start GeoClue's client within 10 s: is it on the system bus \(systemBus)?")
            }
            var descriptors = [geoclue.pollDescriptor]
            _ = poll(&descriptors, 1, 100)
        }
    }
}

/// One crossing end to end: the fake GeoClue moves the device across the
/// region's boundary, the app's connection takes `RegionEvent` and answers
/// `CompleteEvent`. Both connections are polled together.
final class CrossingProbe {
    let app: ManagerClient
    let geoclue: FakeGeoClue
    private var match: Slot?
    private var token: String?
    private var arrivedAt: Int64 = 0
    private var inside = false
    private(set) var signals = 0

    init(app: ManagerClient, geoclue: FakeGeoClue) throws {
        self.app = app
        self.geoclue = geoclue
        match = try app.bus.addMatch(
            "type='signal',sender='\(BgTaskNames.busName)',path='\(BgTaskNames.objectPath)',"
                + "interface='\(BgTaskNames.location)',member='\(LocationInterface.Signal.regionEvent.rawValue)'",
            async: false
        ) { [unowned self] message in
            arrivedAt = MonotonicTime.nanoseconds()
            token = try? message.readString()
            signals += 1
        }
    }

    deinit { match?.cancel() }

    /// Puts the device outside and lets the daemon settle that side (no event).
    func settleOutside() throws {
        try geoclue.move(latitude: LocationLatencyCommand.outside.latitude, longitude: LocationLatencyCommand.outside.longitude, accuracy: 10)
        let start = MonotonicTime.nanoseconds()
        while MonotonicTime.microseconds(since: start) < 300_000 { try pump(timeout: 20) }
        token = nil
    }

    /// One crossing, in µs from LocationUpdated sent: to RegionEvent dispatched, and to the
    /// daemon's read of the Location object; then CompleteEvent's round trip.
    func cross(timeout: Double = 10) throws -> WakeSample {
        inside.toggle()
        let point = inside ? LocationLatencyCommand.center : LocationLatencyCommand.outside
        token = nil
        let sent = try geoclue.move(latitude: point.latitude, longitude: point.longitude, accuracy: 10)
        let deadline = MonotonicTime.nanoseconds() + Int64(timeout * 1e9)
        while token == nil {
            try pump(timeout: 1000)
            if MonotonicTime.nanoseconds() > deadline {
                throw ValidationError("no RegionEvent within \(timeout) s of LocationUpdated (\(inside ? "enter" : "exit"))")
            }
        }
        let completeStart = MonotonicTime.nanoseconds()
        let call = try app.bus.newMethodCall(
            destination: BgTaskNames.busName, path: BgTaskNames.objectPath, interface: BgTaskNames.location,
            member: LocationInterface.Method.completeEvent.rawValue)
        try call.append(token!)
        // The daemon may read GeoClue meanwhile only for a new fix: none comes before the next move.
        _ = try app.bus.call(call)
        let completeEnd = MonotonicTime.nanoseconds()
        let signal = Double(arrivedAt - sent) / 1000
        return WakeSample(signal: signal, reply: Double(geoclue.readAt - sent) / 1000, complete: Double(completeEnd - completeStart) / 1000)
    }

    /// Serves GeoClue's side and takes the app's signals, waiting up to `timeout` ms for either.
    private func pump(timeout: Int32) throws {
        try geoclue.process()
        try app.process()
        guard token == nil else { return }
        var descriptors = [geoclue.pollDescriptor, app.pollDescriptor]
        _ = poll(&descriptors, 2, timeout)
        try geoclue.process()
        try app.process()
    }
}
