import BgTaskProtocol
import BgTaskPluginABI
import Glibc

/// Builds the C descriptor for a ``ModePlugin`` type. Each plugin library has
/// its own copy of this module, so the one factory it holds is that plugin's.
public enum PluginExport {
    nonisolated(unsafe) private static var factory: ((PluginHost) throws -> any ModePlugin)?
    nonisolated(unsafe) private static var descriptor: UnsafeMutablePointer<bgt_plugin_descriptor>?

    /// The descriptor to return from `bgtaskd_plugin_entry`.
    public static func descriptor<Plugin: ModePlugin>(for type: Plugin.Type) -> UnsafeRawPointer {
        if let descriptor { return UnsafeRawPointer(descriptor) }
        factory = { try Plugin(host: $0) }
        let d = UnsafeMutablePointer<bgt_plugin_descriptor>.allocate(capacity: 1)
        d.initialize(to: bgt_plugin_descriptor())
        d.pointee.struct_version = UInt32(BGTASKD_PLUGIN_DESCRIPTOR_VERSION)
        d.pointee.abi_major = UInt16(BGTASKD_PLUGIN_ABI_MAJOR)
        d.pointee.abi_minor = UInt16(BGTASKD_PLUGIN_ABI_MINOR)
        d.pointee.name = UnsafePointer(strdup(Plugin.name))
        d.pointee.version = UnsafePointer(strdup(Plugin.version))
        d.pointee.flags = (Plugin.wakesNeedRefresh ? BGT_PLUGIN_WAKES_NEED_REFRESH : 0) | (Plugin.wantsWakeEnds ? BGT_PLUGIN_WANTS_WAKE_ENDS : 0)
        d.pointee.`init` = { api, host, errorOut, errorSize in
            guard let api, let host, let factory = PluginExport.factory else { return nil }
            do {
                let pluginHost = PluginHost(api: api, handle: host)
                let plugin = try factory(pluginHost)
                return UnsafeMutableRawPointer(Unmanaged.passRetained(PluginBox(plugin, api: api, host: pluginHost)).toOpaque())
            } catch {
                write("\(error)", to: errorOut, size: errorSize)
                return nil
            }
        }
        d.pointee.start = { context, errorOut, errorSize in
            do {
                try PluginBox.from(context).plugin.start()
                return 0
            } catch {
                write("\(error)", to: errorOut, size: errorSize)
                return -EINVAL
            }
        }
        d.pointee.stop = { context in
            guard let context else { return }
            let box = Unmanaged<PluginBox>.fromOpaque(context)
            box.takeUnretainedValue().plugin.stop()
            box.release()
        }
        d.pointee.handle_call = { context, interface, member, call in
            let box = PluginBox.from(context)
            let pluginCall = PluginCall(
                api: box.api, handle: call!, interface: String(cString: interface!), member: String(cString: member!))
            do {
                try box.plugin.handle(pluginCall)
            } catch let error as ModeError {
                pluginCall.fail(error)
            } catch {
                pluginCall.fail(.failed("\(error)"))
            }
        }
        d.pointee.event = { context, event in
            guard let event, let converted = PluginExport.convert(event.pointee) else { return }
            PluginBox.from(context).plugin.handle(converted)
        }
        d.pointee.describe_app = { context, app, dict in
            let box = PluginBox.from(context)
            var description: [String: PluginValue] = [:]
            box.plugin.describe(app: String(cString: app!), into: &description)
            try? PluginMessage(api: box.api, handle: dict!).appendEntries(description)
        }
        d.pointee.waiting_events = { context, app in
            guard let app else { return 0 }
            return UInt32(clamping: PluginBox.from(context).plugin.waitingEvents(for: String(cString: app)))
        }
        d.pointee.batch_begin = { context in
            let box = PluginBox.from(context)
            // Inside a batch this is a new starting point: what was done so far stands.
            box.host.runCommittedActions()
            box.host.inBatch = true
            box.plugin.checkpoint()
        }
        d.pointee.batch_rollback = { context in
            let box = PluginBox.from(context)
            box.host.committedActions.removeAll()
            box.host.inBatch = false
            box.plugin.rollBack()
        }
        d.pointee.batch_commit = { context in
            let box = PluginBox.from(context)
            box.host.runCommittedActions()
            box.plugin.committed()
        }
        // The declarations live as long as the library, as the descriptor does.
        let keys = Plugin.configKeys
        let cKeys = UnsafeMutablePointer<bgt_config_key>.allocate(capacity: max(keys.count, 1))
        for (index, key) in keys.enumerated() {
            var c = bgt_config_key()
            c.name = UnsafePointer(strdup(key.name))
            switch key.kind {
            case .number(let minimum, let maximum, let positive, let unit):
                c.type = UInt32(BGT_CONFIG_NUMBER)
                (c.minimum, c.maximum, c.positive) = (minimum, maximum, positive ? 1 : 0)
                c.unit = UnsafePointer(strdup(unit))
            case .integer(let minimum, let maximum):
                c.type = UInt32(BGT_CONFIG_INTEGER)
                (c.minimum, c.maximum) = (Double(minimum), Double(maximum))
            }
            c.default_value = UnsafePointer(strdup(key.defaultText))
            c.help = UnsafePointer(strdup(key.help))
            (cKeys + index).initialize(to: c)
        }
        d.pointee.config_keys = UnsafePointer(cKeys)
        d.pointee.n_config_keys = keys.count
        let names = Plugin.errorNames
        let cNames = UnsafeMutablePointer<bgt_error_name>.allocate(capacity: max(names.count, 1))
        for (index, name) in names.enumerated() {
            (cNames + index).initialize(to: bgt_error_name(name: UnsafePointer(strdup(name.rawValue)), help: nil))
        }
        d.pointee.error_names = UnsafePointer(cNames)
        d.pointee.n_error_names = names.count
        descriptor = d
        return UnsafeRawPointer(d)
    }

    static func convert(_ event: bgt_event) -> PluginEvent? {
        func text(_ pointer: UnsafePointer<CChar>?) -> String { pointer.map { String(cString: $0) } ?? "" }
        switch Int(event.type) {
        case BGT_EVENT_APP_CHECKED_IN:
            return .appCheckedIn(app: text(event.app_id), connection: text(event.connection), reason: text(event.reason))
        case BGT_EVENT_APP_STATE_CHANGED: return .appStateChanged(app: text(event.app_id), state: text(event.state))
        case BGT_EVENT_APP_GONE: return .appGone(app: text(event.app_id))
        case BGT_EVENT_WAKE_OPPORTUNITY: return .wakeOpportunity(realtimeMicroseconds: event.realtime_usec)
        case BGT_EVENT_TOKEN_READY:
            return .tokenReady(app: text(event.app_id), token: text(event.token), connection: text(event.connection))
        case BGT_EVENT_TOKEN_COMPLETED: return .tokenCompleted(app: text(event.app_id), token: text(event.token))
        case BGT_EVENT_TOKEN_EXPIRED: return .tokenExpired(app: text(event.app_id), token: text(event.token))
        case BGT_EVENT_LAUNCH_FAILED:
            return .launchFailed(app: text(event.app_id), token: event.token.map { String(cString: $0) }, reason: text(event.reason))
        case BGT_EVENT_APPS_CHANGED: return .appsChanged
        case BGT_EVENT_REFRESH_CHANGED: return .refreshChanged
        case BGT_EVENT_APP_WOKEN:
            return .appWoken(app: text(event.app_id), connection: text(event.connection), reason: text(event.reason))
        case BGT_EVENT_SLEEP_CHANGED:
            return .sleepChanged(sleeping: text(event.state) == "sleeping", realtimeMicroseconds: event.realtime_usec)
        case BGT_EVENT_SYSTEM_BUS_BACK: return .systemBusBack
        case BGT_EVENT_APP_WAKE_ENDED:
            return .appWakeEnded(app: text(event.app_id), reason: text(event.reason), completed: text(event.state) == "completed")
        default: return nil  // newer hosts may send events this plugin does not know
        }
    }
}

/// Holds the plugin instance behind the `void *` the host keeps.
final class PluginBox {
    let plugin: any ModePlugin
    let api: UnsafePointer<bgt_host_api>
    let host: PluginHost

    init(_ plugin: any ModePlugin, api: UnsafePointer<bgt_host_api>, host: PluginHost) {
        self.plugin = plugin
        self.api = api
        self.host = host
    }

    static func from(_ context: UnsafeMutableRawPointer?) -> PluginBox {
        Unmanaged<PluginBox>.fromOpaque(context!).takeUnretainedValue()
    }
}

/// Copies `text` into a C error buffer of `size` bytes, NUL-terminated.
private func write(_ text: String, to buffer: UnsafeMutablePointer<CChar>?, size: Int) {
    guard let buffer, size > 0 else { return }
    let bytes = Array(text.utf8.prefix(size - 1))
    for (index, byte) in bytes.enumerated() { buffer[index] = CChar(bitPattern: byte) }
    buffer[bytes.count] = 0
}
