import BgTaskTestKit
import Foundation
import SDBus
import Testing

/// Bad plugins never stop the daemon, and a plugin that fails a call leaves
/// the daemon's state as it was.
@Suite struct PluginIsolationTests {
    /// A plugin exporting `org.bgtaskd.BackgroundTasks1.Demo` whose `Ignore`
    /// method never answers and whose `Refuse` method answers with an error.
    static let misbehaving = PluginFixture.source(name: "demo", start: """
        static const bgt_member members[] = {
            { .kind = BGT_MEMBER_METHOD, .name = "Ignore", .in_signature = "", .in_names = "", .out_signature = "", .out_names = "" },
            { .kind = BGT_MEMBER_METHOD, .name = "Refuse", .in_signature = "s", .in_names = "what", .out_signature = "", .out_names = "" },
        };
        static const bgt_interface interface = { .name = "org.bgtaskd.BackgroundTasks1.Demo", .members = members, .n_members = 2 };
        if (api->export_interface(host, &interface) < 0) return -1;
        """, call: """
        if (strcmp(member, "Refuse") == 0) api->reply_error(call, "org.bgtaskd.BackgroundTasks1.Error.NotPermitted", "the demo says no");
        """)

    /// A plugin that asks for a wake opportunity in the past at every one it
    /// gets: its timer fires on every turn of the loop. Calls are still
    /// answered (the location plugin once did this, and the daemon answered
    /// nothing until it was killed).
    @Test func aPluginThatKeepsAskingForPastOpportunitiesDoesNotStarveTheBus() throws {
        let spinning = PluginFixture.source(name: "spin", start: """
            api->schedule_opportunity(host, 1);
            """, declarations: """
            static void spin_event(void *p, const bgt_event *event) {
                (void) p;
                if (event->type == BGT_EVENT_WAKE_OPPORTUNITY) api->schedule_opportunity(host, 1);
            }
            """, descriptorFields: ".event = spin_event,")
        let fixtures = try PluginFixture.directory([("libbgtaskd-mode-spin.so", spinning)])
        defer { try? FileManager.default.removeItem(atPath: fixtures) }
        let daemon = try DaemonUnderTest(arguments: ["--plugin-dir", fixtures])
        for _ in 0..<20 {
            let started = ContinuousClock.now
            #expect(try daemon.property("Plugins") == #"a(ssu) 1 "spin" "1.0.0" 1"#)
            // Starving would be no answer at all; 5 s leaves room for busctl's
            // start on a machine busy with the whole suite and the spinning daemon.
            #expect(ContinuousClock.now - started < .seconds(5))
        }
        #expect(daemon.stop() == .status(0))
    }

    /// A plugin that crashed as it started took the daemon down at every
    /// start after it (a supervisor restarted it into the same crash, for
    /// good). The start after a crash refuses that file, and the daemon runs
    /// with its other plugins, until the file changes.
    @Test func aPluginThatCrashesTheDaemonAsItStartsIsRefusedUntilItChanges() throws {
        let crashing = PluginFixture.source(name: "crash", start: "__builtin_trap();")
        let fixtures = try PluginFixture.directory([
            ("libbgtaskd-mode-crash.so", crashing), ("libbgtaskd-mode-demo.so", PluginFixture.source(name: "demo")),
        ])
        let scratch = FileManager.default.temporaryDirectory.appendingPathComponent("bgtaskd-trial-\(UUID())").path
        defer {
            try? FileManager.default.removeItem(atPath: fixtures)
            try? FileManager.default.removeItem(atPath: scratch)
        }
        let bus = try PrivateBus()
        defer { bus.stop() }
        let state = scratch + "/state", plugin = fixtures + "/libbgtaskd-mode-crash.so"
        func crashingStart() throws -> (ChildProcess.Exit?, String) {
            let process = try ChildProcess(BinaryLocator.path(of: "bgtaskd"), [
                "--bus", bus.address, "--state-dir", state, "--plugin-dir", fixtures, "--log-level", "debug",
            ], environment: ["HOME": scratch, "XDG_DATA_HOME": scratch + "/data", "XDG_CONFIG_HOME": scratch + "/config"])
            let exit = process.waitForExit(timeout: .seconds(20))
            if exit == nil { _ = process.stop() }
            return (exit, process.standardError)
        }
        let (first, firstLog) = try crashingStart()
        #expect(first == .signal(SIGILL), "\(firstLog)")

        let daemon = try DaemonUnderTest(arguments: ["--plugin-dir", fixtures], bus: bus, stateDirectory: state)
        #expect(daemon.log.contains("the last start of bgtaskd ended while the plugin \(plugin) started"), "\(daemon.log)")
        #expect(try daemon.property("Plugins") == #"a(ssu) 1 "demo" "1.0.0" 1"#)
        #expect(daemon.stop() == .status(0))

        // Refused at every start, not every other one, and each says why.
        let again = try DaemonUnderTest(arguments: ["--plugin-dir", fixtures], bus: bus, stateDirectory: state)
        #expect(again.log.contains("refusing plugin \(plugin): a start of bgtaskd ended while it started"), "\(again.log)")
        #expect(!again.log.contains("the last start of bgtaskd ended"), "\(again.log)")
        #expect(try again.property("Plugins") == #"a(ssu) 1 "demo" "1.0.0" 1"#)
        #expect(again.stop() == .status(0))

        // A new build of it is tried again.
        try FileManager.default.setAttributes([.modificationDate: Date().addingTimeInterval(60)], ofItemAtPath: plugin)
        let (retried, retriedLog) = try crashingStart()
        #expect(retried == .signal(SIGILL), "\(retriedLog)")
        #expect(!retriedLog.contains("refusing plugin \(plugin)"), "\(retriedLog)")
    }

    /// A reply whose string sd-bus refused (not UTF-8) would carry a
    /// signature its body does not match, and the bus daemon cuts off the
    /// connection that sends one: the whole daemon. The caller gets Failed
    /// instead, and the daemon stays on the bus.
    @Test func aReplyAPluginCouldNotWriteIsNotSent() throws {
        let source = PluginFixture.source(name: "badutf", start: """
            static const bgt_member members[] = {
                { .kind = BGT_MEMBER_METHOD, .name = "Echo", .in_signature = "", .in_names = "", .out_signature = "s", .out_names = "text" },
            };
            static const bgt_interface interface = { .name = "org.bgtaskd.BackgroundTasks1.BadUtf", .members = members, .n_members = 1 };
            if (api->export_interface(host, &interface) < 0) return -1;
            """, call: """
            bgt_message *reply = api->reply_new(call);
            const char *text = "\\xff\\xfe";
            int appended = api->message_append(reply, 's', text);
            int sent = api->reply_send(call, reply);
            /* -22: EINVAL, -74: EBADMSG. */
            if (appended == -22 && sent == -74) api->log(host, 6, "the append and the send were both refused");
            """)
        let fixtures = try PluginFixture.directory([("libbgtaskd-mode-badutf.so", source)])
        defer { try? FileManager.default.removeItem(atPath: fixtures) }
        let daemon = try DaemonUnderTest(arguments: ["--plugin-dir", fixtures])
        let echo = try daemon.busctl(["call", "org.bgtaskd.BackgroundTasks1", "/org/bgtaskd/BackgroundTasks1", "org.bgtaskd.BackgroundTasks1.BadUtf", "Echo"])
        #expect(!echo.succeeded && echo.standardError.contains("could not write its reply"), "\(echo)")
        #expect(daemon.waitForLog(containing: "the append and the send were both refused"), "\(daemon.log)")
        // Still on the bus.
        #expect(try daemon.property("Plugins") == #"a(ssu) 1 "badutf" "1.0.0" 1"#)
        #expect(daemon.stop() == .status(0))
    }

    /// A plugin whose `Try(s what) → s` does one wrong thing per `what` and
    /// logs what each host call returned.
    static let careless = PluginFixture.source(name: "careless", start: """
        static const bgt_member members[] = {
            { .kind = BGT_MEMBER_METHOD, .name = "Try", .in_signature = "s", .in_names = "what", .out_signature = "s", .out_names = "answer" },
            { .kind = BGT_MEMBER_SIGNAL, .name = "Said", .in_signature = "s", .in_names = "text" },
        };
        static const bgt_interface interface = { .name = "org.bgtaskd.BackgroundTasks1.Careless", .members = members, .n_members = 2 };
        if (api->export_interface(host, &interface) < 0) return -1;
        """, call: """
        const char *what = "";
        api->message_read(api->call_arguments(call), 's', &what);
        const bgt_caller *caller = api->call_caller(call);
        char line[200];
        int r = 0;
        if (strcmp(what, "bad-error-name") == 0) {
            r = api->reply_error(call, "org.example.bad-name.Error", "a name the bus refuses");
        } else if (strcmp(what, "wrong-reply") == 0) {
            bgt_message *reply = api->reply_new(call);
            int number = 42;
            api->message_append(reply, 'i', &number);
            r = api->reply_send(call, reply);
        } else if (strcmp(what, "foreign-signal") == 0 || strcmp(what, "wrong-signal") == 0 || strcmp(what, "signal") == 0) {
            int foreign = strcmp(what, "foreign-signal") == 0;
            bgt_message *signal = api->signal_new(host, foreign ? "org.bgtaskd.BackgroundTasks1.Fetch" : "org.bgtaskd.BackgroundTasks1.Careless",
                                                  foreign ? "PerformFetch" : "Said");
            if (strcmp(what, "wrong-signal") == 0) { int number = 1; api->message_append(signal, 'i', &number); }
            else api->message_append(signal, 's', "bogus");
            r = api->signal_send(host, signal, caller->connection);
        } else if (strcmp(what, "bad-key") == 0) {
            r = api->record_put(host, "things", "\\xff\\xfe-a", "v", 1);
        } else if (strcmp(what, "no-data") == 0) {
            r = api->record_put(host, "things", "k", NULL, 5);
        } else if (strcmp(what, "small-token") == 0 || strcmp(what, "other-mode") == 0
                   || strcmp(what, "huge-budget") == 0 || strcmp(what, "tiny-budget") == 0) {
            char token[80];
            const char *reason = strcmp(what, "other-mode") == 0 ? "fetch" : "careless";
            double budget = strcmp(what, "huge-budget") == 0 ? 1e300 : strcmp(what, "tiny-budget") == 0 ? 5e-7 : 5;
            r = api->wake_app(host, "org.example.Careful", reason, budget, token, strcmp(what, "small-token") == 0 ? 8 : sizeof token);
        }
        __builtin_snprintf(line, sizeof line, "careless %s: %d", what, r);
        api->log(host, 6, line);
        bgt_message *reply = api->reply_new(call);
        api->message_append(reply, 's', line);
        api->reply_send(call, reply);
        """)

    /// What a careless plugin does wrong is refused with an error it can
    /// see, and has no effect: an error of a malformed name cut the daemon
    /// off the bus; a reply of another signature was dropped, the caller
    /// waiting 25 s; a wake with no room for its token launched the app,
    /// which was then killed for a token nobody had; signals of other
    /// interfaces (a fake `PerformFetch`) reached apps; invalid UTF-8 keys
    /// were repaired into one another.
    @Test func aCarelessPluginsMistakesAreRefusedWithoutEffect() throws {
        let fixtures = try PluginFixture.directory([("libbgtaskd-mode-careless.so", Self.careless)])
        defer { try? FileManager.default.removeItem(atPath: fixtures) }
        let daemon = try DaemonUnderTest(arguments: ["--plugin-dir", fixtures], desktopEntries: [
            DesktopEntrySpec(id: "org.example.Careful", modes: ["careless", "fetch"], exec: "/bin/false"),
        ])
        let client = try RawClient(daemon)
        func attempt(_ what: String) throws -> String? {
            let message = try client.bus.newMethodCall(
                destination: "org.bgtaskd.BackgroundTasks1", path: "/org/bgtaskd/BackgroundTasks1",
                interface: "org.bgtaskd.BackgroundTasks1.Careless", member: "Try")
            try message.append(what)
            do {
                return try client.bus.call(message, timeout: 5_000_000).readString()
            } catch let error as BusError {
                return error.name + ": " + error.message
            }
        }
        let badName = try attempt("bad-error-name")
        #expect(badName?.hasPrefix("org.freedesktop.DBus.Error.Failed") == true && badName?.contains("no valid name") == true, "\(String(describing: badName))")
        #expect(daemon.waitForLog(containing: "careless bad-error-name: -22"), "\(daemon.log)")
        let wrongReply = try attempt("wrong-reply")
        #expect(wrongReply?.hasPrefix("org.freedesktop.DBus.Error.Failed") == true && wrongReply?.contains("did not match") == true, "\(String(describing: wrongReply))")
        // -22: EINVAL, -105: ENOBUFS, -1: EPERM.
        let expected = [
            ("foreign-signal", -22), ("wrong-signal", -22), ("signal", 0), ("bad-key", -22), ("no-data", -22),
            ("small-token", -105), ("other-mode", -1), ("huge-budget", -22), ("tiny-budget", -22),
        ]
        for (what, code) in expected {
            let answer = try attempt(what)
            #expect(answer == "careless \(what): \(code)", "\(String(describing: answer))")
        }
        // None of the refused wakes launched the app; the daemon is still on the bus.
        Thread.sleep(forTimeInterval: 0.5)
        #expect(!daemon.log.contains("launched org.example.Careful"), "\(daemon.log)")
        #expect(try daemon.property("Plugins") == #"a(ssu) 1 "careless" "1.0.0" 1"#)
        #expect(daemon.stop() == .status(0))
    }

    /// A plugin found first took a stock mode's configuration section
    /// (`Fetch.*`), and the fetch plugin was refused. A stock section is its
    /// mode's now; a mode's name must be one a desktop entry can declare.
    @Test func aStockModesSectionAndBadModeNamesAreRefused() throws {
        let squatter = PluginFixture.source(name: "aaa", declarations: """
            static const bgt_config_key keys[] = {
                { .name = "Fetch.Squat", .type = BGT_CONFIG_NUMBER, .minimum = 0, .maximum = 10, .default_value = "1", .help = "taken" },
            };
            """, descriptorFields: ".config_keys = keys, .n_config_keys = 1,")
        let fixtures = try PluginFixture.directory([
            ("libbgtaskd-mode-aaa.so", squatter),
            ("libbgtaskd-mode-Upper.so", PluginFixture.source(name: "Upper")),
        ])
        defer { try? FileManager.default.removeItem(atPath: fixtures) }
        let buildDirectory = URL(fileURLWithPath: BinaryLocator.path(of: "bgtaskd")).deletingLastPathComponent().path
        let daemon = try DaemonUnderTest(arguments: ["--plugin-dir", fixtures + ":" + buildDirectory])
        #expect(try daemon.property("Plugins") == #"a(ssu) 4 "fetch" "1.0.0" 1 "location" "1.0.0" 1 "remote-notification" "1.0.0" 1 "transfer" "1.0.0" 1"#)
        #expect(daemon.waitForLog(containing: "refusing plugin \(fixtures)/libbgtaskd-mode-aaa.so: its configuration section [Fetch] belongs to the fetch mode"), "\(daemon.log)")
        #expect(daemon.waitForLog(containing: "refusing plugin \(fixtures)/libbgtaskd-mode-Upper.so: bad metadata: its name 'Upper' is not a mode name"), "\(daemon.log)")
        #expect(daemon.stop() == .status(0))
    }

    /// A record of a gigabyte was copied whole before SQLite refused it
    /// (two gigabytes of memory), and the plugin was told EIO.
    @Test func aRecordTooLargeIsRefusedBeforeItIsCopied() throws {
        let hoarder = PluginFixture.source(name: "hoarder", start: """
            extern void *calloc(size_t count, size_t size);
            extern void free(void *pointer);
            size_t bytes = ((size_t) 64 << 20) + 1;
            void *big = calloc(1, bytes);
            if (!big) return -1;
            int put = api->record_put(host, "c", "k", big, bytes);
            free(big);
            if (put != -27 /* EFBIG */) return -1;
            if (api->record_put(host, "c", "k", "small", 5) != 0) return -1;
            """)
        let fixtures = try PluginFixture.directory([("libbgtaskd-mode-hoarder.so", hoarder)])
        defer { try? FileManager.default.removeItem(atPath: fixtures) }
        let daemon = try DaemonUnderTest(arguments: ["--plugin-dir", fixtures])
        #expect(try daemon.property("Plugins") == #"a(ssu) 1 "hoarder" "1.0.0" 1"#, "\(daemon.log)")
        #expect(daemon.stop() == .status(0))
    }

    /// A key's help and unit went to `bgtaskd --help` as the plugin wrote
    /// them: a line break and escape sequences forged a key and colours.
    @Test func aPluginsKeyHelpIsShownEscaped() throws {
        let forger = PluginFixture.source(name: "forger", declarations: #"""
            static const bgt_config_key keys[] = {
                { .name = "Forger.Size", .type = BGT_CONFIG_NUMBER, .minimum = 0, .maximum = 10, .default_value = "1",
                  .unit = "s\x1b[0m", .help = "fine\n  Tasks.BudgetSec=999999  forged\x1b[31m" },
            };
            """#, descriptorFields: ".config_keys = keys, .n_config_keys = 1,")
        let fixtures = try PluginFixture.directory([("libbgtaskd-mode-forger.so", forger)])
        defer { try? FileManager.default.removeItem(atPath: fixtures) }
        let help = try CommandResult.run(BinaryLocator.path(of: "bgtaskd"), ["--plugin-dir", fixtures, "--help"], timeout: .seconds(20))
        #expect(help.succeeded && help.standardOutput.contains("Forger.Size"), "\(help)")
        #expect(!help.standardOutput.contains("\u{1B}") && !help.standardOutput.contains("\n  Tasks.BudgetSec=999999"), "\(help)")
    }

    /// A plugin may not export the daemon's own interface, nor one another
    /// plugin exports already: sd-bus would merge the two, and the contract
    /// would silently grow.
    @Test func aPluginCannotTakeAnInterfaceThatIsTaken() throws {
        func exporting(_ name: String, _ interface: String) -> String {
            PluginFixture.source(name: name, start: """
                static const bgt_member members[] = {
                    { .kind = BGT_MEMBER_METHOD, .name = "Ping", .in_signature = "", .in_names = "", .out_signature = "", .out_names = "" },
                };
                static const bgt_interface interface = { .name = "\(interface)", .members = members, .n_members = 1 };
                if (api->export_interface(host, &interface) < 0) return -1;
                """)
        }
        let fixtures = try PluginFixture.directory([
            ("libbgtaskd-mode-alpha.so", exporting("alpha", "org.bgtaskd.BackgroundTasks1.Demo")),
            ("libbgtaskd-mode-beta.so", exporting("beta", "org.bgtaskd.BackgroundTasks1.Demo")),
            ("libbgtaskd-mode-gamma.so", exporting("gamma", "org.bgtaskd.BackgroundTasks1.Manager")),
        ])
        defer { try? FileManager.default.removeItem(atPath: fixtures) }
        let daemon = try DaemonUnderTest(arguments: ["--plugin-dir", fixtures])
        #expect(try daemon.property("Plugins") == #"a(ssu) 1 "alpha" "1.0.0" 1"#)
        #expect(daemon.waitForLog(containing: "libbgtaskd-mode-beta.so: start failed: cannot export org.bgtaskd.BackgroundTasks1.Demo: the interface org.bgtaskd.BackgroundTasks1.Demo is exported at /org/bgtaskd/BackgroundTasks1 already"), "\(daemon.log)")
        #expect(daemon.waitForLog(containing: "libbgtaskd-mode-gamma.so: start failed: cannot export org.bgtaskd.BackgroundTasks1.Manager: the interface org.bgtaskd.BackgroundTasks1.Manager is the daemon's own"), "\(daemon.log)")
        let manager = try daemon.busctl(["introspect", "org.bgtaskd.BackgroundTasks1", "/org/bgtaskd/BackgroundTasks1", "org.bgtaskd.BackgroundTasks1.Manager"])
        #expect(manager.succeeded && !manager.standardOutput.contains(".Ping"), "\(manager)")
        #expect(daemon.stop() == .status(0))
    }

    /// A plugin found before the stock fetch plugin exported the Fetch
    /// interface, and the fetch plugin was refused (found by an outside
    /// test). A stock mode's interface is that mode's, as its section is.
    @Test func aStockModesInterfaceIsThatModes() throws {
        let fixtures = try PluginFixture.directory([
            ("libbgtaskd-mode-aaa.so", PluginFixture.source(name: "aaa", start: """
                static const bgt_member members[] = {
                    { .kind = BGT_MEMBER_METHOD, .name = "Ping", .in_signature = "", .in_names = "", .out_signature = "", .out_names = "" },
                };
                static const bgt_interface interface = { .name = "org.bgtaskd.BackgroundTasks1.Fetch", .members = members, .n_members = 1 };
                if (api->export_interface(host, &interface) < 0) return -1;
                """)),
        ])
        defer { try? FileManager.default.removeItem(atPath: fixtures) }
        let buildDirectory = URL(fileURLWithPath: BinaryLocator.path(of: "bgtaskd")).deletingLastPathComponent().path
        let daemon = try DaemonUnderTest(arguments: ["--plugin-dir", fixtures + ":" + buildDirectory])
        #expect(try daemon.property("Plugins") == #"a(ssu) 4 "fetch" "1.0.0" 1 "location" "1.0.0" 1 "remote-notification" "1.0.0" 1 "transfer" "1.0.0" 1"#)
        #expect(daemon.waitForLog(containing: "libbgtaskd-mode-aaa.so: start failed: cannot export org.bgtaskd.BackgroundTasks1.Fetch: the interface belongs to the fetch mode"), "\(daemon.log)")
        #expect(daemon.stop() == .status(0))
    }

    /// Found by an outside review with plugins of its own: a plugin could
    /// send the daemon's and other modes' signals (those of an export that
    /// was refused counted as declared, and so did those of one at another
    /// path, which went out from the daemon's path); end another plugin's
    /// subscription; trap the daemon with an interface of members and no
    /// array; and have a stock mode's interface at another path.
    @Test func aPluginCannotSpeakForTheDaemonOrOtherPlugins() throws {
        let listener = PluginFixture.source(name: "aaa", start: """
            extern void heard(void *userdata, bgt_message *signal);
            uint64_t id = 0;
            if (api->signal_subscribe(host, BGT_BUS_USER, "org.freedesktop.DBus", NULL, NULL, "NameOwnerChanged", NULL, heard, NULL, &id) < 0 || id != 1) return -1;
            """, declarations: "void heard(void *userdata, bgt_message *signal) { (void) userdata; (void) signal; }")
        let evil = PluginFixture.source(name: "evil", start: """
            extern int results[5];
            static const bgt_member expired[] = { { .kind = BGT_MEMBER_SIGNAL, .name = "TaskExpired", .in_signature = "u", .in_names = "task_id" } };
            static const bgt_interface manager = { .name = "org.bgtaskd.BackgroundTasks1.Manager", .members = expired, .n_members = 1 };
            static const bgt_member forged[] = { { .kind = BGT_MEMBER_SIGNAL, .name = "PerformFetch", .in_signature = "s", .in_names = "token" } };
            static const bgt_interface fetch = { .name = "org.bgtaskd.BackgroundTasks1.Fetch", .members = forged, .n_members = 1 };
            static const bgt_member odd[] = { { .kind = BGT_MEMBER_SIGNAL, .name = "Odd", .in_signature = "s", .in_names = "what" } };
            static const bgt_interface elsewhere = { .name = "org.example.Elsewhere1", .members = odd, .n_members = 1 };
            static const bgt_interface hollow = { .name = "org.example.Hollow1", .members = NULL, .n_members = 3 };
            static const bgt_member go[] = {
                { .kind = BGT_MEMBER_METHOD, .name = "Go", .in_signature = "", .in_names = "", .out_signature = "a(si)", .out_names = "results" },
                { .kind = BGT_MEMBER_METHOD, .name = "Hold", .in_signature = "", .in_names = "", .out_signature = "i", .out_names = "value" },
                { .kind = BGT_MEMBER_METHOD, .name = "Cross", .in_signature = "", .in_names = "", .out_signature = "i", .out_names = "value" },
            };
            static const bgt_interface mine = { .name = "org.example.Evil1", .members = go, .n_members = 3 };
            results[0] = api->export_interface(host, &manager);
            results[1] = api->export_interface_at(host, "/x", &fetch);
            results[2] = api->export_interface_at(host, "/y", &elsewhere);
            results[3] = api->export_interface(host, &hollow);
            results[4] = api->signal_unsubscribe(host, 1);
            if (api->export_interface(host, &mine) < 0) return -1;
            """, call: """
            extern int results[5];
            extern bgt_call *held;
            if (strcmp(member, "Hold") == 0) { api->call_retain(call); held = call; api->log(host, BGT_LOG_INFO, "holding a call"); return; }
            bgt_message *reply = api->reply_new(call);
            if (strcmp(member, "Cross") == 0) {
                /* The held call's reply, sent for this call; then each its own. */
                bgt_message *other = api->reply_new(held);
                int32_t value = 42;
                api->message_append(other, 'i', &value);
                int32_t crossed = api->reply_send(call, other);
                api->message_append(reply, 'i', &crossed);
                api->reply_send(call, reply);
                bgt_message *own = api->reply_new(held);
                value = 7;
                api->message_append(own, 'i', &value);
                api->reply_send(held, own);
                api->call_release(held);
                return;
            }
            const char *to = api->call_caller(call)->connection;
            bgt_message *a = api->signal_new(host, "org.bgtaskd.BackgroundTasks1.Manager", "TaskExpired");
            uint32_t task = 7;
            api->message_append(a, 'u', &task);
            int sentExpired = api->signal_send(host, a, to);
            bgt_message *b = api->signal_new(host, "org.bgtaskd.BackgroundTasks1.Fetch", "PerformFetch");
            api->message_append(b, 's', "forged");
            int sentFetch = api->signal_send(host, b, to);
            bgt_message *c = api->signal_new(host, "org.example.Elsewhere1", "Odd");
            api->message_append(c, 's', "odd");
            int sentOdd = api->signal_send(host, c, to);
            const char *names[] = { "export Manager", "export Fetch at /x", "export signals at /y", "export no members", "unsubscribe another one", "send TaskExpired", "send PerformFetch", "send Odd" };
            int values[] = { results[0], results[1], results[2], results[3], results[4], sentExpired, sentFetch, sentOdd };
            api->message_open(reply, 'a', "(si)");
            for (int i = 0; i < 8; i++) {
                api->message_open(reply, 'r', "si");
                api->message_append(reply, 's', names[i]);
                int32_t value = values[i];
                api->message_append(reply, 'i', &value);
                api->message_close(reply);
            }
            api->message_close(reply);
            api->reply_send(call, reply);
            """, declarations: "int results[5]; bgt_call *held;")
        let fixtures = try PluginFixture.directory([("libbgtaskd-mode-aaa.so", listener), ("libbgtaskd-mode-evil.so", evil)])
        defer { try? FileManager.default.removeItem(atPath: fixtures) }
        let daemon = try DaemonUnderTest(arguments: ["--plugin-dir", fixtures])
        #expect(try daemon.property("Plugins") == #"a(ssu) 2 "aaa" "1.0.0" 1 "evil" "1.0.0" 1"#, "\(daemon.log)")
        let go = try daemon.busctl(["call", "org.bgtaskd.BackgroundTasks1", "/org/bgtaskd/BackgroundTasks1", "org.example.Evil1", "Go"])
        let invalid = "-\(EINVAL)"
        #expect(go.standardOutput.trimmingCharacters(in: .whitespacesAndNewlines) == """
            a(si) 8 "export Manager" \(invalid) "export Fetch at /x" \(invalid) "export signals at /y" \(invalid) "export no members" \(invalid) \
            "unsubscribe another one" -\(ENOENT) "send TaskExpired" \(invalid) "send PerformFetch" \(invalid) "send Odd" \(invalid)
            """, "\(go)\n\(daemon.log.suffix(3000))")
        // A reply made for one call and sent for another is refused: each caller gets its own.
        let hold = try ChildProcess("/usr/bin/busctl", ["--user", "call", "org.bgtaskd.BackgroundTasks1", "/org/bgtaskd/BackgroundTasks1", "org.example.Evil1", "Hold"],
                                    environment: daemon.environment)
        #expect(daemon.waitForLog(containing: "holding a call"), "\(daemon.log.suffix(2000))")
        let cross = try daemon.busctl(["call", "org.bgtaskd.BackgroundTasks1", "/org/bgtaskd/BackgroundTasks1", "org.example.Evil1", "Cross"])
        #expect(cross.standardOutput.trimmingCharacters(in: .whitespacesAndNewlines) == "i \(invalid)", "\(cross)\n\(daemon.log.suffix(3000))")
        #expect(hold.waitForExit() == .status(0))
        #expect(hold.lines.contains("i 7") && !hold.lines.contains("i 42"), "\(hold.lines)")
        #expect(daemon.stop() == .status(0))
    }

    /// A plugin refused after it exported an interface (its start failed
    /// later) takes the interface with it: nothing may call a stopped
    /// plugin, and another plugin may export that name.
    @Test func aPluginRefusedAfterItExportedTakesItsInterfaceWithIt() throws {
        let half = PluginFixture.source(name: "alpha", start: """
            static const bgt_member members[] = {
                { .kind = BGT_MEMBER_METHOD, .name = "Ping", .in_signature = "", .in_names = "", .out_signature = "", .out_names = "" },
            };
            static const bgt_interface first = { .name = "org.bgtaskd.BackgroundTasks1.Demo", .members = members, .n_members = 1 };
            static const bgt_interface second = { .name = "org.bgtaskd.BackgroundTasks1.Manager", .members = members, .n_members = 1 };
            if (api->export_interface(host, &first) < 0) return -1;
            if (api->export_interface(host, &second) < 0) return -1;
            """)
        let whole = PluginFixture.source(name: "beta", start: """
            static const bgt_member members[] = {
                { .kind = BGT_MEMBER_METHOD, .name = "Pong", .in_signature = "", .in_names = "", .out_signature = "", .out_names = "" },
            };
            static const bgt_interface interface = { .name = "org.bgtaskd.BackgroundTasks1.Demo", .members = members, .n_members = 1 };
            if (api->export_interface(host, &interface) < 0) return -1;
            """)
        let fixtures = try PluginFixture.directory([("libbgtaskd-mode-alpha.so", half), ("libbgtaskd-mode-beta.so", whole)])
        defer { try? FileManager.default.removeItem(atPath: fixtures) }
        let daemon = try DaemonUnderTest(arguments: ["--plugin-dir", fixtures])
        #expect(try daemon.property("Plugins") == #"a(ssu) 1 "beta" "1.0.0" 1"#, "\(daemon.log)")
        let demo = try daemon.busctl(["introspect", "org.bgtaskd.BackgroundTasks1", "/org/bgtaskd/BackgroundTasks1", "org.bgtaskd.BackgroundTasks1.Demo"])
        #expect(demo.standardOutput.contains(".Pong") && !demo.standardOutput.contains(".Ping"), "\(demo)")
        #expect(daemon.waitForLog(containing: "libbgtaskd-mode-alpha.so: start failed: cannot export org.bgtaskd.BackgroundTasks1.Manager"), "\(daemon.log)")
        #expect(daemon.stop() == .status(0))
    }

    @Test func badPluginsAreRefusedAndTheDaemonRunsOn() throws {
        let fixtures = try PluginFixture.directory([
            ("libbgtaskd-mode-demo.so", Self.misbehaving),
            ("libbgtaskd-mode-newer.so", PluginFixture.source(name: "newer", minor: "BGTASKD_PLUGIN_ABI_MINOR + 1")),
            ("libbgtaskd-mode-broken.so", PluginFixture.source(name: "broken", initFails: true)),
        ])
        defer { try? FileManager.default.removeItem(atPath: fixtures) }
        try "garbage".write(toFile: fixtures + "/libbgtaskd-mode-junk.so", atomically: true, encoding: .utf8)
        let buildDirectory = URL(fileURLWithPath: BinaryLocator.path(of: "bgtaskd")).deletingLastPathComponent().path
        let daemon = try DaemonUnderTest(arguments: ["--plugin-dir", fixtures + ":" + buildDirectory])
        #expect(try daemon.property("Plugins") == #"a(ssu) 5 "demo" "1.0.0" 1 "fetch" "1.0.0" 1 "location" "1.0.0" 1 "remote-notification" "1.0.0" 1 "transfer" "1.0.0" 1"#)
        #expect(daemon.waitForLog(containing: "refusing plugin \(fixtures)/libbgtaskd-mode-newer.so: incompatible ABI 1."))
        #expect(daemon.waitForLog(containing: "refusing plugin \(fixtures)/libbgtaskd-mode-broken.so: init failed: the fixture refuses to start"))
        #expect(daemon.waitForLog(containing: "refusing plugin \(fixtures)/libbgtaskd-mode-junk.so: not a plugin"))
        #expect(daemon.stop() == .status(0))
    }

    /// A plugin built against ABI 1.1 (descriptor version 1, without the
    /// batch functions) still loads, and its writes still commit with its reply.
    @Test func aPluginOfAnOlderMinorStillLoadsAndWrites() throws {
        let older = PluginFixture.source(name: "older", minor: "1", start: """
            static const bgt_member members[] = {
                { .kind = BGT_MEMBER_METHOD, .name = "Store", .in_signature = "", .in_names = "", .out_signature = "", .out_names = "" },
            };
            static const bgt_interface interface = { .name = "org.bgtaskd.BackgroundTasks1.Older", .members = members, .n_members = 1 };
            if (api->export_interface(host, &interface) < 0) return -1;
            """, call: """
            if (api->record_put(host, "things", "k", "v", 1) < 0) { api->reply_error(call, "org.freedesktop.DBus.Error.Failed", "no"); return; }
            api->reply_send(call, api->reply_new(call));
            """, descriptorVersion: "1")
        let fixtures = try PluginFixture.directory([("libbgtaskd-mode-older.so", older)])
        defer { try? FileManager.default.removeItem(atPath: fixtures) }
        let daemon = try DaemonUnderTest(arguments: ["--plugin-dir", fixtures])
        #expect(try daemon.property("Plugins") == #"a(ssu) 1 "older" "1.0.0" 1"#)
        let client = try RawClient(daemon)
        #expect(client.errorName("Older", "Store") == nil)
        #expect(daemon.stop() == .status(0))
    }

    @Test func aPluginThatFailsACallLeavesTheDaemonConsistent() throws {
        let fixtures = try PluginFixture.directory([("libbgtaskd-mode-demo.so", Self.misbehaving)])
        defer { try? FileManager.default.removeItem(atPath: fixtures) }
        let daemon = try DaemonUnderTest(arguments: ["--plugin-dir", fixtures])
        let client = try RawClient(daemon)
        let task = try client.call("Manager", "BeginBackgroundTask") { try $0.append("kept") }.readUInt32()

        // Never answered by the plugin: the host answers for it, at once.
        #expect(client.errorName("Demo", "Ignore") == "org.freedesktop.DBus.Error.Failed")
        #expect(client.errorName("Demo", "Refuse") { try $0.append("x") } == "org.bgtaskd.BackgroundTasks1.Error.NotPermitted")
        // Called with the wrong arguments: sd-bus refuses before the plugin sees it.
        #expect(client.errorName("Demo", "Refuse") { try $0.append(UInt32(1)) } == "org.freedesktop.DBus.Error.InvalidArgs")

        // The core's state is untouched, and the daemon still serves.
        #expect(try daemon.property("Tasks").contains("\"kept\""))
        try client.call("Manager", "EndBackgroundTask") { try $0.append(task) }
        #expect(try daemon.property("Tasks") == "a(ussd) 0")
        #expect(daemon.stop() == .status(0))
    }
}
