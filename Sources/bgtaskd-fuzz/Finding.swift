/// Something wrong with the daemon that the fuzzer saw: a crash, a hang, a
/// leak, an error name outside the contract, a failed restart.
struct Finding: Codable {
    enum Kind: String, Codable {
        /// The daemon exited (by a signal or with a nonzero status) while being fuzzed.
        case crash
        /// A call got no answer within the timeout.
        case hang
        /// The daemon stopped answering Ping or property reads, or vanished from the bus while alive.
        case unresponsive
        /// An error name outside `org.freedesktop.DBus.Error.*` and the daemon's documented errors.
        case unexpectedError = "unexpected-error"
        /// A method return whose signature differs from the declared out arguments.
        case wrongReply = "wrong-reply-signature"
        /// A call that does not match its declared method was answered with success.
        case acceptedWrongCall = "accepted-wrong-call"
        /// Resident memory grew beyond the threshold over the run.
        case leak
        /// The daemon did not start, did not get ready, or died, on the state a run left.
        case restart
        /// SIGTERM did not make the daemon exit with status 0.
        case shutdown
        /// The running daemon and the introspection XML disagree.
        case drift
    }

    var kind: Kind
    /// One line: what happened.
    var summary: String
    /// The call that set it off, as a label, when there is one.
    var call: String?
    /// More lines of explanation (exit status, messages, values seen).
    var details: [String] = []
    /// The calls sent last before it, oldest first, as commands.
    var lastCalls: [String] = []
    /// The fewest calls found to reproduce it on a fresh daemon, as a command or program.
    var reproduction: String?
    /// The end of the daemon's log.
    var logTail: [String] = []
    /// How many times it was seen.
    var count = 1
}
