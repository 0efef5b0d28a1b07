import ArgumentParser
import BgTaskProtocol
import SDBus

/// `bgtaskctl location simulate LAT LON`: a position, as if GeoClue had reported it.
struct LocationSimulateCommand: ClientCommand {
    static let configuration = CommandConfiguration(
        commandName: "simulate",
        abstract: "Tell bgtaskd the device is at a position, as if GeoClue had reported it.",
        discussion: """
            Calls Location.SimulateLocation, as Xcode's "Simulate Location": monitored \
            regions and significant location changes see the position exactly as they \
            see GeoClue's fixes. For tests, demonstrations and machines without GeoClue.

            A crossing counts only once the position is a margin beyond the region's \
            boundary (20 m, or the accuracy if that is larger) and has held there Location.DwellSec (20 s by default); a position \
            whose accuracy circle straddles the boundary decides nothing. Each crossing \
            wakes its app (launching it in the background with \
            BGTASKD_LAUNCH_REASON=location if it is not running), which gets RegionEvent \
            after its CheckIn. 'bgtaskctl location regions' shows the side each region \
            is on. Only trusted callers (unsandboxed processes of the daemon's user) may \
            do this.

            Negative coordinates are south and west: bgtaskctl location simulate -33.8568 151.2153

            --json prints {"accuracy_m": M, "latitude": LAT, "longitude": LON, "simulated": true}.
            """)

    @OptionGroup(title: "Global options")
    var global: GlobalOptions

    // One array of words rather than two Double arguments: ArgumentParser
    // takes a lone "-33.86" for an option, except in an array that collects
    // what it does not recognise, so southern and western coordinates need no
    // "--". Such an array collects --help and mistyped options too; validate()
    // sorts them out.
    @Argument(parsing: .allUnrecognized, help: ArgumentHelp(
        "The latitude (degrees north, -90 to 90) and the longitude (degrees east, -180 to 180).", valueName: "LAT LON"))
    var position: [String] = []

    /// The words of the position, without a "--" that ends the options (`simulate -- -33.8 151.2`).
    private var words: [String] { position.first == "--" ? Array(position.dropFirst()) : position }

    // .unconditional, so that "--accuracy -1" reaches validate() and is
    // refused there in words. Text, not a Double, so that validate() can
    // refuse hexadecimal as it does for LAT and LON.
    @Option(name: .customLong("accuracy"), parsing: .unconditional, help: ArgumentHelp("The radius of uncertainty in metres, 0 or more.", valueName: "M"))
    var accuracyText = "10"

    /// --accuracy, once validate() has checked it.
    var accuracy: Double { Double(accuracyText) ?? .nan }

    /// LAT, once validate() has checked it.
    var latitude: Double { Double(words[0]) ?? .nan }
    /// LON, once validate() has checked it.
    var longitude: Double { Double(words[1]) ?? .nan }

    /// What `--json` prints.
    struct Report: Encodable {
        var latitude: Double
        var longitude: Double
        var accuracy: Double
        var simulated = true

        private enum CodingKeys: String, CodingKey {
            case latitude, longitude, accuracy = "accuracy_m", simulated
        }
    }

    func validate() throws {
        if position.first != "--", position.contains(where: { ["-h", "--help", "-help"].contains($0) }) { throw CleanExit.helpRequest(self) }
        if let word = words.first(where: { $0.hasPrefix("-") && Double($0) == nil }) {
            throw ValidationError("unknown option '\(word)'")
        }
        guard words.count == 2 else {
            throw ValidationError("give the position as LAT LON (degrees), e.g. 48.8584 2.2945 or -33.8568 151.2153")
        }
        // Decimal only: Double("0x10") is 16, and a hex latitude is a typo, not a place.
        for (name, word) in zip(["LAT", "LON"], words) where !Self.isDecimal(word) {
            throw ValidationError("\(name) must be a decimal number of degrees, not '\(word)'")
        }
        guard latitude.isFinite, (-90...90).contains(latitude) else {
            throw ValidationError("LAT must be a number of degrees from -90 to 90, not '\(words[0])'")
        }
        guard longitude.isFinite, (-180...180).contains(longitude) else {
            throw ValidationError("LON must be a number of degrees from -180 to 180, not '\(words[1])'")
        }
        guard Self.isDecimal(accuracyText), accuracy.isFinite, accuracy >= 0 else {
            throw ValidationError("--accuracy must be a decimal number of metres, 0 or more, not '\(accuracyText)'")
        }
    }

    /// Whether `word` is a number written in decimals (Double(_:) also reads "0x10" as 16).
    static func isDecimal(_ word: String) -> Bool {
        Double(word) != nil && word.allSatisfy { "0123456789+-.eE".contains($0) }
    }

    func run(with client: DaemonClient) throws {
        do {
            try client.call(LocationInterface.Method.simulateLocation.rawValue, interface: BgTaskNames.location) { (call) throws(BusError) in
                try call.append(latitude)
                try call.append(longitude)
                try call.append(accuracy)
            }
        } catch {
            throw Self.explained(error)
        }
        if global.json {
            try JSONOutput.print(Report(latitude: latitude, longitude: longitude, accuracy: accuracy))
        } else {
            print("Simulated the device at \(latitude), \(longitude) (±\(LocationRegionsCommand.metres(accuracy))).")
        }
    }

    /// Adds what to do about the errors a user can fix.
    static func explained(_ error: ClientError) -> ClientError {
        var error = error
        switch error.name {
        case BgTaskError.Code.notPermitted.rawValue:
            error.hint = "only unsandboxed processes of the daemon's user may simulate a location"
        default:
            error.hint = ClientError.modeHint(for: error.name, mode: .location) ?? error.hint
        }
        return error
    }
}
