// bgtaskd-bench: the benchmarks behind the performance figures of bgtaskd's
// issues. Run them through bench/run, which builds everything in release mode
// and starts a private bus, the C baseline and the daemon.
BenchCommand.main()
