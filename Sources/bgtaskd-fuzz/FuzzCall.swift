import BgTaskProtocol
import SDBus

/// One method call the fuzzer sends: to whom, from which client, with which
/// values, and what a correct answer looks like.
struct FuzzCall {
    /// Which of the fuzzer's connections sends it.
    enum Role: Hashable, CustomStringConvertible {
        /// A connection that never checks in (an app of its own, named by its unique name).
        case anonymous
        /// A connection that checked in as this app id.
        case app(String)
        /// A connection opened for this call alone (the daemon looks its caller up anew).
        case fresh

        var description: String {
            switch self {
            case .anonymous: "anonymous"
            case .app(let id): id
            case .fresh: "fresh connection"
            }
        }
    }

    /// Why the call was made, for the summary.
    enum Origin: String, Codable, CaseIterable {
        /// One argument at an extreme value, the others ordinary.
        case typed
        /// Arguments missing, extra or of the wrong type; wrong interface, path or member.
        case signature
        /// Drawn from the seeded generator.
        case random
        /// A step of a sequence that makes state (check in, background, tasks, pushes …).
        case state
        /// A check-in made when a connection is opened for an app role.
        case setup
    }

    var role: Role
    var destination: String = BgTaskNames.busName
    var path: String = BgTaskNames.objectPath
    /// nil: the message carries no interface field (the daemon dispatches by member).
    var interface: String?
    var member: String
    var arguments: [FuzzValue]
    /// The argument names the labels use (declared names, or `extra`).
    var argumentNames: [String]
    /// The method as the contract declares it, when the call is to a declared
    /// method; its signatures decide what a correct answer is.
    var declared: InterfaceModel.Method?
    var origin: Origin

    /// The body's signature.
    var signature: String { arguments.map(\.value.signature).joined() }

    /// Whether the call matches its declared method in interface, member and
    /// argument types: only then may it succeed, and only then must a method
    /// return carry the declared out signature.
    var isWellFormed: Bool {
        guard let declared else { return false }
        return interface == declared.interface && member == declared.name && path == BgTaskNames.objectPath
            && signature == declared.inputSignature
    }

    var needsRawTransport: Bool { arguments.contains { $0.needsRawTransport } }

    /// `Interface.Member` of the method the call was made for (also when it
    /// is sent on another interface or path, or as an unknown member), as the
    /// per-method counts name it.
    var methodKey: String {
        if let declared { return "\(declared.interface).\(declared.name)" }
        return "\(interface ?? "(no interface)").\(member)"
    }

    /// Whether the call is for one of the daemon's own interfaces (not one
    /// of the standard interfaces sd-bus serves by itself).
    var isForDaemonInterface: Bool { (declared?.interface ?? interface ?? "").hasPrefix("org.bgtaskd.") }

    /// `Fetch.SetMinimumFetchInterval(seconds=d NaN)`.
    var label: String {
        let interfaceName = interface.map { String($0.split(separator: ".").last ?? "") } ?? "(no interface)"
        let pathNote = path == BgTaskNames.objectPath ? "" : " at \(path)"
        let values = zip(argumentNames, arguments).map { "\($0)=\($1.label)" }.joined(separator: ", ")
        return "\(interfaceName).\(member)(\(values))\(pathNote) from \(role)"
    }

    /// What makes it extreme, as `Member.argument[.option]` keys (for quarantine).
    var extremeKeys: [String] {
        zip(argumentNames, arguments).compactMap { name, value in
            guard let key = value.extremeKey else { return nil }
            return key.isEmpty ? "\(member).\(name)" : "\(member).\(name).\(key)"
        }
    }
}
