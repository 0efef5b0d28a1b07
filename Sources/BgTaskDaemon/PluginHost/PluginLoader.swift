import BgTaskPluginABI
import BgTaskProtocol
import Foundation
import Logging

// Implementation notes
//
// The loader follows the habits of PipeWire and GStreamer: one exported entry
// symbol per plugin, a descriptor that starts with its versions, acceptance of
// abi_major == host && abi_minor <= host, and a log line of its own for every
// refusal. Only files named libbgtaskd-mode-<name>.so are considered, and only
// from directories and files no other user can write (a plugin runs with the
// daemon's rights). A refused plugin never stops the daemon.
//
// A library, once opened, is never closed again: a Swift library registers its
// type metadata with the runtime when loaded, and unloading it would leave the
// runtime with dangling pointers.

/// Finds, checks and opens mode plugins.
struct PluginLoader {
    /// Why a plugin file was refused.
    enum Refusal: Error, Equatable, CustomStringConvertible {
        case insecure(String)
        case notAPlugin(String)
        case incompatibleABI(major: UInt16, minor: UInt16)
        case badMetadata(String)
        case duplicate(String)
        case sectionTaken(section: String, owner: String)

        var description: String {
            switch self {
            case .insecure(let why): "insecure: \(why)"
            case .notAPlugin(let why): "not a plugin: \(why)"
            case .incompatibleABI(let major, let minor):
                "incompatible ABI \(major).\(minor) (this bgtaskd speaks \(BGTASKD_PLUGIN_ABI_MAJOR).\(BGTASKD_PLUGIN_ABI_MINOR))"
            case .badMetadata(let why): "bad metadata: \(why)"
            case .duplicate(let earlier): "a plugin of the same mode was already loaded from \(earlier)"
            case .sectionTaken(let section, let owner): "its configuration section [\(section)] belongs to \(owner)"
            }
        }
    }

    /// A plugin file that passed every check, not yet initialised. (Its
    /// descriptor is the library's constant, and the library is never closed.)
    struct Candidate: @unchecked Sendable {
        let path: String
        let descriptor: UnsafePointer<bgt_plugin_descriptor>
        let name: String
        let version: String
        /// The configuration keys it declares (descriptor version 3).
        let configKeys: [Configuration.Key]
        /// The error names it declares it answers with (descriptor version 3).
        let errorNames: Set<String>
    }

    /// The sections only the engine may have.
    static let engineSections = Set(Configuration.engineKeys.map { String($0.section) })

    static let prefix = "libbgtaskd-mode-"
    static let suffix = ".so"

    let logger: Logger

    /// The plugin directories to use when none are given: the installed
    /// `<prefix>/lib/bgtaskd/plugins` next to the executable, else the
    /// executable's own directory (a build tree).
    static func defaultDirectories() -> [String] {
        let executable = (try? FileManager.default.destinationOfSymbolicLink(atPath: "/proc/self/exe")) ?? CommandLine.arguments[0]
        let binDirectory = URL(fileURLWithPath: executable).deletingLastPathComponent()
        let installed = binDirectory.deletingLastPathComponent().appendingPathComponent("lib/bgtaskd/plugins").path
        var isDirectory: ObjCBool = false
        if FileManager.default.fileExists(atPath: installed, isDirectory: &isDirectory), isDirectory.boolValue {
            return [installed]
        }
        return [binDirectory.path]
    }

    /// `directories`, or the default ones when it is empty.
    static func directories(_ directories: [String]) -> [String] {
        directories.isEmpty ? defaultDirectories() : directories
    }

    /// Every acceptable plugin in `directories` (earlier directories win for the same mode).
    func candidates(in directories: [String]) -> [Candidate] {
        var found: [Candidate] = []
        var seen: Set<String> = []
        for directory in directories {
            // Named twice, its plugins would be refused as duplicates of themselves.
            guard seen.insert(URL(fileURLWithPath: directory).standardizedFileURL.path).inserted else { continue }
            if let problem = Self.writableByOthers(directory) {
                logger.error("ignoring plugin directory \(directory): \(problem)")
                continue
            }
            let files: [String]
            do {
                files = try FileManager.default.contentsOfDirectory(atPath: directory)
            } catch {
                logger.error("ignoring plugin directory \(directory): \(DaemonCommand.why(error))")
                continue
            }
            for file in files.sorted() where file.hasPrefix(Self.prefix) && file.hasSuffix(Self.suffix) {
                let path = directory + "/" + file
                do {
                    let candidate = try open(path)
                    if let earlier = found.first(where: { $0.name == candidate.name }) {
                        throw Refusal.duplicate(earlier.path)
                    }
                    for key in candidate.configKeys {
                        if let owner = found.first(where: { $0.configKeys.contains { $0.section == key.section } }) {
                            throw Refusal.sectionTaken(section: String(key.section), owner: "the \(owner.name) plugin")
                        }
                    }
                    found.append(candidate)
                } catch let refusal as Refusal {
                    logger.error("refusing plugin \(path): \(refusal)")
                } catch {
                    logger.error("refusing plugin \(path): \(error)")
                }
            }
        }
        return found
    }

    /// Checks one file and opens it; throws why it is refused.
    func open(_ path: String) throws(Refusal) -> Candidate {
        if let problem = Self.writableByOthers(path) { throw .insecure(problem) }
        guard let handle = dlopen(path, RTLD_NOW | RTLD_LOCAL) else {
            throw .notAPlugin(dlerror().map { String(cString: $0) } ?? "dlopen failed")
        }
        guard let symbol = dlsym(handle, BGTASKD_PLUGIN_ENTRY_SYMBOL) else {
            throw .notAPlugin("it has no \(BGTASKD_PLUGIN_ENTRY_SYMBOL) symbol")
        }
        typealias Entry = @convention(c) () -> UnsafePointer<bgt_plugin_descriptor>?
        guard let descriptor = unsafeBitCast(symbol, to: Entry.self)() else {
            throw .badMetadata("\(BGTASKD_PLUGIN_ENTRY_SYMBOL) returned no descriptor")
        }
        let d = descriptor.pointee
        guard d.struct_version >= 1 else { throw .badMetadata("descriptor version \(d.struct_version)") }
        guard d.abi_major == BGTASKD_PLUGIN_ABI_MAJOR, d.abi_minor <= BGTASKD_PLUGIN_ABI_MINOR else {
            throw .incompatibleABI(major: d.abi_major, minor: d.abi_minor)
        }
        let name = d.name.map { String(cString: $0) } ?? ""
        let version = d.version.map { String(cString: $0) } ?? ""
        guard !name.isEmpty else { throw .badMetadata("empty name") }
        guard !version.isEmpty else { throw .badMetadata("empty version") }
        let fileMode = String(URL(fileURLWithPath: path).lastPathComponent.dropFirst(Self.prefix.count).dropLast(Self.suffix.count))
        guard name == fileMode else { throw .badMetadata("its name '\(name)' does not match its file name") }
        // A mode is named in X-BgTaskd-Modes, a list split at ';': lower-case letters, digits and dashes.
        guard Self.isModeName(name) else {
            throw .badMetadata("its name '\(name)' is not a mode name (lower-case letters, digits and '-', starting with a letter)")
        }
        guard d.`init` != nil, d.start != nil, d.stop != nil, d.handle_call != nil, d.event != nil else {
            throw .badMetadata("a required function (init, start, stop, handle_call, event) is missing")
        }
        let (configKeys, errorNames) = try declarations(of: d, plugin: name)
        return Candidate(
            path: path, descriptor: descriptor, name: name, version: version, configKeys: configKeys, errorNames: errorNames)
    }

    /// The configuration keys and error names a descriptor of version 3 or later declares.
    private func declarations(
        of d: bgt_plugin_descriptor, plugin: String
    ) throws(Refusal) -> ([Configuration.Key], Set<String>) {
        guard d.struct_version >= 3 else { return ([], []) }
        func text(_ pointer: UnsafePointer<CChar>?) -> String { pointer.map { String(cString: $0) } ?? "" }
        // Shown by `bgtaskd --help` as they are: a line break or an escape sequence would forge what it prints.
        func shown(_ pointer: UnsafePointer<CChar>?) -> String { LogText.escaped(text(pointer)) }
        var keys: [Configuration.Key] = []
        if d.n_config_keys > 0 {
            guard let declared = d.config_keys, d.n_config_keys <= 1000 else { throw .badMetadata("config_keys is NULL or too long") }
            for index in 0..<d.n_config_keys {
                let c = declared[index]
                let kind: Configuration.Key.Kind
                switch Int(c.type) {
                case BGT_CONFIG_NUMBER:
                    kind = .number(minimum: c.minimum, maximum: c.maximum, positive: c.positive != 0, unit: shown(c.unit))
                case BGT_CONFIG_INTEGER:
                    guard let minimum = Int(exactly: c.minimum.rounded(.up)), let maximum = Int(exactly: c.maximum.rounded(.down)) else {
                        throw .badMetadata("configuration key \(text(c.name)) has the limits \(c.minimum)...\(c.maximum)")
                    }
                    kind = .integer(minimum: minimum, maximum: maximum)
                default:
                    throw .badMetadata("configuration key \(text(c.name)) has the unknown type \(c.type)")
                }
                let key: Configuration.Key
                do {
                    key = try Configuration.Key(
                        plugin: plugin, name: text(c.name), kind: kind, defaultValue: text(c.default_value), summary: shown(c.help))
                } catch {
                    throw .badMetadata(error.reason)
                }
                if Self.engineSections.contains(String(key.section)) {
                    throw .sectionTaken(section: String(key.section), owner: "the daemon")
                }
                // A stock mode's section is its own, whichever plugin is found first.
                if let mode = BgTaskMode(configSection: String(key.section)), mode.rawValue != plugin {
                    throw .sectionTaken(section: String(key.section), owner: "the \(mode.rawValue) mode")
                }
                if keys.contains(where: { $0.name == key.name }) { throw .badMetadata("configuration key \(key.name) is declared twice") }
                keys.append(key)
            }
        }
        var errors: Set<String> = []
        if d.n_error_names > 0 {
            guard let declared = d.error_names, d.n_error_names <= 1000 else { throw .badMetadata("error_names is NULL or too long") }
            for index in 0..<d.n_error_names {
                let name = text(declared[index].name)
                guard Self.isErrorName(name) else { throw .badMetadata("'\(name)' is not a D-Bus error name") }
                errors.insert(name)
            }
        }
        return (keys, errors)
    }

    /// Whether `name` can be a mode: `[a-z][a-z0-9-]*`, at most 64 bytes.
    static func isModeName(_ name: String) -> Bool {
        guard let first = name.utf8.first, (0x61...0x7A).contains(first), name.utf8.count <= 64 else { return false }
        return name.utf8.allSatisfy { (0x61...0x7A).contains($0) || (0x30...0x39).contains($0) || $0 == 0x2D }
    }

    /// Whether `name` is a valid D-Bus error name (the rules of interface names).
    static func isErrorName(_ name: String) -> Bool {
        let elements = name.split(separator: ".", omittingEmptySubsequences: false)
        guard name.utf8.count <= 255, elements.count >= 2 else { return false }
        return elements.allSatisfy { element in
            guard let first = element.unicodeScalars.first, !(("0"..."9").contains(first)) else { return false }
            return element.unicodeScalars.allSatisfy { $0.isASCII && ($0.properties.isAlphabetic || ("0"..."9").contains($0) || $0 == "_") }
        }
    }

    /// Why `path` could be changed by another user, or nil if it cannot.
    static func writableByOthers(_ path: String) -> String? {
        var info = stat()
        guard stat(path, &info) == 0 else { return "cannot stat it: \(String(cString: strerror(errno)))" }
        if info.st_uid != 0 && info.st_uid != geteuid() { return "it belongs to uid \(info.st_uid)" }
        if info.st_mode & (S_IWGRP | S_IWOTH) != 0 {
            // A umask of 002 (Fedora, RHEL) leaves a build tree so: say how to load it.
            return "it is writable by its group or by everyone (mode \(String(info.st_mode & 0o7777, radix: 8))); "
                + "plugins load only from what only their owner can change: chmod go-w \(ShellWord.quoted(path))"
        }
        // Whoever may rename entries in a directory on the way (a link's
        // target's included) may put another file in its place.
        guard let resolved = realpath(path, nil) else { return "cannot resolve it: \(String(cString: strerror(errno)))" }
        var directory = URL(fileURLWithPath: String(cString: resolved)).deletingLastPathComponent().path
        free(resolved)
        while true {
            guard stat(directory, &info) == 0 else { return "cannot stat \(directory): \(String(cString: strerror(errno)))" }
            if info.st_uid != 0 && info.st_uid != geteuid() { return "the directory \(directory) on its way belongs to uid \(info.st_uid)" }
            if info.st_mode & (S_IWGRP | S_IWOTH) != 0, info.st_mode & S_ISVTX == 0 {
                return "the directory \(directory) on its way is writable by its group or by everyone (mode \(String(info.st_mode & 0o7777, radix: 8))), "
                    + "so another user could put a file in its place: chmod go-w \(ShellWord.quoted(directory))"
            }
            if directory == "/" { return nil }
            directory = URL(fileURLWithPath: directory).deletingLastPathComponent().path
        }
    }
}
