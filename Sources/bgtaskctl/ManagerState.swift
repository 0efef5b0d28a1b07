import BgTaskProtocol
import SDBus

/// The Manager interface's properties (docs/DESIGN.md §4), read into Swift values.
struct ManagerState {
    /// One entry of the `Tasks` property, `(ussd)`.
    struct Task: Encodable, Equatable {
        var id: UInt32
        /// The owner's app id, or its unique bus name when it never checked in.
        var owner: String
        var name: String
        /// The owner app's background time left; DBL_MAX while it is not in the background.
        var secondsRemaining: Double

        /// Whether the owner is in the foreground (its clock is not running).
        var isUnlimited: Bool { secondsRemaining >= BgTaskNames.unlimitedTime }

        private enum CodingKeys: String, CodingKey {
            case id, owner, name, secondsRemaining = "seconds_remaining", unlimited
        }

        func encode(to encoder: any Encoder) throws {
            var container = encoder.container(keyedBy: CodingKeys.self)
            try container.encode(id, forKey: .id)
            try container.encode(owner, forKey: .owner)
            try container.encode(name, forKey: .name)
            // JSON has no infinity or NaN (an impostor's, or a broken daemon's): null, as BusValueJSON writes them.
            if secondsRemaining.isFinite {
                try container.encode(secondsRemaining, forKey: .secondsRemaining)
            } else {
                try container.encodeNil(forKey: .secondsRemaining)
            }
            try container.encode(isUnlimited, forKey: .unlimited)
        }
    }

    /// One entry of the `Plugins` property, `(ssu)`.
    struct Plugin: Encodable, Equatable {
        var name: String
        var version: String
        var abiVersion: UInt32

        private enum CodingKeys: String, CodingKey {
            case name, version, abiVersion = "abi_version"
        }
    }

    var version: UInt32
    var sleeping: Bool
    /// Whether the backlog after a wake is being drained in turns.
    var draining: Bool
    /// The backlog: apps having their turn, then those waiting.
    var backlog: [String]
    var tasks: [Task]
    var plugins: [Plugin]

    /// Reads the answer of `Properties.GetAll(Manager)`. `Version` must be
    /// there; properties a daemon of another version lacks count as empty.
    init(properties: [String: BusValue]) throws(ClientError) {
        guard case .uint32(let version)? = properties[ManagerInterface.Property.version.rawValue] else {
            throw Self.malformed(ManagerInterface.Property.version.rawValue, properties[ManagerInterface.Property.version.rawValue])
        }
        self.version = version
        switch properties[ManagerInterface.Property.sleeping.rawValue] {
        case .bool(let sleeping)?: self.sleeping = sleeping
        case nil: self.sleeping = false
        case let other: throw Self.malformed(ManagerInterface.Property.sleeping.rawValue, other)
        }
        switch properties[ManagerInterface.Property.draining.rawValue] {
        case .bool(let draining)?: self.draining = draining
        case nil: self.draining = false
        case let other: throw Self.malformed(ManagerInterface.Property.draining.rawValue, other)
        }
        switch properties[ManagerInterface.Property.backlog.rawValue] {
        case .array("s", let entries)?:
            backlog = entries.compactMap { if case .string(let app) = $0 { app } else { nil } }
        case nil: backlog = []
        case let other: throw Self.malformed(ManagerInterface.Property.backlog.rawValue, other)
        }
        tasks = try properties[ManagerInterface.Property.tasks.rawValue].map { (value) throws(ClientError) in try Self.tasks(from: value) } ?? []
        plugins = try properties[ManagerInterface.Property.plugins.rawValue].map { (value) throws(ClientError) in try Self.plugins(from: value) } ?? []
    }

    /// Reads the `Tasks` property, `a(ussd)`.
    static func tasks(from value: BusValue) throws(ClientError) -> [Task] {
        guard case .array(_, let entries) = value else { throw malformed(ManagerInterface.Property.tasks.rawValue, value) }
        var tasks: [Task] = []
        for entry in entries {
            guard case .structure(let fields) = entry, fields.count == 4,
                  case .uint32(let id) = fields[0], case .string(let owner) = fields[1],
                  case .string(let name) = fields[2], case .double(let remaining) = fields[3]
            else { throw malformed(ManagerInterface.Property.tasks.rawValue, value) }
            tasks.append(Task(id: id, owner: owner, name: name, secondsRemaining: remaining))
        }
        return tasks
    }

    /// Reads the `Plugins` property, `a(ssu)`.
    static func plugins(from value: BusValue) throws(ClientError) -> [Plugin] {
        guard case .array(_, let entries) = value else { throw malformed(ManagerInterface.Property.plugins.rawValue, value) }
        var plugins: [Plugin] = []
        for entry in entries {
            guard case .structure(let fields) = entry, fields.count == 3,
                  case .string(let name) = fields[0], case .string(let version) = fields[1],
                  case .uint32(let abi) = fields[2]
            else { throw malformed(ManagerInterface.Property.plugins.rawValue, value) }
            plugins.append(Plugin(name: name, version: version, abiVersion: abi))
        }
        return plugins
    }

    private static func malformed(_ property: String, _ value: BusValue?) -> ClientError {
        let found = value.map { "a value of type '\($0.signature)'" } ?? "nothing"
        return ClientError("the daemon's \(property) property holds \(found); this bgtaskctl does not understand it")
    }
}
