/// A location event the daemon woke the app for (the location mode): a
/// crossing of one of the app's regions, or a significant change of the
/// device's position, as iOS's `CLLocationManagerDelegate` reports them.
///
/// ```swift
/// manager.setLocationHandler { event in
///     switch event {
///     case .region(let id, .enter): await reminders.arrived(at: id)
///     case .region(let id, .exit): await reminders.left(id)
///     case .significantChange(let latitude, let longitude, _): await weather.refresh(latitude, longitude)
///     }
/// }
/// ```
public enum LocationEvent: Sendable, Hashable, CustomStringConvertible {
    /// The device entered or left the region the app registered as `id`
    /// (RegionEvent).
    ///
    /// ```swift
    /// if case .region("home", .enter) = event { turnOnHeating() }
    /// ```
    case region(id: String, crossing: RegionCrossing)

    /// The device moved far enough since the last report
    /// (SignificantLocationChange; `Location.SignificantChangeM`, 500 m by
    /// default, and at most once per `Location.SignificantChangeMinIntervalSec`).
    /// Degrees and the radius of uncertainty in metres.
    ///
    /// ```swift
    /// if case .significantChange(let latitude, let longitude, let accuracy) = event, accuracy < 1000 {
    ///     await weather.refresh(latitude, longitude)
    /// }
    /// ```
    case significantChange(latitude: Double, longitude: Double, accuracy: Double)

    /// `enter home`, `exit office`, `significant change to 52.52, 13.405 (±10.0 m)`, for logs.
    ///
    /// ```swift
    /// print(event)   // enter home
    /// ```
    public var description: String {
        switch self {
        case .region(let id, let crossing):
            "\(crossing) \(id)"
        case .significantChange(let latitude, let longitude, let accuracy):
            "significant change to \(latitude), \(longitude) (±\(accuracy) m)"
        }
    }
}
