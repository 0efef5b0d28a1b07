/// `org.bgtaskd.BackgroundTasks1.Location`, the location mode's interface:
/// the names of its members, its events and its dictionaries' keys.
public enum LocationInterface {
    public static let name = BgTaskNames.location

    public enum Method: String, Sendable, CaseIterable {
        case startMonitoringRegion = "StartMonitoringRegion"
        case startMonitoringRegionWithOptions = "StartMonitoringRegionWithOptions"
        case stopMonitoringRegion = "StopMonitoringRegion"
        case listMonitoredRegions = "ListMonitoredRegions"
        case listRegions = "ListRegions"
        case startSignificantLocationChanges = "StartSignificantLocationChanges"
        case stopSignificantLocationChanges = "StopSignificantLocationChanges"
        case completeEvent = "CompleteEvent"
        case simulateLocation = "SimulateLocation"
    }

    public enum Signal: String, Sendable, CaseIterable {
        case regionEvent = "RegionEvent"
        case significantLocationChange = "SignificantLocationChange"
    }

    /// RegionEvent's `event`.
    public enum Crossing: String, Sendable, CaseIterable {
        case enter
        case exit
    }

    /// Where the device stands against a region (ListRegions' `state`).
    public enum RegionState: String, Sendable, CaseIterable {
        case inside
        case outside
        /// Not known yet: no fix has held on either side.
        case unknown
    }

    /// The keys of StartMonitoringRegionWithOptions' `options`.
    public enum OptionKey: String, Sendable, CaseIterable {
        case notifyOnStart = "notify_on_start"
    }

    /// The keys of each ListRegions dictionary.
    public enum RegionKey: String, Sendable, CaseIterable {
        case appID = "app_id"
        case regionID = "region_id"
        case latitude
        case longitude
        case radius = "radius_m"
        case state
        case notifyOnStart = "notify_on_start"
    }

    /// The keys the location mode adds to each GetApplications dictionary.
    public enum ApplicationKey: String, Sendable, CaseIterable {
        case regions = "location_regions"
        case significantChanges = "location_significant_changes"
        case waiting = "location_events_waiting"
        case delivered = "location_events_delivered"
        case offences = "location_offences"
    }
}
