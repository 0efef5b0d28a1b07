/// `org.bgtaskd.BackgroundTasks1.Manager`, the engine's interface: the names
/// of its members, as the checked-in XML spells them.
public enum ManagerInterface {
    public static let name = BgTaskNames.manager

    public enum Method: String, Sendable, CaseIterable {
        case beginBackgroundTask = "BeginBackgroundTask"
        case endBackgroundTask = "EndBackgroundTask"
        case getBackgroundTimeRemaining = "GetBackgroundTimeRemaining"
        case setApplicationState = "SetApplicationState"
        case checkIn = "CheckIn"
        case getBackgroundRefreshStatus = "GetBackgroundRefreshStatus"
        case setBackgroundRefreshEnabled = "SetBackgroundRefreshEnabled"
        case getApplications = "GetApplications"
        case simulateSleep = "SimulateSleep"
        case simulateWake = "SimulateWake"
    }

    public enum Signal: String, Sendable, CaseIterable {
        case taskExpiring = "TaskExpiring"
        case taskExpired = "TaskExpired"
    }

    public enum Property: String, Sendable, CaseIterable {
        case version = "Version"
        case tasks = "Tasks"
        case plugins = "Plugins"
        case sleeping = "Sleeping"
        case draining = "Draining"
        case backlog = "Backlog"
    }

    /// The keys of CheckIn's `launch` dictionary.
    public enum LaunchKey: String, Sendable, CaseIterable {
        /// Why the app runs (``LaunchReason``).
        case reason
        /// How many events wait for the app.
        case pending
    }

    /// The engine's keys of each GetApplications dictionary (mode plugins add their own).
    public enum ApplicationKey: String, Sendable, CaseIterable {
        case appID = "app_id"
        case name
        case modes
        case refreshStatus = "refresh_status"
        case refreshReason = "refresh_reason"
        case running
        case state
        case launching
        case suspended
        case execProblem = "exec_problem"
        case launchError = "launch_error"
    }
}
