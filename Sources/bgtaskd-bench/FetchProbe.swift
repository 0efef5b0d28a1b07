import BgTaskProtocol
import Glibc
import SDBus

/// A fetch wake of a running app, end to end: a trusted tool's connection
/// calls `SimulateFetch(app)`, the app's connection (checked in as `app`)
/// takes `PerformFetch` with a match rule, as the SDK does, and answers
/// `CompleteFetch(token, result)`.
///
/// Both connections are polled together, the app's first, so that neither
/// waits for the other; times are CLOCK_MONOTONIC in this one process.
final class FetchProbe {
    let app: ManagerClient
    let tool: ManagerClient
    let appID: String
    private var match: Slot?
    private var token: String?
    private var arrivedAt: Int64 = 0
    /// PerformFetch signals seen in all.
    private(set) var signals = 0

    /// One timed wake, in µs from sending SimulateFetch: until PerformFetch
    /// was dispatched on the app's connection, and until SimulateFetch's
    /// reply; and the CompleteFetch round trip.
    /// `app` must be checked in as `appID` already.
    init(app: ManagerClient, tool: ManagerClient, appID: String) throws(BusError) {
        self.app = app
        self.tool = tool
        self.appID = appID
        match = try app.onPerformFetch { [unowned self] message in
            arrivedAt = MonotonicTime.nanoseconds()
            token = try? message.readString()
            signals += 1
        }
    }

    deinit { match?.cancel() }

    /// One SimulateFetch → PerformFetch, then CompleteFetch(token, result).
    func wake(result: String = "noData", timeout: Double = 10) throws -> WakeSample {
        token = nil
        var replied: Int64?
        var failure: BusError?
        let sent = MonotonicTime.nanoseconds()
        try tool.simulateFetchAsync(appID) { reply in
            replied = MonotonicTime.nanoseconds()
            if case .failure(let error) = reply { failure = error }
        }
        while token == nil || replied == nil {
            try app.process()
            if token == nil || replied == nil { try tool.process() }
            if let failure { throw FetchProbeError(message: "SimulateFetch(\(appID)) failed: \(failure)") }
            if token != nil && replied != nil { break }
            var descriptors = [app.pollDescriptor, tool.pollDescriptor]
            if poll(&descriptors, 2, Int32(timeout * 1000)) == 0 {
                throw FetchProbeError(message: "no \(token == nil ? FetchInterface.Signal.performFetch.rawValue : "SimulateFetch reply") for \(appID) within \(timeout) s")
            }
        }
        let completeStart = MonotonicTime.nanoseconds()
        try app.completeFetch(token!, result)
        let completeEnd = MonotonicTime.nanoseconds()
        return WakeSample(
            signal: Double(arrivedAt - sent) / 1000, reply: Double(replied! - sent) / 1000,
            complete: Double(completeEnd - completeStart) / 1000)
    }
}

struct FetchProbeError: Error, CustomStringConvertible {
    var message: String
    var description: String { message }
}
