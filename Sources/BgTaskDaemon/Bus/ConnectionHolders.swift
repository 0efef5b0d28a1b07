import CBgTaskShim
import Glibc

// Implementation notes
//
// A bus connection is a unix socket, and a process that forks hands it to
// its child: if the parent then exits, the connection, its tasks and its app
// live on in the child, while the pid the bus reported (and the pidfd the
// daemon holds) are the dead parent's. dbus-daemon keeps reporting that pid.
//
// So when a caller is identified, the daemon notes the inodes of the
// caller's sockets (/proc/PID/fd). When it must signal a caller whose process
// is gone, it keeps those that are still connections to its own bus (their
// peer, per NETLINK_SOCK_DIAG, is a socket named like the one its own
// connection reaches) and signals the processes of the same user that hold
// one of them now (/proc/*/fd). Only a process that holds the very socket
// can be reached this way: the connection's current peer process. Three
// kinds of holder are not that peer and are never signalled:
//   - the bus daemon, which holds a socket a client sent in a message (a
//     unix fd) until the recipient reads it;
//   - a process the gone one did not fork: a socket can be handed to any
//     process in a message, and a process that takes it in is no heir. An
//     heir is in the gone process's process group (noted when it was
//     identified, as is its start time) and started no earlier than it;
//   - when the gone process had more than one connection to the bus that
//     such processes hold, one that holds only some of them: which of them
//     is the one that overstayed cannot be told from outside, so only
//     processes that hold every one of them (a child that inherited them
//     all) are sure to hold it.

/// Finds the processes that hold a client's bus connection now.
enum ConnectionHolders {
    /// What tells a process's children from strangers: its process group
    /// and its start time (clock ticks after boot), from /proc/PID/stat.
    struct Lineage: Equatable {
        var processGroup: Int32
        var startTime: UInt64
    }

    /// The lineage of process `pid`, nil when /proc cannot tell it.
    static func lineage(of pid: Int32) -> Lineage? {
        guard let file = fopen("/proc/\(pid)/stat", "r") else { return nil }
        defer { fclose(file) }
        var buffer = [CChar](repeating: 0, count: 1024)
        guard fgets(&buffer, Int32(buffer.count), file) != nil else { return nil }
        return lineage(stat: String(cString: buffer))
    }

    /// Parses a /proc/PID/stat line: the fields after the command (which may
    /// hold spaces and parentheses) are state, ppid, pgrp, … starttime (22nd).
    static func lineage(stat line: String) -> Lineage? {
        guard let close = line.lastIndex(of: ")") else { return nil }
        let fields = line[line.index(after: close)...].split(separator: " ", omittingEmptySubsequences: true)
        // fields[0] is field 3 (state): pgrp is field 5, starttime field 22.
        guard fields.count > 19, let group = Int32(fields[2]), let start = UInt64(fields[19]) else { return nil }
        return Lineage(processGroup: group, startTime: start)
    }

    /// The inodes of the sockets process `pid` has open (at most `limit`).
    static func socketInodes(of pid: Int32, limit: Int = 4096) -> [UInt64] {
        guard let directory = opendir("/proc/\(pid)/fd") else { return [] }
        defer { closedir(directory) }
        var inodes: [UInt64] = []
        var link = [CChar](repeating: 0, count: 64)
        while inodes.count < limit, let entry = readdir(directory) {
            let name = withUnsafeBytes(of: entry.pointee.d_name) { String(cString: $0.bindMemory(to: CChar.self).baseAddress!) }
            guard name.first?.isNumber == true else { continue }
            let n = readlink("/proc/\(pid)/fd/\(name)", &link, link.count - 1)
            guard n > 8 else { continue }
            let text = String(decoding: link[..<n].map { UInt8(bitPattern: $0) }, as: UTF8.self)
            if let inode = socketInode(text) { inodes.append(inode) }
        }
        return inodes
    }

    /// `socket:[12345]` → 12345.
    static func socketInode(_ link: String) -> UInt64? {
        guard link.hasPrefix("socket:["), link.hasSuffix("]") else { return nil }
        return UInt64(link.dropFirst(8).dropLast())
    }

    /// The name of the socket a connection of ours (by fd) reaches: the bus's
    /// listening address as the kernel knows it. nil when sock_diag is not
    /// available.
    static func serverName(ofConnection fd: Int32) -> String? {
        var status = stat()
        guard fstat(fd, &status) == 0, let peer = info(UInt64(status.st_ino))?.peer, peer != 0 else { return nil }
        return info(peer).flatMap { $0.name.isEmpty ? nil : $0.name }
    }

    /// Which of `inodes` are still connections to the server socket named `server`.
    static func connections(among inodes: [UInt64], to server: String) -> [UInt64] {
        inodes.filter { inode in
            guard let peer = info(inode)?.peer, peer != 0 else { return false }
            return info(peer)?.name == server
        }
    }

    /// The processes of `uid` that hold one of `inodes` open now.
    static func processes(holding inodes: Set<UInt64>, uid: uid_t) -> [Int32] {
        guard !inodes.isEmpty, let proc = opendir("/proc") else { return [] }
        defer { closedir(proc) }
        var holders: [Int32] = []
        while let entry = readdir(proc) {
            let name = withUnsafeBytes(of: entry.pointee.d_name) { String(cString: $0.bindMemory(to: CChar.self).baseAddress!) }
            guard let pid = Int32(name) else { continue }
            var status = stat()
            guard stat("/proc/\(pid)", &status) == 0, status.st_uid == uid else { continue }
            if socketInodes(of: pid).contains(where: inodes.contains) { holders.append(pid) }
        }
        return holders
    }

    private static func info(_ inode: UInt64) -> (peer: UInt64, name: String)? {
        var peer: UInt64 = 0
        var name = [CChar](repeating: 0, count: 256)
        guard bgt_unix_socket_info(inode, &peer, &name, name.count) == 0 else { return nil }
        let bytes = name.prefix { $0 != 0 }.map { UInt8(bitPattern: $0) }
        return (peer, String(decoding: bytes, as: UTF8.self))
    }
}
