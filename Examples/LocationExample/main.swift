// bgtaskd-example-location: a small app that says when the device arrives at
// or leaves a place, with bgtaskd's region monitoring, the way an iOS app uses
// CLLocationManager's startMonitoring(for:) — including when it is not
// running: bgtaskd then launches it in the background for the crossing.
//
// What it shows, step by step (see `run()` below):
//   1. Connect to bgtaskd and check in (the SDK does it with --app-id, or
//      with BGTASKD_APP_ID when bgtaskd launched the app).
//   2. Install the location handler right away: a launched app's event
//      arrives just after checking in, and the SDK keeps it until a handler
//      is set.
//   3. Monitor the places given with --place, as regions named after them.
//      Regions persist in bgtaskd, so a place already monitored as given is
//      left alone (registering it again would forget which side of it the
//      device is on); regions no longer given are stopped.
//   4. On every crossing, print "entered NAME" or "left NAME" and complete
//      the event.
//   5. When launched in the background, exit once the events are completed
//      (if bgtaskd has not suspended the app by then); when started by the
//      user, stay until SIGTERM or SIGINT.
//
// To try it, install a desktop entry that declares the location mode, e.g.
// ~/.local/share/applications/org.example.Places.desktop:
//
//   [Desktop Entry]
//   Type=Application
//   Name=Places
//   Exec=/path/to/bgtaskd-example-location --app-id org.example.Places --place eiffel,48.8584,2.2945,200
//   X-BgTaskd-Modes=location;
//
// run it once with --register-only so that bgtaskd monitors the place (or
// start it and leave it running), then move the device with bgtaskctl:
//
//   bgtaskctl location simulate 48.87 2.2945    # away from the tower; wait 20 s
//   bgtaskctl location simulate 48.8584 2.2945  # at it: "entered eiffel" 20 s later
//
// `bgtaskctl location regions` shows which side of each place the device is on.

import ArgumentParser
import BackgroundTasks
import Foundation

struct LocationExample: AsyncParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "bgtaskd-example-location",
        abstract: "An example bgtaskd app: says when the device enters or leaves the places it is given.",
        discussion: """
            On start the app checks in with bgtaskd (as --app-id, else as BGTASKD_APP_ID \
            from the environment, which bgtaskd sets when it launches the app), installs \
            its location handler, and asks bgtaskd to monitor each --place as a circular \
            region named after the place. Regions persist in bgtaskd: a place monitored \
            already, as given, is kept as it is; a region of the app that is no longer \
            given is stopped.

            When the device enters or leaves a place (bgtaskd's RegionEvent), the app \
            prints "entered NAME" or "left NAME" on standard output and completes the \
            event. A crossing counts once the device has been a margin beyond the \
            boundary for Location.DwellSec (20 s by default). Without GeoClue, move the \
            device with 'bgtaskctl location simulate LAT LON'.

            The app's desktop entry must declare the mode: X-BgTaskd-Modes=location;

            Lifetime: launched by bgtaskd for an event (CheckIn says reason location, or \
            another mode's), the app exits --stay seconds after its events are completed, \
            unless bgtaskd suspends it first: bgtaskd freezes an app it launched 1 s after \
            it has nothing left to do, as iOS suspends one, and thaws it for its next event. \
            Started by the user, it runs until SIGTERM or SIGINT.

            Standard output, one line each:
              checked in as APP (started by the user | launched for REASON, N event(s) waiting)
              monitoring NAME (LAT, LON, RADIUS m)    (a new or changed place)
              still monitoring NAME (…)               (monitored already, as given)
              stopped monitoring NAME                 (no longer given)
              entered NAME | left NAME                (a crossing)
              moved to LAT, LON (±M m)                (a significant change, if the app had asked for them)
              exiting: done | exiting: SIGTERM | exiting: SIGINT
            Problems go to standard error; the exit status is 1 when the app cannot \
            connect or bgtaskd refuses a place.
            """)

    @Option(name: .customLong("app-id"), help: ArgumentHelp(
        "The app's desktop-file id (org.example.Places). Default: BGTASKD_APP_ID from the environment.",
        valueName: "ID"))
    var appID: String?

    @Option(name: .customLong("place"), help: ArgumentHelp(
        "A place to watch: its name, latitude and longitude in degrees, and optionally a radius in metres (default 150). Repeatable.",
        valueName: "NAME,LAT,LON[,RADIUS]"))
    var places: [Place] = []

    @Option(help: ArgumentHelp(
        "Bus bgtaskd runs on: session (the default), system, or a D-Bus address such as unix:path=/tmp/bus.",
        valueName: "ADDRESS"))
    var bus: String = "session"

    @Option(help: ArgumentHelp(
        "When launched in the background: seconds to stay after the last event is completed, then exit (unless bgtaskd suspends the app first, as it does 1 s after its work is done where it can freeze it).",
        valueName: "SECONDS"))
    var stay: Double = 5

    @Flag(help: "Register the places with bgtaskd, then exit (to set them up once from a terminal).")
    var registerOnly = false

    func validate() throws {
        if places.isEmpty { throw ValidationError("give at least one --place NAME,LAT,LON[,RADIUS]") }
        if let problem = places.lazy.compactMap(\.problem).first { throw ValidationError("--place \(problem)") }
        let names = places.map(\.name)
        if let twice = names.first(where: { name in names.filter { $0 == name }.count > 1 }) {
            throw ValidationError("--place \(twice) is given twice; every place needs a name of its own")
        }
        guard stay >= 0, stay.isFinite else { throw ValidationError("--stay must be a number of seconds, 0 or more") }
        if appID == nil, ProcessInfo.processInfo.environment["BGTASKD_APP_ID", default: ""].isEmpty {
            throw ValidationError("give --app-id (or run the app from bgtaskd, which sets BGTASKD_APP_ID)")
        }
    }

    func run() async throws {
        let stops = StopSignal()

        // 1. Connect and check in. With appID nil the SDK uses BGTASKD_APP_ID.
        let manager: BackgroundTaskManager
        do {
            manager = try await BackgroundTaskManager.connect(bus: BusAddress(parsing: bus), appID: appID)
        } catch {
            Output.complain("cannot check in with bgtaskd", error)
            throw ExitCode.failure
        }
        let launch = manager.launch ?? LaunchInfo()
        let inBackground = launch.reason != .user
        let idle = IdleExit(grace: stay) { Output.say("exiting: done") }

        // 2. The location handler, before anything else. It runs on the SDK's
        //    thread: this one only prints, so it completes at once; an app with
        //    real work would start a Task and complete from there.
        manager.setLocationHandler { event, completion in
            idle.began()
            switch event {
            case .region(let name, .enter): Output.say("entered \(name)")
            case .region(let name, .exit): Output.say("left \(name)")
            case .significantChange(let latitude, let longitude, let accuracy):
                Output.say("moved to \(latitude), \(longitude) (±\(Int(accuracy.rounded())) m)")
            }
            completion()
        }
        // bgtaskd has the answer (or refused it): a background app may go now.
        manager.onLocationEventCompleted = { _, event, error in
            if let error { Output.complain("completing '\(event)'", error) }
            if inBackground { idle.finished() }
        }
        let name = appID ?? ProcessInfo.processInfo.environment["BGTASKD_APP_ID"] ?? "?"
        if inBackground {
            Output.say("checked in as \(name) (launched for \(launch.reason.rawValue), \(launch.pending) event(s) waiting)")
        } else {
            Output.say("checked in as \(name) (started by the user)")
        }

        // 3. The places, as regions.
        do {
            try await monitor(places, with: manager)
        } catch {
            Output.complain("cannot monitor the places", error)
            manager.close()
            throw ExitCode.failure
        }

        if registerOnly {
            Output.say("exiting: registered")
            manager.close()
            return
        }

        // 4./5. Events arrive through the handler. A background launch with
        //       nothing waiting leaves soon; otherwise after its events.
        if inBackground && launch.pending == 0 { idle.nothingToDo() }
        let signal = await stops.first()
        Output.say("exiting: \(signal)")
        manager.close()
    }

    /// Makes the app's regions what `places` says.
    private func monitor(_ places: [Place], with manager: BackgroundTaskManager) async throws {
        let current = Dictionary(try await manager.monitoredRegions().map { ($0.id, $0) }) { first, _ in first }
        for place in places {
            if let region = current[place.name], Self.region(region, matches: place) {
                Output.say("still monitoring \(place)")
                continue
            }
            try await manager.startMonitoring(region: place.region)
            Output.say("monitoring \(place)")
        }
        for id in current.keys.sorted() where !places.contains(where: { $0.name == id }) {
            try await manager.stopMonitoring(regionID: id)
            Output.say("stopped monitoring \(id)")
        }
    }

    /// Whether bgtaskd's region is the place as given. (A radius below
    /// Location.MinRadiusM comes back raised, so such a place is registered
    /// again at every start; bgtaskd keeps it as it was all the same.)
    private static func region(_ region: CircularRegion, matches place: Place) -> Bool {
        region.latitude == place.latitude && region.longitude == place.longitude && region.radius == place.radius
    }
}

// main.swift cannot use @main: parse and run the async command by hand, as
// AsyncParsableCommand's own main() does.
func runLocationExample() async {
    do {
        let command = try LocationExample.parse()
        try await command.run()
    } catch {
        LocationExample.exit(withError: error)
    }
}

await runLocationExample()
