/// One position report (from GeoClue, or `SimulateLocation`).
public struct LocationFix: Sendable, Equatable {
    public var coordinate: GeoCoordinate
    /// The radius of uncertainty in metres.
    public var accuracy: Double
    /// When it was taken, realtime µs.
    public var time: UInt64

    public init(coordinate: GeoCoordinate, accuracy: Double, time: UInt64) {
        self.coordinate = coordinate
        // An unknown or negative accuracy is taken as "no idea".
        self.accuracy = accuracy.isFinite && accuracy >= 0 ? accuracy : .infinity
        self.time = time
    }
}
