import Logging
import SDBus

/// Sends `PropertiesChanged` for changed properties at most once per
/// interval: the first change goes out at once, changes during the following
/// interval are folded into one signal at its end. A burst of calls then costs
/// a few signals, not one per call, and a quiet daemon sets no timer at all.
final class PropertyBatcher {
    private let bus: Bus
    private let loop: EventLoop
    private let path: String
    private let interface: String
    private let interval: UInt64
    private let logger: Logger
    private var dirty: [String] = []
    private var lastEmit: UInt64 = 0
    private var timer: Timer?

    init(bus: Bus, loop: EventLoop, path: String, interface: String, intervalMicroseconds: UInt64, logger: Logger) {
        self.bus = bus
        self.loop = loop
        self.path = path
        self.interface = interface
        self.interval = intervalMicroseconds
        self.logger = logger
    }

    /// Notes that `name` changed.
    func changed(_ name: String) {
        if !dirty.contains(name) { dirty.append(name) }
        if timer?.armedAt != nil { return }
        let now = loop.now
        if now >= lastEmit + interval {
            flush()
        } else {
            if timer == nil {
                timer = try? loop.makeTimer { [unowned self] in self.flush() }
            }
            timer?.arm(at: lastEmit + interval)
        }
    }

    /// Sends whatever is pending now.
    func flush() {
        guard !dirty.isEmpty else { return }
        do {
            try bus.emitPropertiesChanged(path: path, interface: interface, names: dirty)
        } catch {
            logger.warning("cannot emit PropertiesChanged", metadata: ["error": "\(error)"])
        }
        dirty.removeAll(keepingCapacity: true)
        lastEmit = loop.now
        timer?.arm(at: nil)
    }
}
