/// `org.bgtaskd.BackgroundTasks1.Fetch`, the fetch mode's interface: the
/// names of its members, and the keys it adds to GetApplications.
public enum FetchInterface {
    public static let name = BgTaskNames.fetch

    public enum Method: String, Sendable, CaseIterable {
        case setMinimumFetchInterval = "SetMinimumFetchInterval"
        case getFetchRegistration = "GetFetchRegistration"
        case completeFetch = "CompleteFetch"
        case simulateFetch = "SimulateFetch"
    }

    public enum Signal: String, Sendable, CaseIterable {
        case performFetch = "PerformFetch"
    }

    /// What GetFetchRegistration answers as the app's policy.
    public enum Policy: String, Sendable, CaseIterable {
        case never
        case minimum
        case custom
    }

    /// The keys the fetch mode adds to each GetApplications dictionary.
    public enum ApplicationKey: String, Sendable, CaseIterable {
        case policy = "fetch_policy"
        case interval = "fetch_interval"
        case nextUsec = "fetch_next_usec"
        case held = "fetch_held"
        case lastResult = "fetch_last_result"
        case lastUsec = "fetch_last_usec"
        case offences = "fetch_offences"
        /// Why the planner picked the next wake, for people.
        case plan = "fetch_plan"
    }

    /// `fetch_last_result` when the last wake was not answered.
    public static let missedResult = "missed"
}
