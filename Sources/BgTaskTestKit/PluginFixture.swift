import Foundation

/// Mode plugins written in C for tests, compiled at test time against the
/// checked-in ABI header: good ones, broken ones, and ones that misbehave.
public enum PluginFixture {
    /// The ABI header's directory.
    public static let includeDirectory = BinaryLocator.packageRoot() + "/Sources/BgTaskPluginABI/include"

    /// The C source of a plugin. The descriptor is valid unless told
    /// otherwise; `start` runs as the body of the plugin's start function
    /// (with `api`, `host` and `plugin` in scope), `call` as the body of its
    /// call handler (with `call`, `interface`, `member`); `declarations` is C
    /// placed before the descriptor, `descriptorFields` more of its fields
    /// (`.config_keys = keys, .n_config_keys = 1,`).
    public static func source(
        name: String, major: String = "BGTASKD_PLUGIN_ABI_MAJOR", minor: String = "BGTASKD_PLUGIN_ABI_MINOR",
        version: String = "\"1.0.0\"", entry: String = "bgtaskd_plugin_entry", initFails: Bool = false,
        start: String = "", call: String = "", descriptorVersion: String = "BGTASKD_PLUGIN_DESCRIPTOR_VERSION",
        declarations: String = "", descriptorFields: String = ""
    ) -> String {
        """
        #include <stddef.h>
        #include <string.h>
        #include "bgtaskd_plugin.h"
        static const bgt_host_api *api;
        static bgt_host *host;
        static int plugin;
        static void *plugin_init(const bgt_host_api *a, bgt_host *h, char *error, size_t size) {
            api = a; host = h;
            if (\(initFails ? 1 : 0)) { strncpy(error, "the fixture refuses to start", size); return NULL; }
            return &plugin;
        }
        static int plugin_start(void *p, char *error, size_t size) {
            (void) p; (void) error; (void) size;
            \(start)
            return 0;
        }
        static void plugin_stop(void *p) { (void) p; }
        static void plugin_call(void *p, const char *interface, const char *member, bgt_call *call) {
            (void) p; (void) interface; (void) member; (void) call;
            \(call)
        }
        static void plugin_event(void *p, const bgt_event *event) { (void) p; (void) event; }
        \(declarations)
        static const bgt_plugin_descriptor descriptor = {
            .struct_version = \(descriptorVersion), .abi_major = \(major), .abi_minor = \(minor),
            .name = "\(name)", .version = \(version),
            .init = plugin_init, .start = plugin_start, .stop = plugin_stop,
            .handle_call = plugin_call, .event = plugin_event,
            \(descriptorFields)
        };
        const bgt_plugin_descriptor *\(entry)(void) { return &descriptor; }
        """
    }

    /// A fresh 0755 directory holding the given plugins, compiled.
    public static func directory(_ plugins: [(file: String, source: String)]) throws -> String {
        let directory = FileManager.default.temporaryDirectory.appendingPathComponent("bgtaskd-plugins-\(UUID())").path
        try FileManager.default.createDirectory(
            atPath: directory, withIntermediateDirectories: true, attributes: [.posixPermissions: 0o755])
        for plugin in plugins {
            let source = directory + "/" + plugin.file + ".c"
            try plugin.source.write(toFile: source, atomically: true, encoding: .utf8)
            let result = try CommandResult.run(
                "/usr/bin/cc", ["-shared", "-fPIC", "-Wall", "-Werror", "-I", includeDirectory, "-o", directory + "/" + plugin.file, source])
            guard result.succeeded else { throw TestKitError("cannot compile the fixture \(plugin.file): \(result.standardError)") }
            try FileManager.default.removeItem(atPath: source)
            chmod(directory + "/" + plugin.file, 0o755)
        }
        return directory
    }
}
