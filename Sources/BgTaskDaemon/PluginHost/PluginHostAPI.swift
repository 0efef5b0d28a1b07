import BgTaskCore
import BgTaskPluginABI
import BgTaskProtocol
import CBgTaskShim
import Glibc
import SDBus

/// The table of host functions every plugin gets (`bgt_host_api`). Each
/// function finds its ``LoadedPlugin`` through the opaque `bgt_host` handle.
///
/// A `bgt_message` is the host's own handle: an SDBus ``Message`` object,
/// retained while the plugin owns it (one it created and has not yet sent or
/// freed), borrowed while the host keeps it alive (a call's arguments, a
/// reply handed to a callback, the dictionary of describe_app). Nothing of
/// sd-bus crosses the ABI; a plugin links no libsystemd.
enum PluginHostAPI {
    /// Built once; plugins keep the pointer for their whole life.
    nonisolated(unsafe) static let table: UnsafeMutablePointer<bgt_host_api> = {
        let table = UnsafeMutablePointer<bgt_host_api>.allocate(capacity: 1)
        table.initialize(to: makeTable())
        return table
    }()

    fileprivate static func host(_ handle: OpaquePointer?) -> LoadedPlugin { LoadedPlugin.from(handle) }

    fileprivate static func string(_ pointer: UnsafePointer<CChar>?) -> String? {
        pointer.map { String(cString: $0) }
    }

    /// A C string the plugin passed, nil unless it is valid UTF-8: ``string(_:)``
    /// repairs what is not, and two different record keys would become one.
    fileprivate static func validString(_ pointer: UnsafePointer<CChar>?) -> String? {
        pointer.flatMap { String(validatingCString: $0) }
    }

    /// Wake tokens are 32 hex digits (``Daemon/newToken(from:)``).
    static let tokenLength = 32
    /// The largest record a plugin may put: far above what a mode keeps
    /// per key, far below SQLite's own limit of a billion bytes.
    static let maximumRecordBytes = 64 << 20
    /// The budgets a plugin may give a wake.
    static let wakeBudgets = 0.001...86_400.0

    /// A handle the plugin owns until it sends or frees the message.
    static func owned(_ message: Message) -> OpaquePointer {
        OpaquePointer(Unmanaged.passRetained(message).toOpaque())
    }

    /// A handle valid while the host keeps `message` alive.
    static func borrowed(_ message: Message) -> OpaquePointer {
        OpaquePointer(Unmanaged.passUnretained(message).toOpaque())
    }

    /// Runs `body` on the message behind a handle, which whoever owns the
    /// handle keeps alive meanwhile; -EINVAL for no handle.
    fileprivate static func using(_ handle: OpaquePointer?, _ body: (Message) -> Int32) -> Int32 {
        guard let handle else { return -EINVAL }
        return Unmanaged<Message>.fromOpaque(UnsafeRawPointer(handle))._withUnsafeGuaranteedRef(body)
    }

    /// The message behind an owned handle, taking the plugin's reference back.
    fileprivate static func take(_ handle: OpaquePointer?) -> Message? {
        handle.map { Unmanaged<Message>.fromOpaque(UnsafeRawPointer($0)).takeRetainedValue() }
    }

    private static func makeTable() -> bgt_host_api {
        var api = bgt_host_api()
        api.struct_size = UInt32(MemoryLayout<bgt_host_api>.size)
        api.abi_major = UInt16(BGTASKD_PLUGIN_ABI_MAJOR)
        api.abi_minor = UInt16(BGTASKD_PLUGIN_ABI_MINOR)

        // Logging, clocks, configuration.
        api.log = { handle, priority, message in
            let host = PluginHostAPI.host(handle)
            let text = "\(host.name): \(PluginHostAPI.string(message) ?? "")"
            switch priority {
            case ...3: host.logger.error("\(text)")
            case 4: host.logger.warning("\(text)")
            case 5: host.logger.notice("\(text)")
            case 6: host.logger.info("\(text)")
            default: host.logger.debug("\(text)")
            }
        }
        api.monotonic_usec = { _ in bgt_monotonic_usec() }
        api.realtime_usec = { handle in PluginHostAPI.host(handle).services.wallClock.now.microseconds }
        api.config = { handle, key in
            let host = PluginHostAPI.host(handle)
            guard let key = PluginHostAPI.string(key), let value = host.services.configValue(key) else { return nil }
            return host.intern(value)
        }

        // D-Bus.
        api.export_interface = { handle, interface in
            let host = PluginHostAPI.host(handle)
            guard let interface else { return host.fail(EINVAL, "no interface given") }
            do throws(PluginError) {
                try host.export(interface.pointee)
                return 0
            } catch {
                return host.fail(EINVAL, error.description)
            }
        }
        api.export_interface_at = { handle, path, interface in
            let host = PluginHostAPI.host(handle)
            guard let interface else { return host.fail(EINVAL, "no interface given") }
            guard let path = PluginHostAPI.string(path), PluginHostAPI.isObjectPath(path) else {
                return host.fail(EINVAL, "not an object path")
            }
            do throws(PluginError) {
                try host.export(interface.pointee, at: path)
                return 0
            } catch {
                return host.fail(EINVAL, error.description)
            }
        }
        api.signal_new = { handle, interface, member in
            guard let interface, let member else { return nil }
            return PluginHostAPI.host(handle).services.newSignal(interface: interface, member: member).map(PluginHostAPI.owned)
        }
        api.signal_send = { handle, message, connection in
            let host = PluginHostAPI.host(handle)
            guard let message = PluginHostAPI.take(message) else { return host.fail(EINVAL, "no message given") }
            guard let cConnection = connection else { return host.fail(EINVAL, "no destination given") }
            do throws(BusError) {
                try message.setDestination(cConnection)
            } catch {
                return host.fail(EINVAL, "cannot send the signal to \(String(cString: cConnection)): \(error.message)")
            }
            if message.isSpoiled { return host.fail(EBADMSG, "cannot send the signal: a value appended to it was refused") }
            if let problem = host.signalProblem(message) { return host.fail(EINVAL, "cannot send the signal: \(problem)") }
            if let outbox = host.outbox(forSignalTo: String(cString: cConnection)) {
                outbox.signal(message)
                return 0
            }
            let r = message.send()
            if r >= 0 { host.sentAtOnce() }
            return r < 0 ? host.fail(-r, "cannot send the signal: \(String(cString: strerror(-r)))") : 0
        }
        api.message_free = { message in _ = PluginHostAPI.take(message) }

        // Messages: one basic value or container step at a time (the hottest
        // calls of the ABI: no reference counting on the way through).
        api.message_read = { message, type, value in PluginHostAPI.using(message) { $0.readBasic(type, into: value) } }
        api.message_enter = { message, type, contents in PluginHostAPI.using(message) { $0.enter(type, contents) } }
        api.message_exit = { message in PluginHostAPI.using(message) { $0.exit() } }
        api.message_peek = { message, type, contents in PluginHostAPI.using(message) { $0.peek(type, contents) } }
        api.message_skip = { message, signature in PluginHostAPI.using(message) { $0.skip(signature) } }
        api.message_append = { message, type, value in PluginHostAPI.using(message) { $0.appendBasic(type, from: value) } }
        api.message_open = { message, type, contents in PluginHostAPI.using(message) { $0.open(type, contents) } }
        api.message_close = { message in PluginHostAPI.using(message) { $0.close() } }

        // Calls.
        api.call_arguments = { call in PluginCallInFlight.from(call).map { PluginHostAPI.borrowed($0.message) } }
        api.call_caller = { call in PluginCallInFlight.from(call).map { UnsafePointer($0.caller) } }
        api.reply_new = { call in
            guard let call = PluginCallInFlight.from(call), let reply = try? call.message.newMethodReturn() else { return nil }
            return PluginHostAPI.owned(reply)
        }
        api.reply_send = { call, reply in
            guard let call = PluginCallInFlight.from(call), let reply = PluginHostAPI.take(reply) else { return -EINVAL }
            // A reply made for another call would answer that call's caller, and leave this one's waiting.
            guard reply.answers(call.message) else {
                return call.host?.fail(EINVAL, "a reply sent for a call it was not made for") ?? -EINVAL
            }
            guard call.markReplied() else { return -EALREADY }
            guard call.message.expectsReply else { return 0 }
            // A reply a write to which failed would cut the daemon off the bus: the caller gets Failed.
            if reply.isSpoiled {
                let error = BusError.failed("the \(call.host?.name ?? "plugin") plugin could not write its reply")
                call.host?.logger.warning("\(error.message): a value it appended was refused")
                if let outbox = call.host?.outbox { outbox.error(error, to: call) } else { call.message.replyError(error) }
                return -EBADMSG
            }
            // sd-bus would drop a reply of another signature without a word: the caller would wait for its timeout.
            if let expected = call.replySignature, reply.signature != expected {
                let error = BusError.failed("the \(call.plugin) plugin's reply to \(call.message.member ?? "a call") did not match its declaration")
                call.host?.logger.warning("\(error.message): it has the arguments '\(reply.signature)', not '\(expected)'")
                if let outbox = call.host?.outbox { outbox.error(error, to: call) } else { call.message.replyError(error) }
                return -EINVAL
            }
            if let outbox = call.host?.outbox {
                outbox.reply(reply, to: call)
                return 0
            }
            return PluginOutbox.send(reply, to: call)
        }
        api.reply_error = { call, name, message in
            guard let call = PluginCallInFlight.from(call), let name = PluginHostAPI.string(name) else { return -EINVAL }
            guard call.markReplied() else { return -EALREADY }
            // An error of a malformed name is a message the bus refuses: it would cut the daemon off.
            guard PluginLoader.isErrorName(name) else {
                let error = BusError.failed("the \(call.plugin) plugin answered with an error that has no valid name")
                call.host?.logger.warning("\(error.message): '\(LogText.escaped(String(name.prefix(300))))'")
                if let outbox = call.host?.outbox { outbox.error(error, to: call) } else { call.message.replyError(error) }
                return -EINVAL
            }
            call.host?.noteErrorName(name)
            let error = BusError(name: name, message: PluginHostAPI.string(message) ?? name)
            if let outbox = call.host?.outbox { outbox.error(error, to: call) } else { call.message.replyError(error) }
            return 0
        }
        api.call_retain = { call in
            if let call { _ = Unmanaged<PluginCallInFlight>.fromOpaque(UnsafeRawPointer(call)).retain() }
        }
        api.call_release = { call in
            if let call { Unmanaged<PluginCallInFlight>.fromOpaque(UnsafeRawPointer(call)).release() }
        }

        // Apps and wakes.
        api.app_info = { handle, appID, info in
            let host = PluginHostAPI.host(handle)
            guard let info, let text = PluginHostAPI.string(appID), let app = try? AppID(validating: text) else {
                return host.fail(EINVAL, "not a valid app id")
            }
            let known = host.engine.appInfo(app)
            let size = min(Int(info.pointee.struct_size), MemoryLayout<bgt_app_info>.size)
            var filled = bgt_app_info()
            filled.struct_size = UInt32(size)
            filled.known = known.known ? 1 : 0
            filled.running = known.running ? 1 : 0
            filled.launching = known.launching ? 1 : 0
            filled.state = known.state.map { host.intern($0) }
            filled.refresh_status = host.intern(known.refreshStatus)
            filled.modes = host.intern(known.modes.joined(separator: ";"))
            filled.name = known.name.map { host.intern($0) }
            filled.icon = known.icon.map { host.intern($0) }
            // Only as much as the plugin's struct holds.
            withUnsafeBytes(of: &filled) { UnsafeMutableRawPointer(info).copyMemory(from: $0.baseAddress!, byteCount: size) }
            return known.known ? 0 : host.fail(ENOENT, "\(app) has no desktop entry")
        }
        api.list_apps = { handle, mode, each, userdata in
            let host = PluginHostAPI.host(handle)
            guard let mode = PluginHostAPI.string(mode), let each else { return host.fail(EINVAL, "no mode or callback given") }
            for app in host.services.apps(declaring: mode) {
                app.rawValue.withCString { each(userdata, $0) }
            }
            return 0
        }
        api.wake_app = { handle, appID, reason, budget, tokenOut, tokenSize in
            let host = PluginHostAPI.host(handle)
            guard let text = PluginHostAPI.string(appID), let app = try? AppID(validating: text) else {
                return host.fail(EINVAL, "not a valid app id")
            }
            guard let reason = PluginHostAPI.string(reason), let tokenOut, budget.isFinite, budget > 0 else {
                return host.fail(EINVAL, "wake_app needs a reason, a positive budget and room for the token")
            }
            // Checked before the wake: a failed call has no effect.
            guard tokenSize > PluginHostAPI.tokenLength else {
                return host.fail(ENOBUFS, "no room for the token: it takes \(PluginHostAPI.tokenLength + 1) bytes")
            }
            guard reason == host.name else {
                return host.fail(EPERM, "the \(host.name) plugin wakes apps for its own mode, not for \(reason)")
            }
            guard PluginHostAPI.wakeBudgets.contains(budget) else {
                return host.fail(EINVAL, "a budget of \(budget) s is outside 0.001 s to 1 day")
            }
            do throws(CoreError) {
                var token = try host.engine.wake(app, reason: reason, plugin: host.name, budget: .seconds(double: budget))
                return token.withUTF8 { bytes in
                    guard bytes.count < tokenSize else { return host.fail(ENOBUFS, "no room for the token") }
                    UnsafeMutableRawPointer(tokenOut).copyMemory(from: bytes.baseAddress!, byteCount: bytes.count)
                    tokenOut[bytes.count] = 0
                    return 0
                }
            } catch {
                let code: Int32 = switch error.code {
                case .unknownApplication: ENOENT
                case .modeNotDeclared, .notPermitted: EPERM
                case .invalidArgs: EINVAL
                default: EAGAIN
                }
                return host.fail(code, error.message)
            }
        }
        api.complete_token = { handle, token, connection in
            let host = PluginHostAPI.host(handle)
            guard let token = PluginHostAPI.string(token), let connection = PluginHostAPI.string(connection) else {
                return host.fail(EINVAL, "no token or connection given")
            }
            do throws(CoreError) {
                try host.engine.completeWake(token: token, connection: ConnectionID(connection), plugin: host.name)
                return 0
            } catch {
                return host.fail(ENOENT, error.message)
            }
        }
        api.schedule_opportunity = { handle, realtime in
            let host = PluginHostAPI.host(handle)
            host.services.scheduleOpportunity(for: host, at: realtime)
            return 0
        }
        api.usage_history = { handle, appID, since, each, userdata in
            let host = PluginHostAPI.host(handle)
            guard let text = PluginHostAPI.string(appID), let app = try? AppID(validating: text), let each else {
                return host.fail(EINVAL, "not a valid app id, or no callback")
            }
            guard let intervals = host.services.usage(of: app, since: since) else {
                return host.fail(EIO, "cannot read the usage history of \(app)")
            }
            for interval in intervals { each(userdata, interval.start, interval.end) }
            return 0
        }

        // Durable records.
        api.record_put = { handle, collection, key, data, size in
            let host = PluginHostAPI.host(handle)
            guard let collection = PluginHostAPI.validString(collection), let key = PluginHostAPI.validString(key) else {
                return host.fail(EINVAL, "no collection or key given, or one that is not valid UTF-8")
            }
            guard data != nil || size == 0 else { return host.fail(EINVAL, "no data for \(size) bytes") }
            // Refused before the copy: a gigabyte record took two in memory, then SQLite refused it as an I/O error.
            guard size <= PluginHostAPI.maximumRecordBytes else {
                return host.fail(EFBIG, "a record of \(size) bytes; the most is \(PluginHostAPI.maximumRecordBytes)")
            }
            let bytes = data.map { Array(UnsafeRawBufferPointer(start: $0, count: size)) } ?? []
            return host.services.putRecord(plugin: host.name, collection: collection, key: key, data: bytes)
                ? 0 : host.fail(EIO, "cannot store the record")
        }
        api.record_delete = { handle, collection, key in
            let host = PluginHostAPI.host(handle)
            guard let collection = PluginHostAPI.validString(collection), let key = PluginHostAPI.validString(key) else {
                return host.fail(EINVAL, "no collection or key given, or one that is not valid UTF-8")
            }
            return host.services.deleteRecord(plugin: host.name, collection: collection, key: key)
                ? 0 : host.fail(EIO, "cannot delete the record")
        }
        api.record_list = { handle, collection, each, userdata in
            let host = PluginHostAPI.host(handle)
            guard let collection = PluginHostAPI.validString(collection), let each else {
                return host.fail(EINVAL, "no collection or callback, or a collection that is not valid UTF-8")
            }
            guard let records = host.services.records(plugin: host.name, collection: collection) else {
                return host.fail(EIO, "cannot read the records")
            }
            for record in records {
                record.key.withCString { key in
                    record.data.withUnsafeBytes { each(userdata, key, $0.baseAddress, $0.count) }
                }
            }
            return 0
        }
        api.last_error = { handle in PluginHostAPI.host(handle).lastError }

        // Work from the plugin's own threads (1.7): the only function called off the loop.
        api.post = { handle, function, userdata in
            let host = PluginHostAPI.host(handle)
            guard let function else { return -EINVAL }
            // Describing plugins, nothing runs: the work is taken and dropped, as the plugin stops at once.
            guard let inbox = host.inbox else { return host.services.isOffline ? 0 : -ENOTSUP }
            // Pointers cross threads as numbers. The plugin owns what userdata
            // points to; the host outlives its inbox, whose jobs run only while it exists.
            let address = UInt(bitPattern: userdata)
            let hostAddress = UInt(bitPattern: handle)
            inbox.post {
                PluginHostAPI.host(OpaquePointer(bitPattern: hostAddress)).fromLoop { function(UnsafeMutableRawPointer(bitPattern: address)) }
            }
            return 0
        }

        // The power state the daemon follows (1.8).
        api.power_state = { handle, state in
            let host = PluginHostAPI.host(handle)
            guard let state else { return host.fail(EINVAL, "no power state to fill") }
            let power = host.services.power
            let size = min(Int(state.pointee.struct_size), MemoryLayout<bgt_power_state>.size)
            var filled = bgt_power_state()
            filled.struct_size = UInt32(size)
            filled.on_battery = power.onBattery.map { $0 ? 1 : 0 } ?? -1
            filled.power_saver = power.powerSaver ? 1 : 0
            filled.battery_percent = power.batteryPercent ?? .nan
            // Only as much as the plugin's struct holds.
            withUnsafeBytes(of: &filled) { UnsafeMutableRawPointer(state).copyMemory(from: $0.baseAddress!, byteCount: size) }
            return 0
        }

        // Calls to other services (1.1).
        api.method_call_new = { handle, destination, path, interface, member in
            PluginHostAPI.newCall(handle, UInt32(BGT_BUS_USER), destination, path, interface, member)
        }
        api.method_call_send = { handle, call, timeout, reply, userdata in
            let host = PluginHostAPI.host(handle)
            guard let call = PluginHostAPI.take(call) else { return host.fail(EINVAL, "no call given") }
            guard let reply else { return host.fail(EINVAL, "no reply function given") }
            return PluginReplyForwarder.send(call, timeout: timeout, host: host, reply: reply, userdata: userdata)
        }

        // The system bus and signals (1.4).
        api.bus_method_call_new = { handle, bus, destination, path, interface, member in
            PluginHostAPI.newCall(handle, bus, destination, path, interface, member)
        }
        api.signal_subscribe = { handle, bus, sender, path, interface, member, arg0, function, userdata, idOut in
            let host = PluginHostAPI.host(handle)
            guard let function, let idOut else { return host.fail(EINVAL, "signal_subscribe needs a function and room for the id") }
            let subscription = PluginSubscription(
                host: host, bus: bus, sender: PluginHostAPI.string(sender), path: PluginHostAPI.string(path),
                interface: PluginHostAPI.string(interface), member: PluginHostAPI.string(member), arg0: PluginHostAPI.string(arg0),
                function: function, userdata: userdata)
            do throws(BusError) {
                idOut.pointee = try host.services.subscribe(subscription)
                return 0
            } catch {
                return host.fail(error.name == BusError.invalidArgs("").name ? EINVAL : EIO, "cannot subscribe: \(error.message)")
            }
        }
        api.signal_unsubscribe = { handle, id in
            let host = PluginHostAPI.host(handle)
            return host.services.unsubscribe(id, of: host) ? 0 : host.fail(ENOENT, "no subscription \(id)")
        }
        return api
    }

    /// A call the plugin writes and then sends with method_call_send.
    private static func newCall(
        _ handle: OpaquePointer?, _ bus: UInt32, _ destination: UnsafePointer<CChar>?, _ path: UnsafePointer<CChar>?,
        _ interface: UnsafePointer<CChar>?, _ member: UnsafePointer<CChar>?
    ) -> OpaquePointer? {
        let host = PluginHostAPI.host(handle)
        guard let path, let member else {
            _ = host.fail(EINVAL, "a call needs a path and a member")
            return nil
        }
        do throws(BusError) {
            // sd-bus checks the names; they go to it as the plugin gave them.
            return PluginHostAPI.owned(try host.services.newMethodCall(
                on: bus, destination: destination, path: path, interface: interface, member: member))
        } catch {
            _ = host.fail(EIO, "cannot make the call: \(error.message)")
            return nil
        }
    }

    /// Whether `text` is a D-Bus object path: "/", or "/"-separated
    /// non-empty elements of ASCII letters, digits and "_".
    static func isObjectPath(_ text: String) -> Bool {
        guard text != "/" else { return true }
        guard text.hasPrefix("/"), !text.hasSuffix("/") else { return false }
        return text.dropFirst().split(separator: "/", omittingEmptySubsequences: false).allSatisfy { element in
            !element.isEmpty && element.utf8.allSatisfy { ($0 >= 0x30 && $0 <= 0x39) || ($0 >= 0x41 && $0 <= 0x5A) || ($0 >= 0x61 && $0 <= 0x7A) || $0 == 0x5F }
        }
    }
}
