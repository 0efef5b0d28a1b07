// bgtaskd-bench: the benchmarks behind the performance figures in the README.
// Run them through bench/run, which builds everything in release mode
// and starts a private bus, the C baseline and the daemon.
BenchCommand.main()
