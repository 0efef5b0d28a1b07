// swift-tools-version: 6.0
import PackageDescription

/// One set of Swift settings for every Swift target.
let swiftSettings: [SwiftSetting] = [
    .enableUpcomingFeature("ExistentialAny"),
    .enableUpcomingFeature("InternalImportsByDefault"),
]

let package = Package(
    name: "bgtaskd",
    products: [
        .executable(name: "bgtaskd", targets: ["bgtaskd"]),
        .executable(name: "bgtaskctl", targets: ["bgtaskctl"]),
        .executable(name: "bgtaskd-sim", targets: ["bgtaskd-sim"]),
        .library(name: "BackgroundTasks", targets: ["BackgroundTasks"]),
        // Mode plugins: libbgtaskd-mode-<name>.so, loaded by the daemon at run time.
        .library(name: "bgtaskd-mode-fetch", type: .dynamic, targets: ["BgTaskModeFetch"]),
        .library(name: "bgtaskd-mode-remote-notification", type: .dynamic, targets: ["BgTaskModeRemoteNotifications"]),
        .library(name: "bgtaskd-mode-location", type: .dynamic, targets: ["BgTaskModeLocation"]),
        .library(name: "bgtaskd-mode-transfer", type: .dynamic, targets: ["BgTaskModeTransfers"]),
        // An example third-party plugin, deliberately not named as a mode: the
        // daemon loads it only once it is installed as libbgtaskd-mode-hello.so.
        .library(name: "HelloMode", type: .dynamic, targets: ["BgTaskModeHello"]),
    ],
    dependencies: [
        .package(url: "https://github.com/apple/swift-argument-parser", from: "1.5.0"),
        .package(url: "https://github.com/apple/swift-log", from: "1.6.0"),
        .package(url: "https://github.com/groue/GRDB.swift", from: "7.0.0"),
        // HTTP for background transfers: streaming bodies, ranges, our own retries.
        .package(url: "https://github.com/swift-server/async-http-client", from: "1.37.0"),
        // Its TLS errors, to tell a certificate that is not trusted (final) from a network failure (retried).
        .package(url: "https://github.com/apple/swift-nio-ssl.git", from: "2.30.0"),
    ],
    targets: [
        // sd-bus, sd-event and sd-daemon from Debian's libsystemd-dev.
        .systemLibrary(
            name: "CSystemd",
            pkgConfig: "libsystemd",
            providers: [.apt(["libsystemd-dev"])]
        ),
        // The few C helpers Swift cannot do without (vtable macros, pidfd, eventfd).
        .target(name: "CBgTaskShim", dependencies: ["CSystemd"]),
        // The fixed D-Bus names, shared by the daemon, the SDK and the CLI.
        .target(name: "BgTaskProtocol", swiftSettings: swiftSettings),
        // A thin Swift layer over sd-bus and sd-event, shared by the daemon, the SDK and the CLI.
        .target(
            name: "SDBus",
            dependencies: ["CSystemd", "CBgTaskShim", "BgTaskProtocol"],
            swiftSettings: swiftSettings
        ),
        // The engine: tasks, budgets, deadlines, wakes and suspension, driven by events and
        // an injected clock, returning actions. The daemon runs it.
        .target(
            name: "BgTaskCore",
            dependencies: ["BgTaskProtocol"],
            swiftSettings: swiftSettings
        ),
        // The fetch mode's domain: intervals, habits, the adaptive planner and its records.
        // Pure; linked by the fetch plugin, the simulator and the benches.
        .target(name: "BgTaskFetchCore", dependencies: ["BgTaskCore", "BgTaskProtocol"], swiftSettings: swiftSettings),
        // The remote-notification mode's domain: payloads, the inbox, the rate bucket and
        // its records. Pure; linked by the push plugin and the benches.
        .target(name: "BgTaskPushCore", dependencies: ["BgTaskProtocol"], swiftSettings: swiftSettings),
        // The location mode's domain: regions, crossings with hysteresis, significant
        // changes, the spatial index, its records. Pure; linked by the location plugin and the benches.
        .target(name: "BgTaskLocationCore", dependencies: ["BgTaskProtocol"], swiftSettings: swiftSettings),
        // The transfer mode's domain: transfers and their records, where files may
        // land, when discretionary work may run, retries. Pure; linked by the transfer plugin.
        .target(name: "BgTaskTransferCore", dependencies: ["BgTaskProtocol"], swiftSettings: swiftSettings),
        // The versioned C ABI between the daemon and its mode plugins (header only).
        .target(name: "BgTaskPluginABI"),
        // The small Swift layer that makes writing a mode plugin feel like Swift.
        .target(name: "BgTaskPluginKit", dependencies: ["BgTaskPluginABI", "BgTaskProtocol"], swiftSettings: swiftSettings),
        // The shell: D-Bus objects, caller identity, process control, configuration,
        // apps and launching, persistence, the plugin host.
        .target(
            name: "BgTaskDaemon",
            dependencies: [
                "BgTaskCore", "BgTaskProtocol", "SDBus", "CBgTaskShim", "BgTaskPluginABI",
                .product(name: "Logging", package: "swift-log"),
                .product(name: "ArgumentParser", package: "swift-argument-parser"),
                .product(name: "GRDB", package: "GRDB.swift"),
                .product(name: "GRDBSQLite", package: "GRDB.swift"),
            ],
            swiftSettings: swiftSettings
        ),
        // The fetch mode (docs/DESIGN.md §5).
        .target(
            name: "BgTaskModeFetch",
            dependencies: ["BgTaskPluginKit", "BgTaskFetchCore", "BgTaskProtocol"],
            path: "Plugins/Fetch",
            swiftSettings: swiftSettings
        ),
        .executableTarget(name: "bgtaskd", dependencies: ["BgTaskDaemon"], swiftSettings: swiftSettings),
        // The SDK apps link: a client of the D-Bus API only.
        .target(name: "BackgroundTasks", dependencies: ["BgTaskProtocol", "SDBus"], swiftSettings: swiftSettings),
        .executableTarget(
            name: "bgtaskctl",
            dependencies: ["BgTaskProtocol", "SDBus", .product(name: "ArgumentParser", package: "swift-argument-parser")],
            swiftSettings: swiftSettings
        ),
        // A scriptable SDK client: the app the integration tests launch and kill.
        .executableTarget(
            name: "bgtaskd-testapp",
            dependencies: ["BackgroundTasks", .product(name: "ArgumentParser", package: "swift-argument-parser")],
            swiftSettings: swiftSettings
        ),
        // The remote-notification mode (docs/DESIGN.md §5).
        .target(
            name: "BgTaskModeRemoteNotifications",
            dependencies: ["BgTaskPluginKit", "BgTaskPushCore", "BgTaskProtocol"],
            path: "Plugins/RemoteNotifications",
            swiftSettings: swiftSettings
        ),
        // The location mode (docs/DESIGN.md §5), with GeoClue2 as its source.
        .target(
            name: "BgTaskModeLocation",
            dependencies: ["BgTaskPluginKit", "BgTaskLocationCore", "BgTaskProtocol"],
            path: "Plugins/Location",
            swiftSettings: swiftSettings
        ),
        // The transfer mode (docs/DESIGN.md §5): downloads and uploads that outlive the app.
        .target(
            name: "BgTaskModeTransfers",
            dependencies: [
                "BgTaskPluginKit", "BgTaskTransferCore", "BgTaskProtocol",
                .product(name: "AsyncHTTPClient", package: "async-http-client"),
                .product(name: "NIOSSL", package: "swift-nio-ssl"),
            ],
            path: "Plugins/Transfers",
            swiftSettings: swiftSettings
        ),
        // An example third-party mode plugin: the ABI header and PluginKit, nothing else.
        .target(name: "BgTaskModeHello", dependencies: ["BgTaskPluginKit"], path: "Examples/HelloMode", swiftSettings: swiftSettings),
        // An example app: fetches a file or a local HTTP URL when bgtaskd wakes it.
        .executableTarget(
            name: "bgtaskd-example-fetch",
            dependencies: ["BackgroundTasks", .product(name: "ArgumentParser", package: "swift-argument-parser")],
            path: "Examples/FetchExample",
            swiftSettings: swiftSettings
        ),
        // An example app: says when the device enters or leaves the places it is given.
        .executableTarget(
            name: "bgtaskd-example-location",
            dependencies: ["BackgroundTasks", .product(name: "ArgumentParser", package: "swift-argument-parser")],
            path: "Examples/LocationExample",
            swiftSettings: swiftSettings
        ),
        // The fetch-scheduling simulator: replays traces through the core's planners.
        .target(
            name: "BgTaskSimulator",
            dependencies: ["BgTaskFetchCore", "BgTaskCore", "BgTaskProtocol"],
            swiftSettings: swiftSettings
        ),
        .executableTarget(
            name: "bgtaskd-sim",
            dependencies: ["BgTaskSimulator", "BgTaskFetchCore", "BgTaskCore", "BgTaskProtocol", .product(name: "ArgumentParser", package: "swift-argument-parser")],
            swiftSettings: swiftSettings
        ),
        // How the tools and tests start their helper processes (bus, daemon, mocks).
        .target(name: "ServiceSpawn", dependencies: ["CBgTaskShim"], swiftSettings: swiftSettings),
        // Benchmarks that print the figures the README reports (run in release mode).
        .executableTarget(
            name: "bgtaskd-bench",
            dependencies: [
                "BgTaskCore", "BgTaskFetchCore", "BgTaskPushCore", "BgTaskLocationCore", "BgTaskProtocol", "SDBus", "CBgTaskShim", "ServiceSpawn",
                .product(name: "ArgumentParser", package: "swift-argument-parser"),
            ],
            swiftSettings: swiftSettings
        ),
        // A D-Bus fuzzer: typed, extreme and random calls derived from the introspection XML,
        // fired at a real bgtaskd on a private bus; finds crashes, hangs and leaks.
        .executableTarget(
            name: "bgtaskd-fuzz",
            dependencies: [
                "BgTaskCore", "BgTaskProtocol", "SDBus", "CBgTaskShim", "ServiceSpawn",
                .product(name: "ArgumentParser", package: "swift-argument-parser"),
            ],
            swiftSettings: swiftSettings
        ),
        // Test support: the manual clock, a private bus, the daemon under test.
        .target(name: "BgTaskTestKit", dependencies: ["BgTaskCore", "CBgTaskShim", "ServiceSpawn"], swiftSettings: swiftSettings),
        .testTarget(
            name: "BgTaskCoreTests",
            dependencies: ["BgTaskCore", "BgTaskTestKit"],
            swiftSettings: swiftSettings
        ),
        .testTarget(
            name: "BgTaskLocationCoreTests", dependencies: ["BgTaskLocationCore", "BgTaskCore", "BgTaskProtocol"], swiftSettings: swiftSettings),
        .testTarget(name: "BgTaskTransferCoreTests", dependencies: ["BgTaskTransferCore"], swiftSettings: swiftSettings),
        .testTarget(name: "BgTaskProtocolTests", dependencies: ["BgTaskProtocol"], swiftSettings: swiftSettings),
        .testTarget(
            name: "BgTaskFetchCoreTests",
            dependencies: ["BgTaskFetchCore", "BgTaskCore", "BgTaskProtocol"],
            swiftSettings: swiftSettings
        ),
        .testTarget(
            name: "BgTaskPushCoreTests",
            dependencies: ["BgTaskPushCore", "BgTaskProtocol"],
            swiftSettings: swiftSettings
        ),
        .testTarget(
            name: "BgTaskSimulatorTests",
            dependencies: ["BgTaskSimulator", "BgTaskFetchCore", "BgTaskCore"],
            swiftSettings: swiftSettings
        ),
        .testTarget(
            name: "BgTaskDaemonTests",
            dependencies: [
                "BgTaskDaemon", "BgTaskCore", "BgTaskPluginKit", "BgTaskTestKit", "ServiceSpawn", .product(name: "Logging", package: "swift-log"),
                .product(name: "GRDB", package: "GRDB.swift"),
            ],
            swiftSettings: swiftSettings
        ),
        // Start the built daemon on a private dbus-daemon; run after `swift build`.
        .testTarget(
            name: "IntegrationTests",
            dependencies: ["BgTaskTestKit", "BgTaskCore", "BackgroundTasks", "BgTaskProtocol", "SDBus"],
            // Scripts the tests run by path (a mock distributor, an HTTP server), not resources.
            exclude: ["Fixtures"],
            swiftSettings: swiftSettings
        ),
    ]
)
