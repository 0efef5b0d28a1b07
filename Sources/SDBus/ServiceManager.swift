import CSystemd

/// Tells the service manager (systemd, when it started us) how the service
/// stands; does nothing when no manager listens.
public enum ServiceManager {
    /// Sends `state` (`READY=1`, `STOPPING=1`, `STATUS=…`, newline-separated).
    public static func notify(_ state: String) {
        _ = sd_notify(0, state)
    }
}
