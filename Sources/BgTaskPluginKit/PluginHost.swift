public import BgTaskProtocol
import BgTaskPluginABI
import Glibc

/// The daemon, as a plugin sees it: logging, clocks, configuration, D-Bus,
/// apps and wakes, and durable records.
public final class PluginHost {
    let api: UnsafePointer<bgt_host_api>
    let handle: OpaquePointer
    /// Interfaces exported so far, kept alive for the C strings the host holds on to… only during the call.
    private var exported: [PluginInterface] = []
    /// The handlers of signal subscriptions, by the host's id.
    private var subscriptions: [UInt64: SubscriptionBox] = [:]

    /// The buses a plugin reaches (ABI 1.4 for the system bus).
    public enum Bus: UInt32, Sendable {
        /// The daemon's own bus: the user's session bus, where the apps are.
        case user = 0
        /// The system bus: GeoClue, NetworkManager, logind …
        case system = 1
    }

    /// A signal subscription's handler, kept alive while the host may call it.
    final class SubscriptionBox {
        let api: UnsafePointer<bgt_host_api>
        let handler: (PluginMessage?) -> Void
        weak var host: PluginHost?
        var id: UInt64 = 0
        init(api: UnsafePointer<bgt_host_api>, host: PluginHost, handler: @escaping (PluginMessage?) -> Void) {
            self.api = api
            self.host = host
            self.handler = handler
        }
    }

    init(api: UnsafePointer<bgt_host_api>, handle: OpaquePointer) {
        self.api = api
        self.handle = handle
    }

    /// Log priorities, as syslog's.
    public enum LogLevel: Int32, Sendable {
        case error = 3, warning, notice, info, debug
    }

    public func log(_ level: LogLevel, _ message: String) {
        message.withCString { api.pointee.log(handle, level.rawValue, $0) }
    }

    /// What waits for the current batch's commit (``whenCommitted(_:)``).
    var committedActions: [() -> Void] = []
    /// Whether a batch runs (between the host's batch_begin and its commit or rollback).
    var inBatch = false

    /// Logs `message` once the current call's or event's writes are on disk,
    /// and never if they are undone (a full disk): for lines that tell of an
    /// outcome, such as "completed its fetch". The message is made then,
    /// not before: not on the path to the batch's replies and signals.
    public func logWhenCommitted(_ level: LogLevel, _ message: @autoclosure @escaping () -> String) {
        whenCommitted { [self] in log(level, message()) }
    }

    /// Runs `action` once the current call's or event's writes are on disk
    /// (at once outside a batch), and never if they are undone: for what
    /// cannot be taken back, such as an alert shown to the user.
    public func whenCommitted(_ action: @escaping () -> Void) {
        if inBatch { committedActions.append(action) } else { action() }
    }

    func runCommittedActions() {
        inBatch = false
        let actions = committedActions
        committedActions.removeAll()
        for action in actions { action() }
    }

    /// CLOCK_MONOTONIC in µs (stops while the machine sleeps).
    public var monotonicMicroseconds: UInt64 { api.pointee.monotonic_usec(handle) }
    /// CLOCK_REALTIME in µs since the Unix epoch.
    public var realtimeMicroseconds: UInt64 { api.pointee.realtime_usec(handle) }

    /// A configuration value (`Fetch.WakeBudgetSec`) as text.
    public func config(_ key: String) -> String? {
        key.withCString { api.pointee.config(handle, $0) }.map { String(cString: $0) }
    }

    /// The value of one of the plugin's declared keys (``ModePlugin/configKeys``),
    /// checked by the daemon; its default when the daemon predates declared
    /// keys (ABI 1.3) and so knows no value.
    public func value(of key: ConfigKey) -> Double {
        config(key.name).flatMap(Double.init) ?? key.defaultValue
    }

    /// The value of one of the plugin's declared whole-number keys.
    public func integer(of key: ConfigKey) -> Int {
        Int(exactly: value(of: key).rounded(.towardZero)) ?? Int(key.defaultValue)
    }

    private var lastError: String {
        api.pointee.last_error(handle).map { String(cString: $0) } ?? "unknown error"
    }

    // MARK: D-Bus

    /// Exports an interface on `/org/bgtaskd/BackgroundTasks1`, or (a 1.6
    /// host) at `path`, for a protocol that fixes it (call from `start()`).
    public func export(_ interface: PluginInterface, at path: String? = nil) throws(ModeError) {
        if path != nil, !hostHas(\.export_interface_at) {
            throw ModeError.failed("this bgtaskd cannot export at another object path (plugin ABI 1.6 needed)")
        }
        var strings: [UnsafeMutablePointer<CChar>] = []
        defer { for pointer in strings { free(pointer) } }
        func keep(_ text: String) -> UnsafePointer<CChar> {
            let pointer = strdup(text)!
            strings.append(pointer)
            return UnsafePointer(pointer)
        }
        let members: [bgt_member] = interface.members.map { member in
            var m = bgt_member()
            switch member {
            case .method(let name, let inputs, let outputs):
                m.kind = UInt32(BGT_MEMBER_METHOD)
                m.name = keep(name)
                m.in_signature = keep(inputs.map(\.1).joined())
                m.in_names = keep(inputs.map(\.0).joined(separator: ","))
                m.out_signature = keep(outputs.map(\.1).joined())
                m.out_names = keep(outputs.map(\.0).joined(separator: ","))
            case .signal(let name, let arguments):
                m.kind = UInt32(BGT_MEMBER_SIGNAL)
                m.name = keep(name)
                m.in_signature = keep(arguments.map(\.1).joined())
                m.in_names = keep(arguments.map(\.0).joined(separator: ","))
            }
            return m
        }
        let result = members.withUnsafeBufferPointer { buffer in
            var description = bgt_interface(name: keep(interface.name), members: buffer.baseAddress, n_members: buffer.count)
            if let path { return path.withCString { api.pointee.export_interface_at(handle, $0, &description) } }
            return api.pointee.export_interface(handle, &description)
        }
        if result < 0 { throw ModeError.failed(lastError) }
        exported.append(interface)
    }

    /// Sends a signal of one of the plugin's interfaces to one connection only.
    public func emit(
        _ member: String, interface: String, to connection: String, _ body: (PluginMessage) throws(ModeError) -> Void
    ) throws(ModeError) {
        guard let signal = interface.withCString({ i in member.withCString { m in api.pointee.signal_new(handle, i, m) } }) else {
            throw ModeError.failed("cannot create signal \(member)")
        }
        do {
            try body(PluginMessage(api: api, handle: signal))
        } catch {
            api.pointee.message_free(signal)
            throw error
        }
        if connection.withCString({ api.pointee.signal_send(handle, signal, $0) }) < 0 { throw ModeError.failed(lastError) }
    }

    /// Hands work from the plugin's own threads to the loop (ABI 1.7).
    public var poster: PluginPoster { PluginPoster(api: api, handle: handle, hostHasPost: hostHas(\.post)) }

    /// Whether the host's table reaches the field at `path` (one a later
    /// minor version of the ABI added).
    func hostHas<T>(_ path: KeyPath<bgt_host_api, T>) -> Bool {
        guard let offset = MemoryLayout<bgt_host_api>.offset(of: path) else { return false }
        return Int(api.pointee.struct_size) >= offset + MemoryLayout<T>.size
    }

    /// Calls a method of another service on `bus`; `reply` gets the answer
    /// (or the error) later, from the loop. Needs a 1.1 host, and 1.4 for the
    /// system bus. Calls never start a service on the system bus.
    public func call(
        _ destination: String, path: String, interface: String, member: String, on bus: Bus = .user, timeout: Double = 0,
        _ build: (PluginMessage) throws(ModeError) -> Void,
        reply: @escaping (Result<PluginMessage, ModeError>) -> Void
    ) throws(ModeError) {
        guard hostHas(\.method_call_send) else {
            throw ModeError.failed("this bgtaskd cannot call other services (plugin ABI 1.0)")
        }
        let made: OpaquePointer?
        if bus == .user {
            made = destination.withCString { d in path.withCString { p in interface.withCString { i in
                member.withCString { m in api.pointee.method_call_new(handle, d, p, i, m) } } } }
        } else {
            guard hostHas(\.bus_method_call_new) else {
                throw ModeError.failed("this bgtaskd cannot call services on the system bus (plugin ABI before 1.4)")
            }
            made = destination.withCString { d in path.withCString { p in interface.withCString { i in
                member.withCString { m in api.pointee.bus_method_call_new(handle, bus.rawValue, d, p, i, m) } } } }
        }
        guard let call = made else {
            throw ModeError.failed("cannot create a call to \(interface).\(member): \(lastError)")
        }
        do {
            try build(PluginMessage(api: api, handle: call))
        } catch {
            api.pointee.message_free(call)
            throw error
        }
        final class Box {
            let api: UnsafePointer<bgt_host_api>
            let reply: (Result<PluginMessage, ModeError>) -> Void
            init(_ api: UnsafePointer<bgt_host_api>, _ reply: @escaping (Result<PluginMessage, ModeError>) -> Void) {
                self.api = api
                self.reply = reply
            }
        }
        let box = Unmanaged.passRetained(Box(api, reply))
        let result = api.pointee.method_call_send(handle, call, Self.microseconds(timeout), { userdata, message, name, text in
            let box = Unmanaged<Box>.fromOpaque(userdata!).takeRetainedValue()
            if let message {
                box.reply(.success(PluginMessage(api: box.api, handle: message)))
            } else {
                box.reply(.failure(ModeError(
                    name.map { ModeError.Code(rawValue: String(cString: $0)) } ?? .failed,
                    text.map { String(cString: $0) } ?? "the call failed")))
            }
        }, box.toOpaque())
        if result < 0 {
            box.release()
            throw ModeError.failed(lastError)
        }
    }

    /// Calls `handler` from the loop with every signal on `bus` that matches
    /// (nil matches anything; `arg0` matches a first string argument). The
    /// handler gets nil once if the bus connection is lost: the subscription
    /// has ended then. Returns the id for ``unsubscribe(_:)``. Needs a 1.4 host.
    @discardableResult
    public func subscribe(
        on bus: Bus, sender: String?, path: String?, interface: String?, member: String?, arg0: String? = nil,
        _ handler: @escaping (PluginMessage?) -> Void
    ) throws(ModeError) -> UInt64 {
        guard hostHas(\.signal_subscribe) else {
            throw ModeError.failed("this bgtaskd cannot subscribe to signals (plugin ABI before 1.4)")
        }
        let box = SubscriptionBox(api: api, host: self, handler: handler)
        var id: UInt64 = 0
        let function: bgt_signal_fn = { userdata, message in
            let box = Unmanaged<SubscriptionBox>.fromOpaque(userdata!).takeUnretainedValue()
            // Kept alive through the handler, which may unsubscribe.
            withExtendedLifetime(box) {
                if let message {
                    box.handler(PluginMessage(api: box.api, handle: message))
                } else {
                    box.host?.subscriptions[box.id] = nil
                    box.handler(nil)
                }
            }
        }
        let userdata = Unmanaged.passUnretained(box).toOpaque()
        let result = withOptionalCString(sender) { s in withOptionalCString(path) { p in withOptionalCString(interface) { i in
            withOptionalCString(member) { m in withOptionalCString(arg0) { a in
                api.pointee.signal_subscribe(handle, bus.rawValue, s, p, i, m, a, function, userdata, &id) } } } } }
        if result < 0 { throw ModeError.failed("cannot subscribe to \(member ?? "signals"): \(lastError)") }
        box.id = id
        subscriptions[id] = box
        return id
    }

    /// Ends a subscription of ``subscribe(on:sender:path:interface:member:arg0:_:)``.
    public func unsubscribe(_ id: UInt64) {
        guard subscriptions.removeValue(forKey: id) != nil, hostHas(\.signal_unsubscribe) else { return }
        _ = api.pointee.signal_unsubscribe(handle, id)
    }

    private func withOptionalCString<R>(_ text: String?, _ body: (UnsafePointer<CChar>?) -> R) -> R {
        guard let text else { return body(nil) }
        return text.withCString { body($0) }
    }

    /// Seconds as the host's µs, saturating (NaN and negatives are 0: the default timeout).
    static func microseconds(_ seconds: Double) -> UInt64 {
        guard seconds > 0 else { return 0 }
        return seconds >= 1.8e13 ? .max : UInt64((seconds * 1_000_000).rounded())
    }

    // MARK: Apps and wakes

    /// What the daemon knows about an app; nil when it has no desktop entry.
    public func appInfo(_ app: String) -> AppInfo? {
        var info = bgt_app_info()
        info.struct_size = UInt32(MemoryLayout<bgt_app_info>.size)
        guard app.withCString({ api.pointee.app_info(handle, $0, &info) }) >= 0 else { return nil }
        return AppInfo(
            known: info.known != 0, running: info.running != 0, launching: info.launching != 0,
            state: info.state.map { String(cString: $0) },
            refreshStatus: info.refresh_status.map { String(cString: $0) } ?? BackgroundRefreshStatus.available.rawValue,
            modes: (info.modes.map { String(cString: $0) } ?? "").split(separator: ";").map(String.init),
            name: info.name.map { String(cString: $0) },
            icon: info.struct_size >= UInt32(MemoryLayout<bgt_app_info>.size) ? info.icon.map { String(cString: $0) } : nil)
    }

    /// The machine's power as the daemon follows it; nil from a host before
    /// ABI 1.8, which does not tell (a plugin then watches the services itself
    /// or assumes nothing).
    public var power: PowerInfo? {
        guard hostHas(\.power_state) else { return nil }
        var state = bgt_power_state()
        state.struct_size = UInt32(MemoryLayout<bgt_power_state>.size)
        guard api.pointee.power_state(handle, &state) >= 0 else { return nil }
        return PowerInfo(
            onBattery: state.on_battery < 0 ? nil : state.on_battery != 0, powerSaver: state.power_saver != 0,
            batteryPercent: state.battery_percent.isNaN ? nil : state.battery_percent)
    }

    /// Every app whose desktop entry declares `mode`.
    public func apps(declaring mode: String) -> [String] {
        final class Box { var apps: [String] = [] }
        let box = Box()
        _ = mode.withCString { m in
            api.pointee.list_apps(handle, m, { userdata, app in
                Unmanaged<Box>.fromOpaque(userdata!).takeUnretainedValue().apps.append(String(cString: app!))
            }, Unmanaged.passUnretained(box).toOpaque())
        }
        return box.apps
    }

    /// Wakes `app` for `reason` with `budget` seconds to complete; launches it
    /// if it is not running. Returns the token; ``PluginEvent/tokenReady(app:token:connection:)`` follows.
    public func wake(_ app: String, reason: String, budget: Double) throws(ModeError) -> String {
        // The token comes back in a buffer on the stack: a wake per event makes this hot.
        try withUnsafeTemporaryAllocation(of: CChar.self, capacity: 128) { (token) throws(ModeError) -> String in
            token[0] = 0
            let result = app.withCString { a in
                reason.withCString { r in api.pointee.wake_app(handle, a, r, budget, token.baseAddress, token.count) }
            }
            if result < 0 { throw ModeError.failed(lastError) }
            return String(cString: token.baseAddress!)
        }
    }

    /// The app behind `connection` completed `token`; throws `NoSuchToken` when it cannot have.
    public func complete(token: String, connection: String) throws(ModeError) {
        let result = token.withCString { t in connection.withCString { c in api.pointee.complete_token(handle, t, c) } }
        if result < 0 { throw ModeError(.noSuchToken, lastError) }
    }

    /// Asks for a ``PluginEvent/wakeOpportunity(realtimeMicroseconds:)`` at a CLOCK_REALTIME time (0 cancels).
    public func scheduleOpportunity(at realtimeMicroseconds: UInt64) {
        _ = api.pointee.schedule_opportunity(handle, realtimeMicroseconds)
    }

    /// The app's foreground intervals since `since` (realtime µs); `end` 0
    /// while still open. Throws when the daemon cannot read them.
    public func usage(of app: String, since: UInt64) throws(ModeError) -> [(start: UInt64, end: UInt64)] {
        final class Box { var intervals: [(start: UInt64, end: UInt64)] = [] }
        let box = Box()
        let result = app.withCString { a in
            api.pointee.usage_history(handle, a, since, { userdata, start, end in
                Unmanaged<Box>.fromOpaque(userdata!).takeUnretainedValue().intervals.append((start, end))
            }, Unmanaged.passUnretained(box).toOpaque())
        }
        if result < 0 { throw ModeError.failed(lastError) }
        return box.intervals
    }

    // MARK: Durable records

    /// Stores a record. Inside a call or an event it is committed with the
    /// others of that call or event, before any reply or signal sent
    /// meanwhile goes out; at other times it is on disk when this returns.
    ///
    /// - Throws: `StorageFailed` when the record cannot be stored (the disk is full, …).
    public func put(_ data: [UInt8], collection: String, key: String) throws(ModeError) {
        let result = collection.withCString { c in
            key.withCString { k in data.withUnsafeBytes { api.pointee.record_put(handle, c, k, $0.baseAddress, $0.count) } }
        }
        if result < 0 { throw storageError(result) }
    }

    /// Deletes a record (no error if it does not exist).
    public func delete(collection: String, key: String) throws(ModeError) {
        let result = collection.withCString { c in key.withCString { k in api.pointee.record_delete(handle, c, k) } }
        if result < 0 { throw storageError(result) }
    }

    /// A failed record write, as the error a call answers with.
    private func storageError(_ result: Int32) -> ModeError {
        result == -EIO || result == -ENOSPC ? ModeError(.storageFailed, lastError) : ModeError.failed(lastError)
    }

    /// Every record of a collection, by key.
    public func records(collection: String) throws(ModeError) -> [(key: String, data: [UInt8])] {
        final class Box { var records: [(key: String, data: [UInt8])] = [] }
        let box = Box()
        let result = collection.withCString { c in
            api.pointee.record_list(handle, c, { userdata, key, data, size in
                let bytes = data.map { Array(UnsafeRawBufferPointer(start: $0, count: size)) } ?? []
                Unmanaged<Box>.fromOpaque(userdata!).takeUnretainedValue().records.append((String(cString: key!), bytes))
            }, Unmanaged.passUnretained(box).toOpaque())
        }
        if result < 0 { throw ModeError.failed(lastError) }
        return box.records
    }
}

import Glibc
