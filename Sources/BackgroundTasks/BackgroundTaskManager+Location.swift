import BgTaskProtocol
import SDBus

// Location: regions, significant changes, and the location handler.
//
// RegionEvent and SignificantLocationChange are subscribed to in connect(),
// before CheckIn, and go to the manager's LocationDispatcher, which queues
// them until a handler is set: an app launched for a location event gets it
// right after CheckIn, usually before it has installed its handler. The
// dispatcher hands them over on the SDK's thread, one at a time, in the
// order the daemon sent them. Each event comes with a token of its own and
// gets a completion that sends CompleteEvent once (CompletionLatch); later
// calls of it do nothing. An event whose crossing this SDK cannot read is
// completed at once, without the handler: the app could not act on it, and
// an event never completed would cost the app its wake. Events still queued
// when the daemon leaves the bus are dropped: their tokens were the old
// daemon's, and the new one delivers them again (it keeps every event until
// it is completed).

extension BackgroundTaskManager {
    // MARK: Regions

    /// Starts monitoring a region, as iOS's
    /// `CLLocationManager.startMonitoring(for:)`: from now on the daemon
    /// wakes the app (launching it in the background if it is not running,
    /// ``LaunchReason/location``) whenever the device enters or leaves it,
    /// and hands the crossing to the location handler (`setLocationHandler`).
    ///
    /// A crossing counts once the device is a margin beyond the boundary (20
    /// m, or the fix's accuracy if larger) and
    /// has stayed there `Location.DwellSec` (20 s by default). Monitoring the
    /// same id again replaces the region. Regions are stored by the daemon
    /// and survive restarts of the app and of the daemon; an app may monitor
    /// `Location.MaxRegionsPerApp` (20) at once.
    ///
    /// The app must have checked in, and its desktop entry must declare the
    /// mode (`X-BgTaskd-Modes=location;`).
    ///
    /// ```swift
    /// let manager = try await BackgroundTaskManager.connect(appID: "org.example.Places")
    /// manager.setLocationHandler { event in print(event) }
    /// try await manager.startMonitoring(
    ///     region: CircularRegion(id: "office", latitude: 52.52, longitude: 13.405, radius: 150),
    ///     notifyOnStart: true)
    /// ```
    ///
    /// - Parameters:
    ///   - region: The circle to watch; its id names it in every event.
    ///   - notifyOnStart: Also deliver the side the device is on once the
    ///     first position after this call has held: `.enter` when inside,
    ///     `.exit` when outside (iOS's `notifyOnEntry` at start). Without it
    ///     only real crossings are delivered.
    /// - Throws: ``BackgroundTasksError``: `.invalidArgument` for an empty or
    ///   overlong id, a centre out of range, a radius not in (0, 100 km], or
    ///   NaN; `.limitExceeded` when the app monitors its maximum already;
    ///   `.unknownApplication` when the app did not check in or has no desktop
    ///   entry; `.modeNotDeclared`; `.daemonUnavailable` (also when the daemon
    ///   runs without its location plugin).
    public func startMonitoring(region: CircularRegion, notifyOnStart: Bool = false) async throws {
        let method = notifyOnStart ? LocationInterface.Method.startMonitoringRegionWithOptions : .startMonitoringRegion
        try await connection.call(
            method.rawValue, on: .location,
            arguments: { (call) throws(BusError) in
                try call.append(region.id)
                try call.append(region.latitude)
                try call.append(region.longitude)
                try call.append(region.radius)
                if notifyOnStart {
                    try call.append(value: .dictionary(key: "s", value: "v", [
                        .init(key: .string(LocationInterface.OptionKey.notifyOnStart.rawValue), value: .variant(.bool(true))),
                    ]))
                }
            },
            decode: { (_) throws(BusError) in })
    }

    /// Stops monitoring the region the app registered as `regionID`, as iOS's
    /// `stopMonitoring(for:)`. Events of it already on their way still
    /// arrive, and must be completed. Stopping a region that is not
    /// monitored does nothing.
    ///
    /// ```swift
    /// try await manager.stopMonitoring(regionID: "office")
    /// ```
    ///
    /// - Throws: ``BackgroundTasksError``: as ``startMonitoring(region:notifyOnStart:)``.
    public func stopMonitoring(regionID: String) async throws {
        try await connection.call(
            LocationInterface.Method.stopMonitoringRegion.rawValue, on: .location,
            arguments: { (call) throws(BusError) in try call.append(regionID) },
            decode: { (_) throws(BusError) in })
    }

    /// The regions the daemon monitors for the app, by id, as iOS's
    /// `monitoredRegions`: with the radius the daemon uses (raised to
    /// `Location.MinRadiusM` when it was smaller).
    ///
    /// ```swift
    /// for region in try await manager.monitoredRegions() {
    ///     print(region.id, region.latitude, region.longitude, region.radius)
    /// }
    /// ```
    ///
    /// - Throws: ``BackgroundTasksError``: `.unknownApplication` when the app
    ///   did not check in or has no desktop entry; `.modeNotDeclared`;
    ///   `.daemonUnavailable`.
    public func monitoredRegions() async throws -> [CircularRegion] {
        try await connection.call(
            LocationInterface.Method.listMonitoredRegions.rawValue, on: .location,
            decode: { (reply) throws(BusError) in
                var regions: [CircularRegion] = []
                try reply.enterContainer("a", "(sddd)")
                while try reply.enterContainer("r", "sddd") {
                    let id = try reply.readString()
                    let latitude = try reply.readDouble()
                    let longitude = try reply.readDouble()
                    let radius = try reply.readDouble()
                    try reply.exitContainer()
                    regions.append(CircularRegion(id: id, latitude: latitude, longitude: longitude, radius: radius))
                }
                try reply.exitContainer()
                return regions
            })
    }

    // MARK: Significant changes

    /// Asks to be woken for significant changes of the device's position,
    /// as iOS's `startMonitoringSignificantLocationChanges()`: the location
    /// handler gets ``LocationEvent/significantChange(latitude:longitude:accuracy:)``
    /// for the position the daemon knows now (else the first one after this
    /// call), then whenever the device has moved `Location.SignificantChangeM`
    /// (500 m) from the last position reported, at most once per
    /// `Location.SignificantChangeMinIntervalSec` (300 s): a move that comes
    /// sooner is reported when that time is over. Positions less accurate
    /// than `SignificantChangeM` count for nothing. The daemon keeps the
    /// request across restarts; calling it again does nothing.
    ///
    /// ```swift
    /// try await manager.startSignificantLocationChanges()
    /// ```
    ///
    /// - Throws: ``BackgroundTasksError``: `.unknownApplication` when the app
    ///   did not check in or has no desktop entry; `.modeNotDeclared`;
    ///   `.daemonUnavailable`.
    public func startSignificantLocationChanges() async throws {
        try await connection.call(
            LocationInterface.Method.startSignificantLocationChanges.rawValue, on: .location, decode: { (_) throws(BusError) in })
    }

    /// Ends ``startSignificantLocationChanges()``; does nothing if it was not
    /// started. Events already on their way still arrive.
    ///
    /// ```swift
    /// try await manager.stopSignificantLocationChanges()
    /// ```
    ///
    /// - Throws: ``BackgroundTasksError``: as ``startSignificantLocationChanges()``.
    public func stopSignificantLocationChanges() async throws {
        try await connection.call(
            LocationInterface.Method.stopSignificantLocationChanges.rawValue, on: .location, decode: { (_) throws(BusError) in })
    }

    // MARK: The location handler

    /// Installs the location handler, as iOS's `CLLocationManagerDelegate`
    /// (`didEnterRegion`, `didExitRegion`, `didUpdateLocations` for
    /// significant changes): called for every location event the daemon
    /// delivers to the app (`RegionEvent`, `SignificantLocationChange`),
    /// with a completion to call once the app has handled it.
    ///
    /// The app's desktop entry must declare the mode
    /// (`X-BgTaskd-Modes=location;`). An event for an app that is not running
    /// launches it in the background (``LaunchReason/location``); the event
    /// then arrives right after the check-in.
    ///
    /// Call the completion within the wake's budget
    /// (`Location.WakeBudgetSec`, 10 s by default): an app that does not is
    /// terminated, the offence is counted, and the event is delivered again
    /// on a later wake. Calling it sends `CompleteEvent`, after which the
    /// daemon forgets the event; calling it again does nothing. It may be
    /// called from any thread.
    ///
    /// Events that arrive before a handler is set are kept and handed to it
    /// as soon as it is. A later call replaces the handler.
    ///
    /// The handler runs on the SDK's thread and must return quickly: start
    /// the work (a `Task`, a queue) and call the completion from there.
    ///
    /// ```swift
    /// manager.setLocationHandler { event, completion in
    ///     guard case .region(let id, .enter) = event else { return completion() }
    ///     Task {
    ///         await reminders.show(for: id)
    ///         completion()
    ///     }
    /// }
    /// ```
    ///
    /// - Parameter handler: Called once per event, with the event and its completion.
    public func setLocationHandler(
        _ handler: @escaping @Sendable (_ event: LocationEvent, _ completion: @escaping @Sendable () -> Void) -> Void
    ) {
        locationDispatcher.setDeliver { [weak self] signal in
            self?.receiveLocationEvent(signal, handler: handler)
        }
        // Hand over what waited, on the SDK's thread like every other delivery.
        connection.submit { [locationDispatcher] in locationDispatcher.drain() }
    }

    /// Installs an `async` location handler: for every event it runs
    /// `handler` in a new `Task` and completes the event when it returns.
    /// Otherwise as the completion-handler form.
    ///
    /// ```swift
    /// manager.setLocationHandler { event in
    ///     if case .region(let id, let crossing) = event { await journal.record(id, crossing) }
    /// }
    /// ```
    ///
    /// - Parameter handler: Handles one event.
    public func setLocationHandler(_ handler: @escaping @Sendable (_ event: LocationEvent) async -> Void) {
        setLocationHandler { event, completion in
            Task {
                await handler(event)
                completion()
            }
        }
    }

    // MARK: Observers

    /// Called with the wake's token and the event whenever a location event
    /// is handed to the location handler, just before the handler runs. For
    /// logs and tests: the token is what `CompleteEvent` and the daemon's
    /// log name. Runs on the SDK's thread: keep it short.
    ///
    /// ```swift
    /// manager.onLocationEventReceived = { token, event in log("location \(token): \(event)") }
    /// ```
    public var onLocationEventReceived: (@Sendable (_ token: String, _ event: LocationEvent) -> Void)? {
        get { callbacks.withLock { $0.onLocationEventReceived } }
        set { callbacks.withLock { $0.onLocationEventReceived = newValue } }
    }

    /// Called once the daemon answered the `CompleteEvent` that a location
    /// completion sent: with the token, the event, and nil when the daemon
    /// took it, or the error it answered (`.noSuchToken` when the wake had
    /// expired already, or the daemon restarted meanwhile). Runs on the
    /// SDK's thread: keep it short.
    ///
    /// An app launched in the background can use it to know when it may
    /// exit: the daemon has its answer, and will not deliver that event again.
    ///
    /// ```swift
    /// manager.onLocationEventCompleted = { token, event, error in
    ///     if let error { log("\(event) not recorded: \(error)") } else { log("\(event) handled") }
    /// }
    /// ```
    public var onLocationEventCompleted: (@Sendable (_ token: String, _ event: LocationEvent, _ error: BackgroundTasksError?) -> Void)? {
        get { callbacks.withLock { $0.onLocationEventCompleted } }
        set { callbacks.withLock { $0.onLocationEventCompleted = newValue } }
    }

    // MARK: Signals

    /// Sends the daemon's `RegionEvent` and `SignificantLocationChange`
    /// signals on `connection` to `dispatcher`, and drops its queue when the
    /// daemon leaves. Called by `connect` before `CheckIn`, so no event sent
    /// right after it is missed.
    static func subscribeToLocationSignals(on connection: BusConnection, dispatcher: LocationDispatcher) {
        connection.subscribe(interface: BgTaskNames.location, member: LocationInterface.Signal.regionEvent.rawValue) {
            (signal) throws(BusError) in
            let token = try signal.readString()
            let region = try signal.readString()
            let crossing = RegionCrossing(wire: try signal.readString())
            dispatcher.received(LocationSignal(token: token, event: crossing.map { .region(id: region, crossing: $0) }))
        }
        connection.subscribe(interface: BgTaskNames.location, member: LocationInterface.Signal.significantLocationChange.rawValue) {
            (signal) throws(BusError) in
            let token = try signal.readString()
            let latitude = try signal.readDouble()
            let longitude = try signal.readDouble()
            let accuracy = try signal.readDouble()
            dispatcher.received(LocationSignal(
                token: token, event: .significantChange(latitude: latitude, longitude: longitude, accuracy: accuracy)))
        }
        connection.observeServiceOwner { _ in dispatcher.discardQueued() }
    }

    /// Hands one event to the app's handler, with its completion (SDK thread).
    private func receiveLocationEvent(
        _ signal: LocationSignal,
        handler: @Sendable (_ event: LocationEvent, _ completion: @escaping @Sendable () -> Void) -> Void
    ) {
        let token = signal.token
        guard let event = signal.event else {
            // A crossing of a newer daemon's: nothing the app could act on.
            return completeLocationEvent(token: token, event: nil)
        }
        let latch = CompletionLatch()
        let completion: @Sendable () -> Void = { [weak self] in
            guard latch.claim() else { return }
            self?.completeLocationEvent(token: token, event: event)
        }
        callbacks.withLock { $0.onLocationEventReceived }?(token, event)
        handler(event, completion)
    }

    /// Sends `CompleteEvent` and tells ``onLocationEventCompleted`` how it
    /// went (not for an event the app never saw).
    private func completeLocationEvent(token: String, event: LocationEvent?) {
        connection.callInBackground(
            LocationInterface.Method.completeEvent.rawValue, on: .location,
            arguments: { (call) throws(BusError) in try call.append(token) },
            completion: { [weak self] outcome in
                guard let event, let observer = self?.callbacks.withLock({ $0.onLocationEventCompleted }) else { return }
                switch outcome {
                case .success: observer(token, event, nil)
                case .failure(let error): observer(token, event, error)
                }
            })
    }
}
