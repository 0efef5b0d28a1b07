import ArgumentParser

/// `bgtaskctl wake`: the Manager's SimulateWake.
struct WakeCommand: ClientCommand {
    static let configuration = CommandConfiguration(
        commandName: "wake",
        abstract: "Act as if the machine had woken up: run the backlog of background work in turns.",
        discussion: """
            Calls Manager.SimulateWake, which takes the path logind's PrepareForSleep(false) \
            takes: clocks run again, and the background apps with work left (tasks paused \
            by the sleep, fetches and pushes that came due) are thawed in turns of at most \
            Scheduler.MaxConcurrentWakes apps, Scheduler.ChunkSec each, until none has work \
            left. Refused (NotPermitted) while the machine sleeps by logind's word: logind \
            says when it wakes. Only trusted callers may call it.

            --json prints {"sleeping": false}.
            """)

    @OptionGroup(title: "Global options")
    var global: GlobalOptions

    func run(with client: DaemonClient) throws {
        try SleepCommand.simulate(sleeping: false, client: client, json: global.json)
    }
}
