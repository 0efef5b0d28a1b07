/// How a call ended, as the oracles see it.
enum CallOutcome: Equatable {
    /// A method return whose body has this signature.
    case returned(signature: String)
    /// An error reply from the daemon (or from the bus on its behalf).
    case error(name: String, message: String)
    /// No answer within the timeout.
    case timeout
    /// The bus says the daemon went away without answering (NoReply,
    /// ServiceUnknown …): it exited or dropped its connection.
    case noReply(name: String, message: String)
    /// The fuzzer could not build or send the call (sd-bus refused a value,
    /// the bus closed the fuzzer's connection): no answer was expected.
    case notSent(String)

    /// Error names that mean the daemon is gone rather than that it answered.
    static let goneNames: Set<String> = [
        "org.freedesktop.DBus.Error.NoReply", "org.freedesktop.DBus.Error.ServiceUnknown",
        "org.freedesktop.DBus.Error.NameHasNoOwner", "org.freedesktop.DBus.Error.Disconnected",
    ]

    /// Error names that mean no answer came in time.
    static let timeoutNames: Set<String> = ["org.freedesktop.DBus.Error.Timeout", "System.Error.ETIMEDOUT"]

    /// Classifies an error reply or a local failure by its name.
    static func classify(errorName name: String, message: String) -> CallOutcome {
        if timeoutNames.contains(name) { return .timeout }
        if goneNames.contains(name) { return .noReply(name: name, message: message) }
        // sd-bus's errno errors: raised on this side, never an answer of the daemon.
        if name.hasPrefix("System.Error.") { return .notSent("\(name): \(message)") }
        return .error(name: name, message: message)
    }

    /// The key the summary counts answers under.
    var summaryKey: String {
        switch self {
        case .returned: "(method return)"
        case .error(let name, _): name
        case .timeout: "(no answer: timeout)"
        case .noReply(let name, _): "(daemon gone: \(name))"
        case .notSent: "(not sent)"
        }
    }
}
