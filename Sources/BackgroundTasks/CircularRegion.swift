/// A circle on the Earth that the daemon watches for the app, as iOS's
/// `CLCircularRegion`: the app learns when the device enters or leaves it
/// (``RegionCrossing``), even while it is not running.
///
/// The daemon checks the values when the app starts monitoring the region
/// (``BackgroundTaskManager/startMonitoring(region:notifyOnStart:)``): the id
/// must be 1 to 256 bytes, the centre in range, and the radius in
/// (0, 100 000] metres; radii below `Location.MinRadiusM` (100 m by default)
/// are raised to it.
///
/// ```swift
/// let office = CircularRegion(id: "office", latitude: 52.5200, longitude: 13.4050, radius: 150)
/// try await manager.startMonitoring(region: office)
/// ```
public struct CircularRegion: Sendable, Hashable, CustomStringConvertible {
    /// The app's name for the region; registering another region under
    /// the same id replaces it. It comes back in every ``LocationEvent``
    /// about the region.
    ///
    /// ```swift
    /// if case .region(let id, _) = event, id == office.id { openOfficeChecklist() }
    /// ```
    public var id: String

    /// The centre's latitude, degrees in -90…90 (WGS 84, as GeoClue reports).
    ///
    /// ```swift
    /// print(region.latitude)   // 52.52
    /// ```
    public var latitude: Double

    /// The centre's longitude, degrees in -180…180.
    ///
    /// ```swift
    /// print(region.longitude)   // 13.405
    /// ```
    public var longitude: Double

    /// The radius in metres. In what ``BackgroundTaskManager/monitoredRegions()``
    /// answers it is the radius the daemon uses: raised to `Location.MinRadiusM`
    /// when smaller.
    ///
    /// ```swift
    /// print("\(Int(region.radius)) m")   // 150 m
    /// ```
    public var radius: Double

    /// A region centred on `latitude`, `longitude` with `radius` metres.
    ///
    /// ```swift
    /// let home = CircularRegion(id: "home", latitude: 48.8566, longitude: 2.3522, radius: 200)
    /// ```
    ///
    /// - Parameters:
    ///   - id: The app's name for the region, 1 to 256 bytes.
    ///   - latitude: Degrees in -90…90.
    ///   - longitude: Degrees in -180…180.
    ///   - radius: Metres in (0, 100 000].
    public init(id: String, latitude: Double, longitude: Double, radius: Double) {
        self.id = id
        self.latitude = latitude
        self.longitude = longitude
        self.radius = radius
    }

    /// `id (latitude, longitude) radius m`, for logs.
    ///
    /// ```swift
    /// print(home)   // home (48.8566, 2.3522) 200.0 m
    /// ```
    public var description: String { "\(id) (\(latitude), \(longitude)) \(radius) m" }
}
