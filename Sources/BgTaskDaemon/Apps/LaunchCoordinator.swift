import BgTaskCore
import Logging

/// Starts apps for background events, as the engine asks (`CoreAction.launch`):
/// finds the app's command in its desktop entry, has the launcher start it,
/// and tells the engine, through the callbacks, that it started, that it
/// could not, and when its process exited.
final class LaunchCoordinator {
    private let registry: AppRegistry
    private let launcher: AppLauncher
    private let logger: Logger
    /// The app's process started.
    var onStarted: (AppID, LaunchedProcess) -> Void = { _, _ in }
    /// The app could not be started, why, and whether that counts against
    /// the app (false when the daemon itself ran short of something).
    var onFailed: (AppID, String, Bool) -> Void = { _, _, _ in }
    /// A launched process exited (after it was reaped).
    var onExited: (LaunchedProcess, ExitStatus) -> Void = { _, _ in }

    init(registry: AppRegistry, launcher: AppLauncher, logger: Logger) {
        self.registry = registry
        self.launcher = launcher
        self.logger = logger
        launcher.onExit = { [unowned self] process, status in
            self.logger.info("\(process.appID) exited: \(status)", metadata: ["pid": "\(process.pid)"])
            self.onExited(process, status)
        }
    }

    /// Starts `app` in the background for `reason`; the outcome comes through the callbacks.
    func launch(_ app: AppID, reason: String) {
        guard let entry = registry.entry(for: app) else {
            return onFailed(app, "it has no desktop entry", true)
        }
        guard let commandLine = entry.commandLine else {
            let problem = entry.execProblem ?? "no Exec= or X-BgTaskd-Exec= line"
            logger.error("cannot launch \(app): its desktop entry \(entry.path) has no usable command: \(problem)")
            return onFailed(app, "its desktop entry has no usable command: \(problem)", true)
        }
        launcher.launch(appID: app, commandLine: commandLine, directory: entry.workingDirectory, reason: reason) { [unowned self] result in
            switch result {
            case .success(let process):
                // The launcher's own line names its scope or cgroup, where it has one.
                logger.info("launched \(app) for \(reason)", metadata: ["pid": "\(process.pid)"])
                onStarted(app, process)
            case .failure(let error):
                // The launcher logged it.
                onFailed(app, error.description, !error.isDaemonsShortage)
            }
        }
    }
}
