public import BgTaskProtocol

/// A circular region an app monitors (`StartMonitoringRegion`).
public struct MonitoredRegion: Sendable, Equatable {
    /// The app's name for it; registering the same id again replaces it.
    public let id: String
    public let center: GeoCoordinate
    /// Metres, after raising to the minimum.
    public let radius: Double
    /// Whether the app wants an event for the side it is on when monitoring starts.
    public let notifyOnStart: Bool

    /// The largest radius accepted (metres): iOS monitors regions of a few
    /// hundred metres to a few kilometres; beyond 100 km it is no region.
    public static let maximumRadius = 100_000.0
    /// The longest id accepted, in bytes.
    public static let maximumIDBytes = 256

    /// A region from a client's arguments: throws `InvalidArgs` for an empty
    /// or overlong id, an invalid centre, or a radius that is not a finite
    /// number in (0, 100 km]; raises smaller radii to `minimumRadius`.
    public init(
        validatingID id: String, latitude: Double, longitude: Double, radius: Double, minimumRadius: Double,
        notifyOnStart: Bool = false
    ) throws(BgTaskError) {
        guard !id.isEmpty, id.utf8.count <= Self.maximumIDBytes else {
            throw .invalidArgs("a region id must be 1 to \(Self.maximumIDBytes) bytes long")
        }
        guard radius.isFinite, radius > 0, radius <= Self.maximumRadius else {
            throw .invalidArgs("radius \(radius) m is not in (0, \(Int(Self.maximumRadius))] m")
        }
        self.id = id
        center = try GeoCoordinate(validatingLatitude: latitude, longitude: longitude)
        self.radius = max(radius, minimumRadius)
        self.notifyOnStart = notifyOnStart
    }

    /// How far the device may move between fixes while a region of
    /// `radius` metres is watched (GeoClue's distance threshold): a twelfth
    /// of the radius, at least 20 m and at most 150 m, so that a large region
    /// asks for few fixes. How closely to follow the device, not how far
    /// beyond the boundary a crossing needs (``RegionBoundary/margin``, a
    /// fixed 20 m: GPS error does not grow with the radius).
    public static func followDistance(radius: Double) -> Double { min(max(radius / 12, 20), 150) }
}
