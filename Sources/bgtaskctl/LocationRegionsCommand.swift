import ArgumentParser
import BgTaskProtocol
import SDBus

/// `bgtaskctl location regions [APP]`: the regions the daemon monitors.
struct LocationRegionsCommand: ClientCommand {
    static let configuration = CommandConfiguration(
        commandName: "regions",
        abstract: "List the regions bgtaskd monitors for apps, and which side of each the device is on.",
        discussion: """
            Calls Location.ListRegions: every region of APP, or of all apps, by app and \
            region id. Apps add regions with StartMonitoringRegion (the SDK's \
            startMonitoring(region:)); they persist until the app stops monitoring them.

            CENTRE is the region's centre in degrees (latitude, longitude); RADIUS the \
            radius in metres the daemon uses (raised to Location.MinRadiusM). STATE is \
            the side of the boundary the device is on: 'inside', 'outside', or \
            'unknown' until a position has held on either side. NOTIFY is 'yes' when \
            the app asked for the side at start too (notify_on_start).

            --json prints {"regions": [...]}, one object per region with the keys the \
            daemon sent (app_id, region_id, latitude, longitude, radius_m, state, \
            notify_on_start). Keys may be added; ignore the ones you do not know. Only \
            trusted callers may list regions.
            """)

    @OptionGroup(title: "Global options")
    var global: GlobalOptions

    @Argument(help: ArgumentHelp("Only this app's regions (its desktop-file id); omit it for all apps.", valueName: "APP"))
    var app: String?

    /// What `--json` prints.
    struct Report: Encodable {
        var regions: [[String: BusValueJSON]]
    }

    func validate() throws { try EmptyArgument.refuse(app, as: "APP", leaveOut: "list the regions of all apps") }

    func run(with client: DaemonClient) throws {
        let uniqueName = try client.daemonUniqueName()
        let reply: Message
        do {
            reply = try client.call(LocationInterface.Method.listRegions.rawValue, interface: BgTaskNames.location, destination: uniqueName) {
                (call) throws(BusError) in try call.append(app ?? "")
            }
        } catch {
            throw LocationSimulateCommand.explained(error)
        }
        let regions = try BusRecord.list(from: reply, member: LocationInterface.Method.listRegions.rawValue)
        if global.json {
            try JSONOutput.print(Report(regions: regions.map(\.json)))
            return
        }
        if regions.isEmpty {
            print(app.map { "No regions are monitored for \($0)." } ?? "No regions are monitored.")
            return
        }
        typealias Key = LocationInterface.RegionKey
        var table = TextTable([
            .init("APP", maxWidth: 48), .init("REGION", maxWidth: 48), .init("CENTRE"),
            .init("RADIUS", alignment: .right), .init("STATE"), .init("NOTIFY"),
        ])
        for region in regions {
            let centre = switch (region.double(Key.latitude.rawValue), region.double(Key.longitude.rawValue)) {
            case (let latitude?, let longitude?): "\(latitude), \(longitude)"
            default: "?"
            }
            table.append([
                region.string(Key.appID.rawValue) ?? "?", region.string(Key.regionID.rawValue) ?? "?", centre,
                region.double(Key.radius.rawValue).map(Self.metres) ?? "?", region.string(Key.state.rawValue) ?? "?",
                region.bool(Key.notifyOnStart.rawValue).map { $0 ? "yes" : "no" } ?? "?",
            ])
        }
        print(table.render(), terminator: "")
    }

    /// `150 m`, `12.5 m`: whole metres without a fraction.
    static func metres(_ value: Double) -> String {
        if value.isFinite, value == value.rounded(), abs(value) < 1e15 { return "\(Int(value)) m" }
        return "\(value) m"
    }
}
