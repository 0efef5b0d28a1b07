import ArgumentParser

/// Figure 4: a daemon with no tasks does not wake up at all.
///
/// After a warm-up that opens and closes tasks on a few connections (some
/// ended, some left open when their connection closes, one app through the
/// background and back) every client disconnects; after a settling pause the
/// context switches of all the daemon's threads are summed from
/// /proc/PID/task/*/status before and after an idle window. Any wake-up — a
/// timer, a poll, a message — costs at least one voluntary switch.
struct IdleCommand: ParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "idle",
        abstract: "Context switches of the daemon over an idle window with no tasks and no clients.")

    @OptionGroup var target: BusOptions

    @Option(help: "Length of the idle window, in seconds.")
    var idleSeconds = 60.0

    @Option(help: "Pause between the last client leaving and the window, in seconds.")
    var settleSeconds = 2.0

    @Option(help: "Warm-up client connections.")
    var warmupConnections = 5

    @Option(help: "Tasks each warm-up connection opens.")
    var warmupTasks = 20

    func run() throws {
        let daemon: ProcStatus
        do {
            let client = try target.connect()
            daemon = try target.daemon(via: client)
            try warmUp()
        }
        // Every client connection of this process is closed now.
        MonotonicTime.sleep(seconds: settleSeconds)
        let before = daemon.threadSwitches()
        let load = CPUTimes.now()
        say("idle: daemon pid \(daemon.pid), \(before.count) threads; window \(format(idleSeconds, 0)) s after \(format(settleSeconds, 1)) s settling")
        MonotonicTime.sleep(seconds: idleSeconds)
        let after = daemon.threadSwitches()
        let machine = CPUTimes.brief(since: load)
        guard daemon.exists else { throw ValidationError("the daemon exited during the window") }

        var delta = 0
        for thread in after {
            let earlier = before.first { $0.tid == thread.tid }
            let woke = thread.total - (earlier?.total ?? 0)
            delta += woke
            if woke != 0 || earlier == nil {
                say("  thread \(thread.tid) (\(thread.name)): +\(thread.voluntary - (earlier?.voluntary ?? 0)) voluntary,"
                    + " +\(thread.nonvoluntary - (earlier?.nonvoluntary ?? 0)) non-voluntary\(earlier == nil ? " (new thread)" : "")")
            }
        }
        for thread in before where !after.contains(where: { $0.tid == thread.tid }) {
            say("  thread \(thread.tid) (\(thread.name)) exited during the window")
            delta += 1
        }
        say("  " + (CPUTimes.now()?.summary(since: load) ?? ""))
        say("  context switches over \(format(idleSeconds, 0)) s: \(delta)")
        let figure = Figure(
            id: "idle", what: "daemon context switches in \(format(idleSeconds, 0)) s idle, no tasks",
            value: "\(delta)", target: "0", passed: delta == 0, machine: machine)
        figure.report()
    }

    /// Opens and closes tasks in the ways apps do, then disconnects everyone.
    private func warmUp() throws {
        var clients: [ManagerClient] = []
        for index in 0..<warmupConnections {
            let client = try target.connect()
            var open: [UInt32] = []
            for number in 0..<warmupTasks {
                open.append(try client.begin("warm-up-\(index)-\(number)").id)
            }
            // End half of them; the rest close with the connection.
            for id in open.prefix(warmupTasks / 2) { try client.end(id) }
            _ = try client.timeRemaining()
            clients.append(client)
        }
        // One app through the background and back with a task open, then ends it.
        let roundTrip = try target.connect()
        let task = try roundTrip.begin("warm-up-background")
        try roundTrip.setState("background")
        _ = try roundTrip.timeRemaining()
        try roundTrip.setState("active")
        try roundTrip.end(task.id)
        clients.append(roundTrip)
        say("idle: warm-up opened \(warmupConnections * warmupTasks + 1) tasks on \(clients.count) connections, then disconnected")
        clients.removeAll()
    }
}
