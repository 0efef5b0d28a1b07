/// Something the daemon tells a plugin. Newer versions of the ABI add
/// cases (``systemBusBack`` came with 1.10, ``appWakeEnded`` with 1.11): switch over it with a
/// `default`, or a rebuild against a newer PluginKit stops compiling.
public enum PluginEvent: Equatable, Sendable {
    /// A connection checked in as `app`; `reason` is why it runs (`user`, `fetch` …).
    case appCheckedIn(app: String, connection: String, reason: String)
    /// `app` moved to `state` (`active`, `inactive`, `background`).
    case appStateChanged(app: String, state: String)
    /// The last connection and process of `app` are gone.
    case appGone(app: String)
    /// The moment asked for with ``PluginHost/scheduleOpportunity(at:)`` came, or the machine woke.
    case wakeOpportunity(realtimeMicroseconds: UInt64)
    /// A wake asked for with ``PluginHost/wake(_:reason:budget:)`` can be delivered: send the event to `connection`.
    case tokenReady(app: String, token: String, connection: String)
    /// The app completed the token in time.
    case tokenCompleted(app: String, token: String)
    /// The token's budget ran out; the app is being terminated. An offence.
    case tokenExpired(app: String, token: String)
    /// Launching the app for the token failed; the token is gone.
    case launchFailed(app: String, token: String?, reason: String)
    /// Desktop entries were added, removed or changed.
    case appsChanged
    /// Background App Refresh settings or the power state changed.
    case refreshChanged
    /// Another mode's wake reached `app` at `connection` (`reason`: that mode):
    /// events waiting for the app may ride along.
    case appWoken(app: String, connection: String, reason: String)
    /// The machine goes to sleep (`true`) or woke (`false`) at that moment.
    case sleepChanged(sleeping: Bool, realtimeMicroseconds: UInt64)
    /// The system bus is back after it was lost (every subscription there
    /// was called with nil then): subscribe again and read again what the
    /// services there say.
    case systemBusBack
    /// Another mode's wake of `app`, told before as ``appWoken(app:connection:reason:)``,
    /// ended (`reason`: that mode): `completed` in time, or not (expired, or
    /// its launch failed or the app went first). What it brought the app
    /// counts only once it completed. Only for plugins whose
    /// ``ModePlugin/wantsWakeEnds`` is true.
    case appWakeEnded(app: String, reason: String, completed: Bool)
}
