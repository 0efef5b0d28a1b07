import BgTaskPluginABI
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

        var description: String {
            switch self {
            case .insecure(let why): "insecure: \(why)"
            case .notAPlugin(let why): "not a plugin: \(why)"
            case .incompatibleABI(let major, let minor):
                "incompatible ABI \(major).\(minor) (this bgtaskd speaks \(BGTASKD_PLUGIN_ABI_MAJOR).\(BGTASKD_PLUGIN_ABI_MINOR))"
            case .badMetadata(let why): "bad metadata: \(why)"
            case .duplicate(let earlier): "a plugin of the same mode was already loaded from \(earlier)"
            }
        }
    }

    /// A plugin file that passed every check, not yet initialised.
    struct Candidate {
        let path: String
        let descriptor: UnsafePointer<bgt_plugin_descriptor>
        let name: String
        let version: String
    }

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

    /// Every acceptable plugin in `directories` (earlier directories win for the same mode).
    func candidates(in directories: [String]) -> [Candidate] {
        var found: [Candidate] = []
        for directory in directories {
            if let problem = Self.writableByOthers(directory) {
                logger.error("ignoring plugin directory \(directory): \(problem)")
                continue
            }
            let files = (try? FileManager.default.contentsOfDirectory(atPath: directory)) ?? []
            for file in files.sorted() where file.hasPrefix(Self.prefix) && file.hasSuffix(Self.suffix) {
                let path = directory + "/" + file
                do {
                    let candidate = try open(path)
                    if let earlier = found.first(where: { $0.name == candidate.name }) {
                        throw Refusal.duplicate(earlier.path)
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
        guard d.`init` != nil, d.start != nil, d.stop != nil, d.handle_call != nil, d.event != nil else {
            throw .badMetadata("a required function (init, start, stop, handle_call, event) is missing")
        }
        return Candidate(path: path, descriptor: descriptor, name: name, version: version)
    }

    /// Why `path` could be changed by another user, or nil if it cannot.
    static func writableByOthers(_ path: String) -> String? {
        var info = stat()
        guard stat(path, &info) == 0 else { return "cannot stat it: \(String(cString: strerror(errno)))" }
        if info.st_uid != 0 && info.st_uid != geteuid() { return "it belongs to uid \(info.st_uid)" }
        if info.st_mode & (S_IWGRP | S_IWOTH) != 0 {
            return "it is writable by its group or by everyone (mode \(String(info.st_mode & 0o7777, radix: 8)))"
        }
        return nil
    }
}
