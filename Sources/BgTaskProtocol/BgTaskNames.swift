/// The fixed names of bgtaskd's D-Bus API (docs/DESIGN.md §1), shared by the daemon,
/// the SDK and the command-line tool.
public enum BgTaskNames {
    /// The well-known bus name the daemon owns.
    public static let busName = "org.bgtaskd.BackgroundTasks1"
    /// The one object everything lives on.
    public static let objectPath = "/org/bgtaskd/BackgroundTasks1"
    /// The core interface.
    public static let manager = "org.bgtaskd.BackgroundTasks1.Manager"
    /// Mode interfaces.
    public static let fetch = "org.bgtaskd.BackgroundTasks1.Fetch"
    public static let remoteNotifications = "org.bgtaskd.BackgroundTasks1.RemoteNotifications"
    public static let location = "org.bgtaskd.BackgroundTasks1.Location"
    public static let transfers = "org.bgtaskd.BackgroundTasks1.Transfers"
    /// Prefix of the daemon's own error names.
    public static let errorPrefix = "org.bgtaskd.BackgroundTasks1.Error."
    /// The API version (the Manager's `Version` property).
    public static let apiVersion: UInt32 = 1
    /// The release of bgtaskd, bgtaskctl and bgtaskd-sim (`--version`).
    public static let releaseVersion = "1.0.0"
    /// The longest duration a configuration key accepts, in seconds: about 31
    /// years, far beyond any sensible budget, and small enough for every clock
    /// computation with it to stay exact. The daemon's keys and the plugins' alike.
    public static let maximumConfigSeconds = 1e9
    /// What `GetBackgroundTimeRemaining` answers while an app is active (DBL_MAX, as iOS).
    public static let unlimitedTime = Double.greatestFiniteMagnitude
}
