import BgTaskDaemon

DaemonCommand.main()
