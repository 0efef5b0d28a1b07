import Foundation

/// Where the cgroup v2 hierarchy is mounted and which cgroup of it the daemon
/// is in: the parent of the cgroups the launcher makes for apps (docs/DESIGN.md §3).
///
/// The parsers are pure and unit-tested; ``current()`` reads `/proc/self`.
struct CgroupHierarchy: Sendable, Equatable {
    /// The cgroup2 mount point, such as `/sys/fs/cgroup` or `/sys/fs/cgroup/unified`.
    var mountPoint: String
    /// The daemon's cgroup inside the hierarchy, from `/proc/self/cgroup`: `/` or `/a/b`.
    var ownCgroup: String
    /// The part of the hierarchy the mount shows (the mountinfo root field), `/` normally.
    var mountRoot: String = "/"

    /// The daemon's cgroup directory, where app cgroups are made.
    var ownDirectory: String { directory(of: ownCgroup) ?? mountPoint }

    /// The directory of `cgroup` (a path as `/proc/PID/cgroup` shows it), or
    /// nil when the mount does not show that part of the hierarchy.
    func directory(of cgroup: String) -> String? {
        var relative = Substring(cgroup)
        if mountRoot != "/" {
            guard relative == mountRoot || relative.hasPrefix(mountRoot + "/") else { return nil }
            relative = relative.dropFirst(mountRoot.count)
        }
        while relative.hasSuffix("/") { relative = relative.dropLast() }
        return mountPoint + relative
    }

    /// The daemon's own place, or nil when there is no cgroup v2 hierarchy.
    static func current() -> CgroupHierarchy? {
        guard let mountinfo = try? String(contentsOfFile: "/proc/self/mountinfo", encoding: .utf8),
            let cgroup = try? String(contentsOfFile: "/proc/self/cgroup", encoding: .utf8)
        else { return nil }
        return parse(mountinfo: mountinfo, procCgroup: cgroup)
    }

    /// Combines a `/proc/PID/mountinfo` text and a `/proc/PID/cgroup` text.
    static func parse(mountinfo: String, procCgroup: String) -> CgroupHierarchy? {
        guard let own = unifiedPath(fromProcCgroup: procCgroup) else { return nil }
        let mounts = cgroup2Mounts(fromMountinfo: mountinfo)
        // Prefer a mount that shows the daemon's own cgroup.
        let usable = mounts.first { $0.root == "/" || own == $0.root || own.hasPrefix($0.root + "/") }
        guard let mount = usable else { return nil }
        return CgroupHierarchy(mountPoint: mount.point, ownCgroup: own, mountRoot: mount.root)
    }

    /// The path of the `0::` line (the unified hierarchy), nil if there is none
    /// or the cgroup was removed.
    static func unifiedPath(fromProcCgroup text: String) -> String? {
        for line in text.split(separator: "\n") where line.hasPrefix("0::") {
            let path = String(line.dropFirst(3))
            guard path.hasPrefix("/"), !path.hasSuffix(" (deleted)") else { return nil }
            return path
        }
        return nil
    }

    /// Every cgroup2 mount, in mountinfo order, as (mount point, root).
    static func cgroup2Mounts(fromMountinfo text: String) -> [(point: String, root: String)] {
        var mounts: [(point: String, root: String)] = []
        for line in text.split(separator: "\n") {
            // "36 25 0:31 / /sys/fs/cgroup rw,nosuid - cgroup2 cgroup2 rw": the
            // optional fields before " - " vary, the file system type follows it.
            let fields = line.split(separator: " ", omittingEmptySubsequences: false)
            guard fields.count >= 9, let separator = fields[6...].firstIndex(of: "-"),
                separator + 1 < fields.count, fields[separator + 1] == "cgroup2"
            else { continue }
            mounts.append((point: unescapeMountinfo(fields[4]), root: unescapeMountinfo(fields[3])))
        }
        return mounts
    }

    /// Undoes mountinfo's octal escapes (`\040` for a space).
    static func unescapeMountinfo(_ field: Substring) -> String {
        EscapedText.decode(field, marker: "\\", digits: 3, radix: 8)
    }
}
