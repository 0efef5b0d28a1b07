// bgtaskd-fuzz: a D-Bus fuzzer for bgtaskd (see FuzzCommand).
FuzzCommand.main()
