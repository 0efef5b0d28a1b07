import BgTaskPluginKit
import BgTaskProtocol
import BgTaskPushCore
import Foundation

// Implementation notes
//
// bgtaskd is a UnifiedPush connector on behalf of every app that declares
// remote-notification: it registers each with the session's distributor
// (a bus name org.unifiedpush.Distributor.*; the first in sorted order when
// there are several) under its own bus name and a token of its own per app,
// and answers the distributor's calls at /org/unifiedpush/Connector. It
// speaks Distributor2 (a{sv}) and falls back to Distributor1 when the
// distributor does not know it; it exports both Connector2 and Connector1.
//
// Only the distributor it registered with (the unique name that owned the
// distributor's name then) may call the connector: anyone else on the bus
// is refused, so nobody can inject pushes or endpoints. A Message becomes a
// push for its app through the same path as DeliverPush (stored before the
// reply, budget, piggyback); a message that is a JSON object with "aps" is
// the payload itself, any other is carried base64-encoded in a silent push
// ({"aps":{"content-available":1},"unifiedpush":{"message":…,"id":…}}).
//
// Tokens and endpoints are records (collection "unifiedpush", one per app),
// written in the batch of the call that changed them. Every app is
// registered again whenever a distributor (re)appears and at every start,
// as the protocol asks; NewEndpoint follows each registration.

/// bgtaskd as a UnifiedPush connector for its apps.
final class UnifiedPushBridge {
    static let distributorPrefix = "org.unifiedpush.Distributor."
    static let distributorPath = "/org/unifiedpush/Distributor"
    static let connectorPath = "/org/unifiedpush/Connector"
    static let distributor1 = "org.unifiedpush.Distributor1"
    static let distributor2 = "org.unifiedpush.Distributor2"
    static let connector1 = "org.unifiedpush.Connector1"
    static let connector2 = "org.unifiedpush.Connector2"
    static let collection = "unifiedpush"
    /// The protocol's limits.
    static let maximumMessageBytes = 4096
    static let maximumEndpointBytes = 1000
    static let maximumTokenBytes = 100
    /// A message's id, carried in the wrapped payload: short enough that a
    /// wrapped message always fits ``maximumWrappedBytes`` (every byte
    /// escaped as \u00XX: 6 × 256 bytes, with 5.5 kB of base64).
    static let maximumMessageIDBytes = 256
    /// A wrapped 4096-byte message is about 5.5 kB of JSON: the payload limit for wrapped messages.
    static let maximumWrappedBytes = 8192

    /// What is stored per app.
    struct Registration: Codable, Equatable {
        var token: String
        var endpoint: String?
    }

    private let host: PluginHost
    /// Turns a message into a push: (app, its payload, checked, acknowledge with the push id).
    private let deliver: (String, PushPayload, (String) throws(ModeError) -> Void) throws -> Void
    private(set) var registrations: [String: Registration] = [:]
    /// The distributor in use: its bus name and the unique name that owns it.
    private(set) var distributor: (name: String, owner: String)?
    /// Apps registered with the current owner.
    private var registered: Set<String> = []
    /// Apps the current owner unregistered (the user removed them there):
    /// registered again only when a distributor appears and at the next start,
    /// not by any change to the apps.
    private var unregisteredByDistributor: Set<String> = []
    /// Register calls sent and not answered yet. A connection may wait for
    /// only so many replies at once (dbus-daemon's max_replies_per_connection,
    /// 128 on some buses): all apps' at once left the rest refused.
    private var registrationsInFlight = 0
    static let maximumRegistrationsInFlight = 16
    /// Apps whose Register failed without an answer (an error, a timeout):
    /// tried again when apps or the distributor change, not at once.
    private var failedRegistrations: Set<String> = []
    /// RemoteNotifications.MaxPayloadBytes: a message passes as itself only
    /// within it, as DeliverPush's payload would, and is refused beyond it.
    private let maximumPayloadBytes: Int
    /// Records how to undo a change if the batch that made it is rolled back.
    var recordUndo: ((@escaping () -> Void) -> Void)?
    /// Tells the app its endpoint changed (nil: it has none any more).
    var endpointChanged: ((String, String?) -> Void)?

    init(host: PluginHost, maximumPayloadBytes: Int,
         deliver: @escaping (String, PushPayload, (String) throws(ModeError) -> Void) throws -> Void) {
        self.host = host
        self.maximumPayloadBytes = maximumPayloadBytes
        self.deliver = deliver
    }

    // MARK: Start

    func start() throws {
        for (app, data) in try host.records(collection: Self.collection) {
            if let registration = try? JSONDecoder().decode(Registration.self, from: Data(data)) {
                registrations[app] = registration
            } else {
                host.log(.warning, "ignoring the unreadable UnifiedPush registration of \(app)")
            }
        }
        try host.export(PluginInterface(name: Self.connector2, members: [
            .method("Message", in: [("args", "a{sv}")], out: [("result", "a{sv}")]),
            .method("NewEndpoint", in: [("args", "a{sv}")], out: [("result", "a{sv}")]),
            .method("Unregistered", in: [("args", "a{sv}")], out: [("result", "a{sv}")]),
        ]), at: Self.connectorPath)
        try host.export(PluginInterface(name: Self.connector1, members: [
            .method("Message", in: [("token", "s"), ("message", "ay"), ("id", "s")]),
            .method("NewEndpoint", in: [("token", "s"), ("endpoint", "s")]),
            .method("Unregistered", in: [("token", "s")]),
        ]), at: Self.connectorPath)
        try host.subscribe(
            on: .user, sender: "org.freedesktop.DBus", path: "/org/freedesktop/DBus", interface: "org.freedesktop.DBus",
            member: "NameOwnerChanged"
        ) { [weak self] message in
            guard let self, let message else { return }
            do {
                let name = try message.readString()
                _ = try message.readString()
                let owner = try message.readString()
                guard name.hasPrefix(Self.distributorPrefix) else { return }
                self.distributorChanged(name, owner: owner)
            } catch {
                self.host.log(.debug, "unreadable NameOwnerChanged: \(error)")
            }
        }
        findDistributor()
    }

    /// Lists the bus's names and takes the first distributor, if any.
    private func findDistributor() {
        do {
            try host.call("org.freedesktop.DBus", path: "/org/freedesktop/DBus", interface: "org.freedesktop.DBus",
                          member: "ListNames", { _ in }) { [weak self] result in
                guard let self, self.distributor == nil else { return }
                guard case .success(let reply) = result, let names = try? reply.readStrings(maximum: 100_000) else {
                    self.host.log(.warning, "cannot list the session bus's names to find a UnifiedPush distributor")
                    return
                }
                guard let name = names.filter({ $0.hasPrefix(Self.distributorPrefix) }).sorted().first else {
                    // Endpoints a distributor gave before are kept: only new ones wait.
                    self.host.log(.info, "no UnifiedPush distributor on the session bus: apps get no new push endpoint until one appears")
                    return
                }
                self.resolveOwner(of: name)
            }
        } catch {
            host.log(.warning, "cannot look for a UnifiedPush distributor: \(error)")
        }
    }

    private func resolveOwner(of name: String) {
        do {
            try host.call("org.freedesktop.DBus", path: "/org/freedesktop/DBus", interface: "org.freedesktop.DBus",
                          member: "GetNameOwner", { (call) throws(ModeError) in try call.append(name) }) { [weak self] result in
                guard let self else { return }
                guard case .success(let reply) = result, let owner = try? reply.readString() else { return }
                self.distributorChanged(name, owner: owner)
            }
        } catch {
            host.log(.warning, "cannot ask who owns \(name): \(error)")
        }
    }

    /// A distributor's name got a new owner (empty: it left the bus).
    private func distributorChanged(_ name: String, owner: String) {
        if owner.isEmpty {
            guard distributor?.name == name else { return }
            host.log(.notice, "UnifiedPush distributor \(name) left the bus")
            distributor = nil
            registered.removeAll()
            unregisteredByDistributor.removeAll()
            findDistributor()
            return
        }
        if let current = distributor, current.name != name, current.owner != owner { return }
        if distributor?.owner == owner { return }
        distributor = (name, owner)
        registered.removeAll()
        unregisteredByDistributor.removeAll()
        host.log(.info, "UnifiedPush distributor \(name) (\(owner)): registering apps")
        registerApps()
    }

    // MARK: Registration

    /// Registers every app that declares remote-notification and is not registered with the current distributor.
    /// Apps that no longer declare it (their entry went or changed) are
    /// unregistered and forgotten, so that their endpoint stops working.
    func registerApps() {
        let declaring = Set(host.apps(declaring: RemoteNotificationsMode.name))
        for app in registrations.keys.sorted() where !declaring.contains(app) { unregister(app) }
        failedRegistrations.removeAll()
        registerMore(declaring)
    }

    /// Registers apps not registered yet, while fewer than
    /// ``maximumRegistrationsInFlight`` Register calls wait for their answer.
    private func registerMore(_ declaring: Set<String>? = nil) {
        guard let distributor, registrationsInFlight < Self.maximumRegistrationsInFlight else { return }
        let declaring = declaring ?? Set(host.apps(declaring: RemoteNotificationsMode.name))
        for app in declaring.sorted()
        where !registered.contains(app) && !unregisteredByDistributor.contains(app) && !failedRegistrations.contains(app) {
            guard registrationsInFlight < Self.maximumRegistrationsInFlight else { return }
            register(app, with: distributor)
        }
    }

    /// A Register call was answered (or failed): the next may go.
    private func registrationAnswered() {
        registrationsInFlight -= 1
        registerMore()
    }

    private func unregister(_ app: String) {
        guard let registration = registrations[app] else { return }
        do {
            try host.delete(collection: Self.collection, key: app)
        } catch {
            host.log(.warning, "cannot forget the UnifiedPush registration of \(app): \(error)")
            return
        }
        recordUndo? { [weak self] in self?.registrations[app] = registration }
        registrations[app] = nil
        registered.remove(app)
        unregisteredByDistributor.remove(app)
        host.logWhenCommitted(.info, "\(app) no longer declares remote-notification: unregistered from UnifiedPush")
        guard let distributor else { return }
        // Version 2 first, as registering does; a version 1 distributor answers UnknownMethod.
        let token = registration.token
        do {
            try host.call(distributor.name, path: Self.distributorPath, interface: Self.distributor2, member: "Unregister", { (call) throws(ModeError) in
                try call.append(dictionary: ["token": .string(token)])
            }) { [weak self] result in
                guard case .failure(let error) = result else { return }
                guard let self, error.code.rawValue.hasSuffix(".UnknownMethod") || error.code.rawValue.hasSuffix(".UnknownInterface") else { return }
                try? self.host.call(distributor.name, path: Self.distributorPath, interface: Self.distributor1, member: "Unregister", {
                    (call) throws(ModeError) in try call.append(token)
                }) { _ in }
            }
        } catch {
            host.log(.warning, "cannot unregister \(app) from UnifiedPush: \(error)")
        }
    }

    private func register(_ app: String, with distributor: (name: String, owner: String)) {
        let token: String
        if let known = registrations[app]?.token {
            token = known
        } else {
            token = Self.newToken()
            let registration = Registration(token: token, endpoint: nil)
            do {
                try host.put(Array(try JSONEncoder().encode(registration)), collection: Self.collection, key: app)
            } catch {
                host.log(.warning, "cannot store the UnifiedPush token of \(app): \(error)")
                return
            }
            recordUndo? { [weak self] in
                self?.registrations[app] = nil
                self?.registered.remove(app)
            }
            registrations[app] = registration
        }
        registered.insert(app)
        let description = host.appInfo(app)?.name ?? app
        do {
            try host.call(distributor.name, path: Self.distributorPath, interface: Self.distributor2, member: "Register", { (call) throws(ModeError) in
                try call.append(dictionary: [
                    "service": .string(BgTaskNames.busName), "token": .string(token), "description": .string(description),
                ])
            }) { [weak self] result in
                guard let self else { return }
                // An answer of a distributor that has been replaced since says nothing of the current one's.
                guard self.isCurrent(distributor) else { return self.registrationAnswered() }
                if case .failure(let error) = result,
                   error.code.rawValue.hasSuffix(".UnknownMethod") || error.code.rawValue.hasSuffix(".UnknownInterface") {
                    // Version 1 takes this call's place in flight.
                    return self.registerVersion1(app, token: token, description: description, with: distributor)
                }
                defer { self.registrationAnswered() }
                switch result {
                case .success(let reply):
                    guard let answer = try? reply.readOptions() else {
                        return self.registrationFailed(app, "an answer that cannot be read", refused: false)
                    }
                    if case .bool(true)? = answer["success"] {
                        self.host.log(.info, "registered \(app) with UnifiedPush distributor \(distributor.name)")
                    } else {
                        let reason: String = if case .string(let text)? = answer["reason"] { text } else { "no reason given" }
                        self.registrationFailed(app, reason, refused: true)
                    }
                case .failure(let error):
                    self.registrationFailed(app, error.description, refused: false)
                }
            }
            registrationsInFlight += 1
        } catch {
            registrationFailed(app, error.description, refused: false)
        }
    }

    private func registerVersion1(_ app: String, token: String, description: String, with distributor: (name: String, owner: String)) {
        do {
            try host.call(distributor.name, path: Self.distributorPath, interface: Self.distributor1, member: "Register", { (call) throws(ModeError) in
                try call.append(BgTaskNames.busName)
                try call.append(token)
                try call.append(description)
            }) { [weak self] result in
                guard let self else { return }
                defer { self.registrationAnswered() }
                guard self.isCurrent(distributor) else { return }
                switch result {
                case .success(let reply):
                    guard let outcome = try? reply.readString() else {
                        return self.registrationFailed(app, "an answer that cannot be read", refused: false)
                    }
                    if outcome == "REGISTRATION_SUCCEEDED" {
                        self.host.log(.info, "registered \(app) with UnifiedPush distributor \(distributor.name) (version 1)")
                    } else {
                        self.registrationFailed(app, (try? reply.readString()).map { "\(outcome): \($0)" } ?? outcome, refused: true)
                    }
                case .failure(let error):
                    self.registrationFailed(app, error.description, refused: false)
                }
            }
        } catch {
            // The version 2 call it follows was counted in flight; this one never went.
            registrationsInFlight -= 1
            registrationFailed(app, error.description, refused: false)
        }
    }

    /// Whether `distributor` is still the one apps are registered with (the same name and owner).
    private func isCurrent(_ distributor: (name: String, owner: String)) -> Bool {
        self.distributor.map { $0.name == distributor.name && $0.owner == distributor.owner } ?? false
    }

    /// `refused`: the distributor answered no; otherwise the call failed (a
    /// timeout, a distributor that went away), which says nothing of its answer.
    private func registrationFailed(_ app: String, _ reason: String, refused: Bool) {
        registered.remove(app)
        if refused {
            host.log(.warning, "UnifiedPush distributor refused \(app): \(reason)")
            // An endpoint of an earlier registration is dead now: nobody
            // delivers from it (only the current distributor's messages are
            // taken). The app hears it has none; the token is kept.
            guard registrations[app]?.endpoint != nil else { return }
            do {
                try setEndpoint(nil, of: app)
                host.logWhenCommitted(.notice, "\(app) has no UnifiedPush endpoint any more: the distributor refused it")
            } catch {
                host.log(.warning, "cannot forget the UnifiedPush endpoint of \(app): \(error)")
            }
        } else {
            failedRegistrations.insert(app)
            host.log(.warning, "could not register \(app) with the UnifiedPush distributor (it is tried again when apps or the distributor change): \(reason)")
        }
    }

    /// 32 random hex digits.
    static func newToken() -> String {
        var generator = SystemRandomNumberGenerator()
        return (0..<2).map { _ in String(generator.next() as UInt64, radix: 16).leftPadded(to: 16) }.joined()
    }

    // MARK: The connector's methods

    /// Handles a call of Connector1 or Connector2; false for other interfaces.
    func handle(_ call: PluginCall) throws -> Bool {
        guard call.interface == Self.connector1 || call.interface == Self.connector2 else { return false }
        // Only the distributor registered with may speak for it.
        guard let distributor, call.caller.connection == distributor.owner else {
            throw ModeError(.notPermitted, "only the UnifiedPush distributor bgtaskd registered with may call its connector")
        }
        let arguments = call.arguments
        let version2 = call.interface == Self.connector2
        var fields: [String: PluginValue] = [:]
        if version2 {
            fields = try arguments.readOptions()
        } else {
            fields["token"] = .string(try arguments.readString())
            switch call.member {
            case "Message":
                fields["message"] = .bytes(try arguments.readBytes(maximum: Self.maximumMessageBytes))
                fields["id"] = .string(try arguments.readString())
            case "NewEndpoint":
                fields["endpoint"] = .string(try arguments.readString())
            default:
                break
            }
        }
        guard case .string(let token)? = fields["token"], !token.isEmpty, token.utf8.count <= Self.maximumTokenBytes else {
            throw ModeError.invalidArgs("a token of 1 to \(Self.maximumTokenBytes) bytes is needed")
        }
        guard let app = registrations.first(where: { $0.value.token == token })?.key else {
            throw ModeError.invalidArgs("no app is registered with that token")
        }
        // Unregistered by the distributor itself: what it sends for the token
        // afterwards is no push (until bgtaskd registers the app again).
        if unregisteredByDistributor.contains(app), call.member != "Unregistered" {
            throw ModeError.invalidArgs("the distributor unregistered that token")
        }
        let reply = { () throws(ModeError) in
            try call.reply { (reply) throws(ModeError) in if version2 { try reply.append(dictionary: [:]) } }
        }
        switch call.member {
        case "Message":
            guard case .bytes(let message)? = fields["message"], !message.isEmpty, message.count <= Self.maximumMessageBytes else {
                throw ModeError.invalidArgs("a message of 1 to \(Self.maximumMessageBytes) bytes is needed")
            }
            let id: String = if case .string(let text)? = fields["id"] { text } else { "" }
            guard id.utf8.count <= Self.maximumMessageIDBytes else {
                throw ModeError.invalidArgs("a message id of at most \(Self.maximumMessageIDBytes) bytes is needed")
            }
            let limit = min(Self.maximumMessageBytes, maximumPayloadBytes)
            guard message.count <= limit else {
                throw ModeError(.payloadTooLarge, "the message is \(message.count) bytes; the limit is \(limit) (RemoteNotifications.MaxPayloadBytes)")
            }
            try deliver(app, try Self.payload(of: message, id: id, maximumBytes: maximumPayloadBytes)) { (_) throws(ModeError) in try reply() }
        case "NewEndpoint":
            guard case .string(let endpoint)? = fields["endpoint"], !endpoint.isEmpty, endpoint.utf8.count <= Self.maximumEndpointBytes else {
                throw ModeError.invalidArgs("an endpoint of 1 to \(Self.maximumEndpointBytes) bytes is needed")
            }
            // A URL: a line break or other control character in it would forge lines where it is shown.
            guard !endpoint.unicodeScalars.contains(where: { $0.properties.generalCategory == .control }) else {
                throw ModeError.invalidArgs("an endpoint holds no control characters")
            }
            try setEndpoint(endpoint, of: app)
            try reply()
            host.logWhenCommitted(.info, "\(app) has a UnifiedPush endpoint")
        case "Unregistered":
            try setEndpoint(nil, of: app)
            let (wasRegistered, wasExcluded) = (registered.contains(app), unregisteredByDistributor.contains(app))
            registered.remove(app)
            unregisteredByDistributor.insert(app)
            recordUndo? { [weak self] in
                if wasRegistered { self?.registered.insert(app) }
                if !wasExcluded { self?.unregisteredByDistributor.remove(app) }
            }
            try reply()
            host.logWhenCommitted(.notice, "UnifiedPush distributor unregistered \(app)")
        default:
            throw ModeError.failed("unknown method \(call.member)")
        }
        return true
    }

    private func setEndpoint(_ endpoint: String?, of app: String) throws {
        guard var registration = registrations[app] else { return }
        registration.endpoint = endpoint
        try host.put(Array(try JSONEncoder().encode(registration)), collection: Self.collection, key: app)
        let old = registrations[app]
        recordUndo? { [weak self] in self?.registrations[app] = old }
        registrations[app] = registration
        if old?.endpoint != endpoint { endpointChanged?(app, endpoint) }
    }

    /// The push payload a message becomes: itself when it is a valid push
    /// payload (a JSON object with an "aps" object), else a silent push
    /// carrying it base64-encoded.
    static func payload(of message: [UInt8], id: String, maximumBytes: Int) throws(BgTaskError) -> PushPayload {
        // Passed on only when it is a push payload as DeliverPush takes it; anything
        // else (an "aps" that is no object, a noncharacter sd-bus will not send) goes wrapped.
        if let text = String(validating: message, as: UTF8.self),
           let payload = try? PushPayload(json: text, maximumBytes: maximumBytes) {
            return payload
        }
        let wrapped: [String: Any] = [
            "aps": ["content-available": 1],
            "unifiedpush": ["message": Data(message).base64EncodedString(), "id": id],
        ]
        let data = (try? JSONSerialization.data(withJSONObject: wrapped, options: [.sortedKeys])) ?? Data()
        return try PushPayload(json: String(decoding: data, as: UTF8.self), maximumBytes: maximumWrappedBytes)
    }
}

extension String {
    fileprivate func leftPadded(to length: Int) -> String {
        count >= length ? self : String(repeating: "0", count: length - count) + self
    }
}
