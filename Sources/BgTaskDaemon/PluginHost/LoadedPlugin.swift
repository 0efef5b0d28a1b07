import BgTaskCore
import BgTaskPluginABI
import BgTaskProtocol
import CBgTaskShim
import Glibc
import Logging
import SDBus

/// The daemon's side of one loaded plugin (`bgt_host`): it starts and stops
/// the plugin, turns calls of the plugin's interfaces into `bgt_call`s, and
/// queues events for it.
///
/// Events are never delivered while the plugin is inside a call to the host
/// (a wake it asks for may be ready at once): they are queued and handed over
/// from the loop right after, in order.
final class LoadedPlugin {
    let name: String
    let version: String
    let path: String
    let abiMajor: UInt16
    let abiMinor: UInt16
    private let descriptor: UnsafePointer<bgt_plugin_descriptor>
    /// The bus, records, configuration and clocks plugins reach.
    let services: PluginServices
    /// The engine's side: callers, apps, wakes, batches.
    unowned let engine: any PluginEngineAccess
    private var context: UnsafeMutableRawPointer?
    /// The interfaces the plugin exported (also for `--bus-introspect`).
    private(set) var interfaces: [BusInterface] = []
    /// Every signal the plugin's interfaces declare, as C strings (see ``signalProblem(_:)``).
    private var declaredSignals: [(interface: UnsafeMutablePointer<CChar>, member: UnsafeMutablePointer<CChar>, signature: UnsafeMutablePointer<CChar>)] = []
    private var queued: [QueuedPluginEvent] = []
    private var flushScheduled = false
    /// Events the running batch was handed that it did not set off (they
    /// waited before it began, or before its last commit point): facts the
    /// engine cannot take back, such as a wake's budget running out. If the
    /// batch cannot be committed they are handed over again (see ``batch(_:)``).
    private var handedOver: [QueuedPluginEvent] = []
    /// How many of the queued events the running batch did not set off.
    private var waitingBefore = 0
    /// Hands over again what a batch that could not be committed was handed
    /// (``retryDelay`` after it failed, unless another batch takes them first).
    private var retryTimer: SDBus.Timer?
    /// Seconds until the next retry; doubles while batches keep failing.
    private var retryDelay = LoadedPlugin.firstRetryDelay
    static let firstRetryDelay = 0.5
    static let longestRetryDelay = 8.0
    private var interned: [String: UnsafeMutablePointer<CChar>] = [:]
    private var lastErrorText: UnsafeMutablePointer<CChar>?
    var opportunityTimer: SDBus.Timer?
    /// Where the plugin's own threads hand work to the loop (ABI 1.7 `post`);
    /// made before the plugin starts and kept until it is gone, so that other
    /// threads may read it without a lock. Nil offline.
    let inbox: Inbox?
    /// The error names the plugin declared (ABI 1.3); nil for an older plugin, which declares none.
    let errorNames: Set<String>?
    /// Undeclared error names already warned about.
    private var undeclaredNames: Set<String> = []

    init(candidate: PluginLoader.Candidate, services: PluginServices, engine: any PluginEngineAccess) {
        name = candidate.name
        version = candidate.version
        path = candidate.path
        descriptor = candidate.descriptor
        abiMajor = candidate.descriptor.pointee.abi_major
        abiMinor = candidate.descriptor.pointee.abi_minor
        errorNames = candidate.descriptor.pointee.struct_version >= 3 ? candidate.errorNames : nil
        self.services = services
        self.engine = engine
        inbox = try? services.loop?.makeInbox()
    }

    deinit {
        for pointer in interned.values { free(pointer) }
        for declared in declaredSignals { free(declared.interface); free(declared.member); free(declared.signature) }
        free(lastErrorText)
    }

    /// The opaque handle the plugin sees.
    var handle: OpaquePointer { OpaquePointer(Unmanaged.passUnretained(self).toOpaque()) }

    static func from(_ handle: OpaquePointer?) -> LoadedPlugin {
        Unmanaged<LoadedPlugin>.fromOpaque(UnsafeRawPointer(handle!)).takeUnretainedValue()
    }

    var logger: Logger { services.logger }

    /// Warns, once per name, when the plugin answers with an error name it did
    /// not declare: the documentation of its interface would not name it.
    /// The bus's own `org.freedesktop.DBus.Error.*` names and the host's
    /// `StorageFailed` need no declaration.
    func noteErrorName(_ name: String) {
        guard let errorNames, !errorNames.contains(name), !name.hasPrefix("org.freedesktop.DBus.Error."),
            name != BgTaskError.Code.storageFailed.rawValue, undeclaredNames.insert(name).inserted
        else { return }
        logger.warning("plugin \(self.name) answered with the error \(name), which it does not declare")
    }

    // MARK: Life cycle

    /// Runs the plugin's init and start; throws why it failed.
    func start() throws(PluginError) {
        var error = [CChar](repeating: 0, count: 512)
        guard let context = descriptor.pointee.`init`!(PluginHostAPI.table, handle, &error, error.count) else {
            throw PluginError("init failed: \(Self.text(error, or: "no reason given"))")
        }
        self.context = context
        // Only a host call of its start can be the reason its start gives none.
        free(lastErrorText)
        lastErrorText = nil
        let result = descriptor.pointee.start!(context, &error, error.count)
        if result < 0 {
            descriptor.pointee.stop!(context)
            self.context = nil
            // What it exported goes with it: nothing may call a stopped plugin.
            services.unexport(by: self)
            interfaces.removeAll()
            // Without a reason of its own, the last host call it saw fail is the likely one.
            let fallback = lastErrorText.map { String(cString: $0) } ?? String(cString: strerror(-result))
            throw PluginError("start failed: \(Self.text(error, or: fallback))")
        }
    }

    /// Lets the plugin finish its writes; it gets nothing after this.
    func stop() {
        guard let context else { return }
        flush()
        services.unsubscribeAll(of: self)
        descriptor.pointee.stop!(context)
        self.context = nil
        opportunityTimer = nil
        retryTimer = nil
        flushJob = nil
    }

    private static func text(_ buffer: [CChar], or fallback: String) -> String {
        let text = buffer.withUnsafeBufferPointer { String(cString: $0.baseAddress!) }
        return text.isEmpty ? fallback : text
    }

    // MARK: Calls into the plugin

    /// Records an interface the plugin exports and publishes it on the bus,
    /// on the daemon's object or (1.6) at `path`.
    func export(_ interface: bgt_interface, at path: String = BgTaskNames.objectPath) throws(PluginError) {
        guard let namePointer = interface.name else { throw PluginError("interface without a name") }
        let interfaceName = String(cString: namePointer)
        var methods: [BusMethod] = []
        var signals: [BusSignal] = []
        guard interface.n_members == 0 || interface.members != nil else {
            throw PluginError("\(interfaceName) has \(interface.n_members) members and no array of them")
        }
        for index in 0..<interface.n_members {
            let member = interface.members[index]
            guard let memberNamePointer = member.name else { throw PluginError("member without a name in \(interfaceName)") }
            let memberName = String(cString: memberNamePointer)
            let inputs = try Self.arguments(member.in_signature, member.in_names, of: memberName)
            switch member.kind {
            case UInt32(BGT_MEMBER_METHOD):
                let outputs = try Self.arguments(member.out_signature, member.out_names, of: memberName)
                let replySignature = outputs.map(\.signature).joined()
                methods.append(BusMethod(memberName, inputs: inputs, outputs: outputs) { [weak self] (call) throws(BusError) in
                    self?.dispatch(call, interface: interfaceName, member: memberName, replySignature: replySignature)
                })
            case UInt32(BGT_MEMBER_SIGNAL):
                signals.append(BusSignal(memberName, inputs))
            default:
                throw PluginError("member \(memberName) of \(interfaceName) is neither a method nor a signal")
            }
        }
        let busInterface = BusInterface(name: interfaceName, methods: methods, signals: signals)
        // A stock mode's interface is that mode's, whichever plugin starts first, at any path.
        if let mode = BgTaskMode.allCases.first(where: { "\(BgTaskNames.busName).\($0.configSection)" == interfaceName }),
           mode.rawValue != name {
            throw PluginError("cannot export \(interfaceName): the interface belongs to the \(mode.rawValue) mode")
        }
        // Signals go out from the daemon's object (see signal_new): declared
        // elsewhere they would be sent from where they were not declared.
        if path != BgTaskNames.objectPath, !signals.isEmpty {
            throw PluginError("cannot export \(interfaceName) at \(path): signals are sent from \(BgTaskNames.objectPath) only, so only interfaces exported there may declare them")
        }
        do {
            try services.export(busInterface, at: path, by: self)
        } catch {
            throw PluginError("cannot export \(interfaceName): \(error.message)")
        }
        // Only an interface that was exported may send its signals.
        for signal in signals {
            declaredSignals.append((strdup(interfaceName)!, strdup(signal.name)!, strdup(signal.arguments.map(\.signature).joined())!))
        }
        interfaces.append(busInterface)
    }

    /// Splits a signature into complete types and pairs them with the comma-separated names.
    static func arguments(_ signature: UnsafePointer<CChar>?, _ names: UnsafePointer<CChar>?, of member: String) throws(PluginError) -> [BusArgument] {
        let types = BusSignature.completeTypes(signature.map { String(cString: $0) } ?? "")
        guard let types else { throw PluginError("member \(member) has an invalid signature") }
        let nameList = (names.map { String(cString: $0) } ?? "").split(separator: ",").map {
            $0.trimmingCharacters(in: .whitespaces)
        }
        guard nameList.count == types.count else {
            throw PluginError("member \(member) names \(nameList.count) arguments for \(types.count) types")
        }
        // As sd-bus checks them when the interface is exported: `--bus-introspect`,
        // which exports nothing, listed names the daemon then refused.
        if let bad = nameList.first(where: { !isArgumentName($0) }) {
            throw PluginError(
                "member \(member) names an argument '\(LogText.escaped(bad))': argument names are 1 to 255 letters, digits and '_', not starting with a digit")
        }
        return zip(nameList, types).map { BusArgument($0, $1) }
    }

    /// Whether `name` is a valid D-Bus argument name (a member name's rules).
    static func isArgumentName(_ name: String) -> Bool {
        let bytes = Array(name.utf8)
        guard (1...255).contains(bytes.count) else { return false }
        func isLetter(_ byte: UInt8) -> Bool { (65...90).contains(byte) || (97...122).contains(byte) || byte == 95 }
        return isLetter(bytes[0]) && bytes.dropFirst().allSatisfy { isLetter($0) || (48...57).contains($0) }
    }

    /// A method of the plugin's interface was called: identify the caller, then hand it over.
    private func dispatch(_ message: Message, interface: String, member: String, replySignature: String) {
        engine.serve(message) { [weak self] identity in
            guard let self, let context = self.context else {
                throw BusError.failed("the \(self?.name ?? "mode") plugin is not running")
            }
            let appID = self.engine.appID(of: identity)
            let call = PluginCallInFlight(message: message, identity: identity, appID: appID, host: self)
            call.replySignature = replySignature
            self.batch {
                interface.withCString { i in
                    member.withCString { m in
                        self.descriptor.pointee.handle_call!(context, i, m, call.handle)
                    }
                }
                // What the call set off (a wake of a running app is ready at
                // once) goes out with its reply, in the same commit.
                self.deliverQueued()
            }
            // If the plugin neither answered nor kept the call, it is answered Failed when `call` goes.
            self.scheduleFlush()
        }
    }

    /// Runs a callback into the plugin from the loop (a signal it subscribed
    /// to, or work it posted from its own threads, ABI 1.7 `post`) as one
    /// batch, with the events it sets off, as a call is; nothing once the
    /// plugin has stopped.
    func fromLoop(_ body: () -> Void) {
        guard context != nil else { return }
        batch {
            body()
            deliverQueued()
        }
        scheduleFlush()
    }

    /// Whether Background App Refresh governs the plugin's wakes (ABI 1.9; false for older plugins).
    var wakesNeedRefresh: Bool {
        descriptor.pointee.struct_version >= 5 && descriptor.pointee.flags & BGT_PLUGIN_WAKES_NEED_REFRESH != 0
    }

    /// Whether the plugin is told how other plugins' wakes end (ABI 1.11).
    var wantsWakeEnds: Bool {
        abiMinor >= 11 && descriptor.pointee.struct_version >= 5 && descriptor.pointee.flags & BGT_PLUGIN_WANTS_WAKE_ENDS != 0
    }

    /// How many events the plugin holds for `app` without a wake (ABI 1.5; 0 for older plugins).
    func waitingEvents(for app: AppID) -> UInt32 {
        guard let context, descriptor.pointee.struct_version >= 4, let waiting = descriptor.pointee.waiting_events else { return 0 }
        return app.rawValue.withCString { waiting(context, $0) }
    }

    /// Asks the plugin to describe an app into an open `a{sv}` of `message`.
    func describe(_ app: AppID, into message: Message) {
        guard let context, let describe = descriptor.pointee.describe_app else { return }
        app.rawValue.withCString { describe(context, $0, PluginHostAPI.borrowed(message)) }
    }

    /// Queues an event; it is delivered from the loop, after whatever runs now.
    func post(_ event: QueuedPluginEvent) {
        guard context != nil else { return }
        queued.append(event)
        // Inside a call or an event the loop delivers it right after.
        if outbox == nil { scheduleFlush() }
    }

    /// How many events wait: a batch whose commit fails drops what it queued (``dropQueued(after:)``).
    var queuedCount: Int { queued.count }

    /// Drops the events queued after the first `count`: what a failed batch set off.
    func dropQueued(after count: Int) {
        if queued.count > count { queued.removeSubrange(count...) }
    }

    /// Runs ``flush()`` after the current callback, made at the first flush.
    private var flushJob: DeferredJob?

    private func scheduleFlush() {
        // While a failed batch's events wait for their retry, the retry timer paces the flushes.
        guard !flushScheduled, !queued.isEmpty, retryTimer?.armedAt == nil, let loop = services.loop else { return }
        flushScheduled = true
        // One source for every flush of this plugin: an event of a plugin is scheduled per wake.
        if flushJob == nil { flushJob = try? loop.makeDeferred { [weak self] in self?.flush() } }
        if let flushJob { flushJob.schedule() } else { loop.later { [weak self] in self?.flush() } }
    }

    /// Delivers queued events now, in one batch.
    func flush() {
        flushScheduled = false
        guard outbox == nil, !queued.isEmpty else { return }
        batch { deliverQueued() }
    }

    private func deliverQueued() {
        while !queued.isEmpty, let context {
            let event = queued.removeFirst()
            if waitingBefore > 0 {
                waitingBefore -= 1
                handedOver.append(event)
            }
            event.withCEvent { descriptor.pointee.event!(context, $0) }
        }
    }

    /// A signal of the plugin's went out at once, inside a batch: nothing was
    /// written before it (else it would wait for the commit), so what the
    /// batch did up to here needs no commit, and is known outside now. The
    /// batch starts again from here: a commit that fails later undoes only
    /// what came after (the plugin and the daemon take a new checkpoint).
    func sentAtOnce() {
        guard outbox != nil else { return }
        engine.commitPoint()
        if let context, let begin = batchBegin { begin(context) }
        handedOver.removeAll(keepingCapacity: true)
        waitingBefore = queued.count
    }

    /// Set while ``batch(_:)`` runs: what the plugin sends waits there for the commit.
    private(set) var outbox: PluginOutbox?

    /// Where a signal to `destination` the plugin sends now must wait (see
    /// ``PluginOutbox``); nil when it may go at once.
    func outbox(forSignalTo destination: String) -> PluginOutbox? {
        guard let outbox, services.hasUncommittedWrites || outbox.mustHold(signalTo: destination) else { return nil }
        return outbox
    }

    /// Runs `body` (one call, or one event) with every write the plugin
    /// makes in one transaction, and holds back what it sends until that
    /// transaction has committed: one commit per call however many records it
    /// writes, and still nothing is promised before it is on disk.
    ///
    /// A commit that fails leaves no trace: the plugin restores its memory
    /// (`batch_rollback`), the daemon undoes the wakes and completions the
    /// batch asked for and drops the events and launches it set off, and
    /// every reply held here answers `StorageFailed`.
    func batch(_ body: () -> Void) {
        guard outbox == nil else { return body() }
        let outbox = PluginOutbox()
        self.outbox = outbox
        engine.beginBatch()
        if let context, let begin = batchBegin { begin(context) }
        waitingBefore = queued.count
        let failure = services.transaction(body)
        self.outbox = nil
        waitingBefore = 0
        // Kept for the next batch: this runs for every call and event.
        defer { handedOver.removeAll(keepingCapacity: true) }
        if let failure {
            if let context, let rollBack = batchRollback { rollBack(context) }
            engine.endBatch(committed: false)
            outbox.fail(failure, plugin: name, logger: logger)
            // The plugin forgot what these events made it do, but what they
            // tell of happened: without them again it would wait for a wake
            // that is gone (a push "being delivered" until a restart). A
            // plugin that cannot roll back kept what they did: not again.
            if !handedOver.isEmpty, batchRollback != nil {
                queued.insert(contentsOf: handedOver, at: 0)
                scheduleRetry(after: failure, events: handedOver.count)
            }
        } else {
            // What waited for the commit goes first: an app woken by a signal
            // here waits for nothing the bookkeeping below does, and what the
            // plugin sends from its commit hook comes after it, in order.
            outbox.send(logger: logger)
            engine.endBatch(committed: true)
            if let context, let commit = batchCommit { commit(context) }
            if retryDelay != Self.firstRetryDelay, queued.isEmpty {
                retryTimer?.arm(at: nil)
                retryDelay = Self.firstRetryDelay
            }
        }
    }

    /// Arms the retry of events a failed batch was handed, backing off while it keeps failing.
    private func scheduleRetry(after failure: String, events count: Int) {
        guard let loop = services.loop else { return }
        let delay = retryDelay
        retryDelay = min(retryDelay * 2, Self.longestRetryDelay)
        let level: Logger.Level = delay == Self.firstRetryDelay ? .warning : .debug
        logger.log(level: level, "the \(name) plugin's state could not be saved (\(failure)): \(count) event(s) it was handed go to it again in \(delay) s")
        if retryTimer == nil {
            retryTimer = try? loop.makeTimer { [weak self] in self?.flush() }
        }
        retryTimer?.arm(at: bgt_monotonic_usec() + UInt64(delay * 1_000_000))
    }

    /// The descriptor's batch functions, when its version has them (2 and later).
    private var batchBegin: (@convention(c) (UnsafeMutableRawPointer?) -> Void)? {
        descriptor.pointee.struct_version >= 2 ? descriptor.pointee.batch_begin : nil
    }
    private var batchRollback: (@convention(c) (UnsafeMutableRawPointer?) -> Void)? {
        descriptor.pointee.struct_version >= 2 ? descriptor.pointee.batch_rollback : nil
    }
    private var batchCommit: (@convention(c) (UnsafeMutableRawPointer?) -> Void)? {
        descriptor.pointee.struct_version >= 2 ? descriptor.pointee.batch_commit : nil
    }

    // MARK: Helpers for the host table

    /// A C string that lives as long as the host (for values handed out by pointer).
    func intern(_ text: String) -> UnsafePointer<CChar> {
        if let pointer = interned[text] { return UnsafePointer(pointer) }
        let pointer = strdup(text)!
        interned[text] = pointer
        return UnsafePointer(pointer)
    }

    /// Why the plugin may not send `signal`: it must be one its own
    /// interfaces declare, with the declared arguments (sd-bus sends any
    /// signal, and an app trusts what comes from the daemon's name). On the
    /// path of every event's signal: compared as C strings, nothing made.
    func signalProblem(_ signal: Message) -> String? {
        signal.withHeader { interface, member, signature in
            func text(_ pointer: UnsafePointer<CChar>?) -> String { pointer.map { String(cString: $0) } ?? "" }
            guard let interface, let member else { return "a signal without an interface or member" }
            guard let declared = declaredSignals.first(where: { strcmp($0.interface, interface) == 0 && strcmp($0.member, member) == 0 }) else {
                return "\(text(interface)).\(text(member)) is not a signal of the \(name) plugin's interfaces"
            }
            guard signature.map({ strcmp(declared.signature, $0) == 0 }) ?? (declared.signature.pointee == 0) else {
                return "\(text(interface)).\(text(member)) has the arguments '\(text(declared.signature))', not '\(text(signature))'"
            }
            return nil
        }
    }

    /// Remembers why a host call failed and returns its errno for the plugin.
    func fail(_ code: Int32, _ message: String) -> Int32 {
        free(lastErrorText)
        lastErrorText = strdup(message)
        logger.debug("host call of plugin \(name) failed: \(message)")
        return -code
    }

    var lastError: UnsafePointer<CChar>? { UnsafePointer(lastErrorText) }
}

/// A plugin could not be started or misbehaved.
struct PluginError: Error, CustomStringConvertible {
    var description: String
    init(_ description: String) { self.description = description }
}
