import CBgTaskShim
import CSystemd
import Glibc

/// A named, typed argument of a method or signal.
public struct BusArgument: Sendable, Equatable {
    public var name: String
    public var signature: String

    public init(_ name: String, _ signature: String) {
        self.name = name
        self.signature = signature
    }
}

/// A method: its handler reads the arguments from the call and replies, now
/// (``Message/reply(_:)``) or later, or throws a ``BusError`` to answer with it.
public struct BusMethod {
    public var name: String
    public var inputs: [BusArgument]
    public var outputs: [BusArgument]
    public var handler: (Message) throws(BusError) -> Void

    public init(
        _ name: String, inputs: [BusArgument] = [], outputs: [BusArgument] = [],
        handler: @escaping (Message) throws(BusError) -> Void
    ) {
        self.name = name
        self.inputs = inputs
        self.outputs = outputs
        self.handler = handler
    }
}

/// A signal the object may emit.
public struct BusSignal: Sendable {
    public var name: String
    public var arguments: [BusArgument]

    public init(_ name: String, _ arguments: [BusArgument] = []) {
        self.name = name
        self.arguments = arguments
    }
}

/// A property: its getter appends the value to the reply; a writable one's
/// setter reads the new value from the `Set` call.
public struct BusProperty {
    /// What `PropertiesChanged` says when the value changes.
    public enum Change: Sendable {
        /// Never changes.
        case constant
        /// Changes are sent with the new value.
        case emitsChange
        /// Changes are sent by name only (large or ever-changing values).
        case emitsInvalidation
        /// Changes are not announced.
        case none
    }

    public var name: String
    public var signature: String
    public var change: Change
    public var getter: (Message) throws(BusError) -> Void
    /// Reads the value a `Set` call carries; nil: read-only.
    public var setter: ((Message) throws(BusError) -> Void)?

    public init(
        _ name: String, _ signature: String, change: Change, getter: @escaping (Message) throws(BusError) -> Void,
        setter: ((Message) throws(BusError) -> Void)? = nil
    ) {
        self.name = name
        self.signature = signature
        self.change = change
        self.getter = getter
        self.setter = setter
    }
}

/// An interface to export on an object path.
public struct BusInterface {
    public var name: String
    public var methods: [BusMethod]
    public var signals: [BusSignal]
    public var properties: [BusProperty]

    public init(name: String, methods: [BusMethod] = [], signals: [BusSignal] = [], properties: [BusProperty] = []) {
        self.name = name
        self.methods = methods
        self.signals = signals
        self.properties = properties
    }
}

extension Bus {
    /// Exports `interface` at `path`; sd-bus then also serves Introspect,
    /// Properties and PropertiesChanged for it. Dropping the result removes it.
    public func export(_ interface: BusInterface, at path: String) throws(BusError) -> ExportedObject {
        let object = ExportedObject(interface)
        var slot: OpaquePointer?
        try check(
            sd_bus_add_object_vtable(handle, &slot, path, interface.name, object.vtable, nil),
            "exporting \(interface.name) at \(path)")
        object.slot = slot
        return object
    }
}

/// An exported interface: the C vtable and everything it points into, kept
/// alive and unmoved for as long as it is registered.
public final class ExportedObject {
    final class MethodBox {
        let handler: (Message) throws(BusError) -> Void
        init(_ handler: @escaping (Message) throws(BusError) -> Void) { self.handler = handler }
    }

    final class PropertyBox {
        let getter: (Message) throws(BusError) -> Void
        let setter: ((Message) throws(BusError) -> Void)?
        init(_ getter: @escaping (Message) throws(BusError) -> Void, _ setter: ((Message) throws(BusError) -> Void)?) {
            self.getter = getter
            self.setter = setter
        }
    }

    let vtable: UnsafeMutablePointer<sd_bus_vtable>
    private let count: Int
    private var strings: [UnsafeMutablePointer<CChar>] = []
    private var boxes: [AnyObject] = []
    fileprivate(set) var slot: OpaquePointer?

    private static let methodTrampoline: sd_bus_message_handler_t = { message, userdata, out in
        let box = Unmanaged<MethodBox>.fromOpaque(userdata!).takeUnretainedValue()
        do throws(BusError) {
            try box.handler(Message(retaining: message!))
            return 1
        } catch {
            return error.set(into: out)
        }
    }

    private static let getterTrampoline: sd_bus_property_get_t = { _, _, _, _, reply, userdata, out in
        let box = Unmanaged<PropertyBox>.fromOpaque(userdata!).takeUnretainedValue()
        do throws(BusError) {
            try box.getter(Message(retaining: reply!))
            return 1
        } catch {
            return error.set(into: out)
        }
    }

    private static let setterTrampoline: sd_bus_property_set_t = { _, _, _, _, value, userdata, out in
        let box = Unmanaged<PropertyBox>.fromOpaque(userdata!).takeUnretainedValue()
        do throws(BusError) {
            try box.setter?(Message(retaining: value!))
            return 1
        } catch {
            return error.set(into: out)
        }
    }

    init(_ interface: BusInterface) {
        count = 2 + interface.methods.count + interface.signals.count + interface.properties.count
        vtable = .allocate(capacity: count)
        var index = 0
        func add(_ entry: sd_bus_vtable) {
            (vtable + index).initialize(to: entry)
            index += 1
        }
        add(bgt_vtable_start(0))
        for method in interface.methods {
            let box = MethodBox(method.handler)
            boxes.append(box)
            let names = (method.inputs + method.outputs).map { $0.name + "\0" }.joined()
            add(bgt_vtable_method(
                keep(method.name), keep(method.inputs.map(\.signature).joined()),
                keep(method.outputs.map(\.signature).joined()), keep(names),
                Self.methodTrampoline, Int(bitPattern: Unmanaged.passUnretained(box).toOpaque()),
                // Callers' rights are checked by the handlers, never by sd-bus.
                bgt_vtable_flag_unprivileged | bgt_vtable_flag_absolute_offset))
        }
        for signal in interface.signals {
            let names = signal.arguments.map { $0.name + "\0" }.joined()
            add(bgt_vtable_signal(keep(signal.name), keep(signal.arguments.map(\.signature).joined()), keep(names), 0))
        }
        for property in interface.properties {
            let box = PropertyBox(property.getter, property.setter)
            boxes.append(box)
            let flags: UInt64 = switch property.change {
            case .constant: bgt_vtable_flag_property_const
            case .emitsChange: bgt_vtable_flag_emits_change
            case .emitsInvalidation: bgt_vtable_flag_emits_invalidation
            case .none: 0
            }
            let offset = Int(bitPattern: Unmanaged.passUnretained(box).toOpaque())
            if property.setter != nil {
                add(bgt_vtable_writable_property(
                    keep(property.name), keep(property.signature), Self.getterTrampoline, Self.setterTrampoline, offset,
                    // Who may write is the setter's business, as for methods.
                    flags | bgt_vtable_flag_absolute_offset | bgt_vtable_flag_unprivileged))
            } else {
                add(bgt_vtable_property(
                    keep(property.name), keep(property.signature), Self.getterTrampoline, offset,
                    flags | bgt_vtable_flag_absolute_offset))
            }
        }
        add(bgt_vtable_end())
    }

    /// Copies `text` to C memory that lives as long as this object (NULs inside are kept).
    private func keep(_ text: String) -> UnsafeMutablePointer<CChar> {
        let bytes = Array(text.utf8)
        let pointer = UnsafeMutablePointer<CChar>.allocate(capacity: bytes.count + 1)
        for (i, byte) in bytes.enumerated() { pointer[i] = CChar(bitPattern: byte) }
        pointer[bytes.count] = 0
        strings.append(pointer)
        return pointer
    }

    /// Removes the object from the bus now.
    public func cancel() {
        if let slot { sd_bus_slot_unref(slot) }
        slot = nil
    }

    deinit {
        cancel()
        vtable.deinitialize(count: count)
        vtable.deallocate()
        for pointer in strings { pointer.deallocate() }
    }
}
