import BgTaskDaemon
import BgTaskProtocol

// `--bus-introspect -` and `--help` print to standard output: a failed write fails the run.
StandardOutputCheck.atExit(program: "bgtaskd")
DaemonCommand.main()
