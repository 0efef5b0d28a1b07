import BgTaskCore
import CBgTaskShim
import Glibc
import Logging
import SDBus

/// The applications bgtaskd knows: the desktop entries in the XDG data
/// directories (docs/DESIGN.md §3), kept up to date while the daemon runs.
///
/// Implementation notes:
///
/// - Ids and precedence follow the Desktop Entry Specification: a file's id is
///   its path below an `applications` directory with `/` turned into `-` and
///   `.desktop` dropped (`applications/kde/foo.desktop` is `kde-foo`); the
///   first directory that has a file of an id wins, even when that file is
///   `Hidden=true` (that is how a user deletes a system app) or is not a valid
///   application (then the id is absent). Ids that are not valid ``AppID``s
///   are skipped. Names starting with `.` are never looked at: no valid id
///   can come from them.
/// - Files are read with plain POSIX calls, one `open`/`read` each; anything
///   that is not a regular file, or is larger than 1 MiB, is skipped, so a
///   FIFO or a huge file cannot stall the loop. Symlinks are followed, with
///   each directory walked at most once.
/// - One inotify descriptor, watched by the loop, covers every applications
///   directory and its subdirectories. A directory that does not exist yet is
///   awaited through a watch on its nearest existing ancestor that only
///   reacts to the next name on the way down. Watches are (re)made while
///   scanning, each before its directory is read, so no change can slip
///   between the scan and the watch.
/// - Events about `.desktop` files, directories and the watched directories
///   themselves (re)arm one timer: a reload runs when no change came for the
///   debounce interval (200 ms), and at the latest ten intervals after the
///   first change, so a steady stream of writes cannot postpone it forever.
///   ``onChange`` runs after a reload only if the usable entries changed.
/// - An id asked for and not found while a change waits for its reload (or
///   sits unread on the inotify descriptor) reloads at once: an entry
///   installed a moment before a call is never answered "unknown" for the
///   debounce's sake. ``onChange`` for that reload runs from the loop, not
///   inside the caller.
/// - If inotify cannot be had (the per-user instance or watch limits), the
///   registry logs a warning and works from its last scan.
///
/// Confined to the loop's thread: no locks.
final class AppRegistry {
    /// The `applications` directories of the XDG base directory spec, most
    /// important first: `$XDG_DATA_HOME` (default `$HOME/.local/share`), then
    /// each of `$XDG_DATA_DIRS` (default `/usr/local/share:/usr/share`).
    /// Relative paths are ignored, as the spec asks; repeats are dropped.
    static func dataDirectories(environment: [String: String]) -> [String] {
        var bases: [String] = []
        // A relative XDG_DATA_HOME is invalid: the default stands in for it, as
        // it does for the tools that install entries (install-examples).
        if let home = environment["XDG_DATA_HOME"], home.hasPrefix("/") {
            bases.append(home)
        } else if let home = environment["HOME"], !home.isEmpty {
            bases.append(home + "/.local/share")
        }
        let dirs = environment["XDG_DATA_DIRS"].flatMap { $0.isEmpty ? nil : $0 } ?? "/usr/local/share:/usr/share"
        bases += dirs.split(separator: ":").map(String.init)
        var result: [String] = []
        for base in bases where base.hasPrefix("/") {
            var trimmed = Substring(base)
            while trimmed.count > 1, trimmed.hasSuffix("/") { trimmed = trimmed.dropLast() }
            let directory = (trimmed == "/" ? "" : String(trimmed)) + "/applications"
            if !result.contains(directory) { result.append(directory) }
        }
        return result
    }

    /// The desktop-file id of a file at `relativePath` below an applications
    /// directory (`kde/foo.desktop` → `kde-foo`); nil when it is not a `.desktop` file.
    static func desktopFileID(relativePath: String) -> String? {
        guard relativePath.utf8.count > 8, relativePath.utf8.suffix(8).elementsEqual(".desktop".utf8) else { return nil }
        var bytes = Array(relativePath.utf8.dropLast(8))
        for index in bytes.indices where bytes[index] == UInt8(ascii: "/") { bytes[index] = UInt8(ascii: "-") }
        return String(decoding: bytes, as: UTF8.self)
    }

    /// Called on the loop after a reload that changed ``entries`` (not after the scan in ``start()``).
    var onChange: () -> Void = {}

    /// The usable entries (not hidden), sorted by id.
    private(set) var entries: [DesktopEntry] = []

    /// How many scans ran, the first one included (for tests and diagnostics).
    private(set) var reloadCount = 0

    private let directories: [String]
    private let loop: EventLoop
    private let logger: Logger
    private let debounceMicroseconds: UInt64
    /// The winning entry of every id, hidden ones included.
    private var winners: [AppID: DesktopEntry] = [:]
    private var started = false
    /// A reload done for a lookup found changes that ``onChange`` has not yet been told of.
    private var changeNotTold = false

    private var inotifyFD: Int32 = -1
    /// Where inotify events are read into: kept, since every lookup that misses reads (most find nothing).
    private var eventBuffer = [UInt8](repeating: 0, count: 16 * 1024)
    private var inotifySource: EventSource?
    private var watches: [Int32: Watch] = [:]
    private var warnedAboutWatchLimit = false
    private var reloadTimer: SDBus.Timer?
    private var firstPendingChange: UInt64?

    /// What one inotify watch is for.
    private struct Watch {
        /// An applications directory or one below it: `.desktop` files and subdirectories matter.
        var isTree = false
        /// Names that, appearing here, bring a missing applications directory closer.
        var awaited: Set<String> = []
    }

    /// A directory's identity, so that symlink loops are walked once.
    private struct DirectoryKey: Hashable {
        var device: UInt64
        var inode: UInt64
    }

    private static let maximumFileSize = 1 << 20
    private static let treeMask = UInt32(IN_CREATE | IN_DELETE | IN_MODIFY | IN_CLOSE_WRITE | IN_MOVED_FROM | IN_MOVED_TO)
        | UInt32(IN_DELETE_SELF | IN_MOVE_SELF)
    private static let ancestorMask = UInt32(IN_CREATE | IN_MOVED_TO | IN_DELETE_SELF | IN_MOVE_SELF)

    /// A registry of the entries in `directories` (most important first, as
    /// ``dataDirectories(environment:)`` lists them). Nothing is read before ``start()``.
    /// - Parameter debounce: how long the tree must be quiet before a reload.
    init(directories: [String], loop: EventLoop, logger: Logger, debounce: Duration = .milliseconds(200)) {
        self.directories = directories
        self.loop = loop
        self.logger = logger
        let (seconds, attoseconds) = debounce.components
        debounceMicroseconds = UInt64(max(0, seconds)) * 1_000_000 + UInt64(max(0, attoseconds) / 1_000_000_000_000)
    }

    deinit { stop() }

    /// Scans the directories and starts watching them. Throws when the loop
    /// cannot take the timer or the inotify source; running out of inotify
    /// instances or watches is only logged.
    func start() throws {
        guard !started else { return }
        started = true
        reloadTimer = try loop.makeTimer { [weak self] in self?.reloadTimerFired() }
        let fd = inotify_init1(Int32(IN_NONBLOCK | IN_CLOEXEC))
        if fd < 0 {
            logger.warning("cannot watch the applications directories (inotify: \(String(cString: strerror(errno)))); apps installed from now on are seen after a restart")
        } else {
            inotifyFD = fd
            inotifySource = try loop.watch(fd: fd, events: UInt32(EPOLLIN.rawValue)) { [weak self] _ in
                self?.readEvents()
            }
        }
        reload(notify: false)
    }

    /// Stops watching; the entries stay as they are, and ``start()`` may be called again.
    func stop() {
        started = false
        inotifySource?.cancel()
        inotifySource = nil
        if inotifyFD >= 0 { close(inotifyFD) }
        inotifyFD = -1
        watches = [:]
        reloadTimer?.arm(at: nil)
        firstPendingChange = nil
    }

    /// The usable entry of `id`; nil when there is none or it is hidden.
    func entry(for id: AppID) -> DesktopEntry? {
        if winners[id] == nil { reloadIfChangePending() }
        guard let entry = winners[id], !entry.hidden else { return nil }
        return entry
    }

    /// Reloads now if a change waits (read or not yet read from inotify),
    /// and has the loop tell ``onChange`` of it right after: for a lookup
    /// that misses, and for a listing asked for (`GetApplications`).
    func reloadIfChangePending() {
        guard started else { return }
        readEvents()
        guard firstPendingChange != nil else { return }
        firstPendingChange = nil
        let before = entries
        reload(notify: false)
        guard entries != before else { return }
        // The timer, due at once, tells onChange (see reloadTimerFired).
        changeNotTold = true
        reloadTimer?.arm(at: loop.now)
    }

    /// The usable entries that declare `mode` in `X-BgTaskd-Modes=`, sorted by id.
    func entries(declaring mode: String) -> [DesktopEntry] {
        entries.filter { $0.modes.contains(mode) }
    }

    // MARK: Scanning

    /// Rescans every directory, refreshing the watches on the way.
    func reload(notify: Bool = true) {
        let clock = ContinuousClock()
        let began = clock.now
        var scan = Scan()
        for directory in directories {
            if !walk(directory, idPrefix: "", scan: &scan, isTop: true) {
                awaitDirectory(directory, scan: &scan)
            }
        }
        if let shortage = scan.shortage {
            // A scan cut short by the daemon's own shortage is not the truth:
            // every app it missed would be forgotten (its pushes and fetches
            // refused) until the next change. Keep what was known; try again.
            if !shortageLogged {
                shortageLogged = true
                logger.warning("cannot read every desktop entry (\(shortage)); keeping the \(entries.count) apps known and trying again every second")
            }
            firstPendingChange = firstPendingChange ?? loop.now
            reloadTimer?.arm(at: loop.now + Self.shortageRetryMicroseconds)
            return
        }
        if shortageLogged {
            shortageLogged = false
            logger.notice("desktop entries can be read again")
        }
        applyWatches(scan.watches)

        let usable = scan.winners.values.filter { !$0.hidden }.sorted { $0.id < $1.id }
        for entry in usable where entry.execProblem != nil && winners[entry.id] != entry {
            logger.warning("\(entry.id) cannot be launched in the background: \(entry.execProblem!) (\(entry.path))")
        }
        let changed = usable != entries
        winners = scan.winners
        entries = usable
        reloadCount += 1

        let elapsed = clock.now - began
        let milliseconds = (Double(elapsed.components.seconds) * 1000 + Double(elapsed.components.attoseconds) / 1e15)
        let hidden = scan.winners.count - usable.count
        let declaring = usable.filter { !$0.modes.isEmpty }.count
        let unlaunchable = usable.filter { $0.commandLine == nil }.count
        logger.info("""
            apps: \(usable.count) usable (\(declaring) declaring background modes, \(unlaunchable) without a usable command line), \
            \(hidden) hidden; \(scan.files) files in \(directories.count) directories read in \((milliseconds * 10).rounded() / 10) ms\
            \(changed && notify ? "; changed" : "")
            """)
        if (changed || changeNotTold) && notify {
            changeNotTold = false
            onChange()
        }
    }

    /// A scan cut short by a shortage was logged (once until one completes).
    private var shortageLogged = false
    /// How soon a scan cut short by a shortage is tried again.
    static let shortageRetryMicroseconds: UInt64 = 1_000_000

    /// Whether a failure to open is the daemon's shortage (descriptors,
    /// memory), which says nothing about the file or directory.
    private static func isShortage(_ error: Int32) -> Bool { [EMFILE, ENFILE, ENOMEM].contains(error) }

    /// What one scan found.
    private struct Scan {
        /// Why a directory or file could not be opened, when the daemon ran short.
        var shortage: String?
        var winners: [AppID: DesktopEntry] = [:]
        /// Every id seen so far, valid or not: the first file of an id masks the rest.
        var seenIDs: Set<String> = []
        var visited: Set<DirectoryKey> = []
        /// The watches this scan made or kept, by watch descriptor.
        var watches: [Int32: Watch] = [:]
        var files = 0
    }

    /// Watches and reads `path` and what is below it; false when it is not a directory that can be opened.
    private func walk(_ path: String, idPrefix: String, scan: inout Scan, isTop: Bool) -> Bool {
        // Watch first, read second: a change made while reading still wakes us.
        if let wd = addWatch(path, mask: Self.treeMask) { scan.watches[wd, default: Watch()].isTree = true }
        guard let directory = opendir(path) else {
            if Self.isShortage(errno) { scan.shortage = "\(path): \(String(cString: strerror(errno)))" }
            if !isTop || (errno != ENOENT && errno != ENOTDIR) {
                logger.debug("cannot read \(path): \(String(cString: strerror(errno)))")
            }
            return false
        }
        defer { closedir(directory) }
        var status = stat()
        if fstat(dirfd(directory), &status) == 0 {
            let key = DirectoryKey(device: UInt64(status.st_dev), inode: UInt64(status.st_ino))
            guard scan.visited.insert(key).inserted else { return true }
        }
        var children: [(name: String, type: UInt8)] = []
        while let item = readdir(directory) {
            let nameOffset = MemoryLayout<dirent>.offset(of: \dirent.d_name)!
            let name = String(cString: (UnsafeRawPointer(item) + nameOffset).assumingMemoryBound(to: CChar.self))
            if name.hasPrefix(".") { continue }
            children.append((name, item.pointee.d_type))
        }
        children.sort { $0.name < $1.name }
        for child in children {
            let childPath = path + "/" + child.name
            var type = child.type
            if type == UInt8(DT_UNKNOWN) || type == UInt8(DT_LNK) {
                var childStatus = stat()
                guard stat(childPath, &childStatus) == 0 else { continue }
                switch childStatus.st_mode & S_IFMT {
                case S_IFDIR: type = UInt8(DT_DIR)
                case S_IFREG: type = UInt8(DT_REG)
                default: continue
                }
            }
            if type == UInt8(DT_DIR) {
                _ = walk(childPath, idPrefix: idPrefix + child.name + "-", scan: &scan, isTop: false)
            } else if type == UInt8(DT_REG), let id = Self.desktopFileID(relativePath: child.name) {
                read(childPath, id: idPrefix + id, scan: &scan)
            }
        }
        return true
    }

    /// Reads one `.desktop` file, unless an earlier file already has its id.
    private func read(_ path: String, id rawID: String, scan: inout Scan) {
        guard scan.seenIDs.insert(rawID).inserted else { return }
        let id: AppID
        do {
            id = try AppID(validating: rawID)
        } catch {
            logger.debug("skipping \(path): \(error)")
            return
        }
        scan.files += 1
        errno = 0
        guard let text = RegularFileText.read(path, limit: Self.maximumFileSize, beyond: .refuse) else {
            if Self.isShortage(errno) { scan.shortage = "\(path): \(String(cString: strerror(errno)))" }
            logger.debug("skipping \(path): cannot read it as a regular file of at most \(Self.maximumFileSize) bytes")
            return
        }
        guard let entry = DesktopEntry.parse(text, id: id, path: path) else {
            logger.debug("skipping \(path): not a desktop entry of type Application")
            return
        }
        scan.winners[id] = entry
    }

    // MARK: Watching

    /// Watches the nearest existing ancestor of the missing `directory` for the next name on the way to it.
    private func awaitDirectory(_ directory: String, scan: inout Scan) {
        var missing = Substring(directory)
        while let slash = missing.lastIndex(of: "/") {
            let parent = slash == missing.startIndex ? "/" : String(missing[..<slash])
            let name = String(missing[missing.index(after: slash)...])
            var status = stat()
            if stat(parent, &status) == 0, status.st_mode & S_IFMT == S_IFDIR {
                if !name.isEmpty, let wd = addWatch(parent, mask: Self.ancestorMask) {
                    scan.watches[wd, default: Watch()].awaited.insert(name)
                }
                return
            }
            missing = missing[..<slash]
        }
    }

    /// Adds the watch on `path`, or widens the one it has (several paths may
    /// share an inode, and so a watch); returns its descriptor.
    private func addWatch(_ path: String, mask: UInt32) -> Int32? {
        guard inotifyFD >= 0 else { return nil }
        let wd = inotify_add_watch(inotifyFD, path, mask | UInt32(IN_ONLYDIR | IN_MASK_ADD))
        if wd < 0, errno == ENOSPC, !warnedAboutWatchLimit {
            warnedAboutWatchLimit = true
            logger.warning("cannot watch \(path): the inotify watch limit is reached (fs.inotify.max_user_watches); changes there are seen after a restart")
        }
        return wd >= 0 ? wd : nil
    }

    /// Makes the watches of the last scan the current ones and drops the rest.
    private func applyWatches(_ wanted: [Int32: Watch]) {
        for wd in watches.keys where wanted[wd] == nil {
            inotify_rm_watch(inotifyFD, wd)
        }
        watches = wanted
    }

    /// Drains the inotify descriptor and schedules a reload if anything relevant happened.
    private func readEvents() {
        guard inotifyFD >= 0 else { return }
        var relevant = false
        let headerSize = MemoryLayout<inotify_event>.size
        while true {
            let count = eventBuffer.withUnsafeMutableBytes { Glibc.read(inotifyFD, $0.baseAddress!, $0.count) }
            if count < 0 {
                if errno == EINTR { continue }
                if errno != EAGAIN { logger.debug("reading inotify events: \(String(cString: strerror(errno)))") }
                break
            }
            if count == 0 { break }
            eventBuffer.withUnsafeBytes { raw in
                var offset = 0
                while offset + headerSize <= count {
                    let wd = raw.loadUnaligned(fromByteOffset: offset, as: Int32.self)
                    let mask = raw.loadUnaligned(fromByteOffset: offset + 4, as: UInt32.self)
                    let length = Int(raw.loadUnaligned(fromByteOffset: offset + 12, as: UInt32.self))
                    let nameBytes = raw[(offset + headerSize)..<min(count, offset + headerSize + length)]
                    offset += headerSize + length
                    let name = String(decoding: nameBytes.prefix { $0 != 0 }, as: UTF8.self)
                    if isRelevant(wd: wd, mask: mask, name: name) { relevant = true }
                }
            }
        }
        if relevant { scheduleReload() }
    }

    /// Whether an event can change the entries or the set of directories to watch.
    private func isRelevant(wd: Int32, mask: UInt32, name: String) -> Bool {
        if mask & UInt32(IN_Q_OVERFLOW) != 0 { return true }
        // IN_IGNORED of a watch dropped on purpose arrives after it left `watches`.
        guard let watch = watches[wd] else { return false }
        if mask & UInt32(IN_DELETE_SELF | IN_MOVE_SELF | IN_IGNORED | IN_UNMOUNT) != 0 { return true }
        if watch.awaited.contains(name) { return true }
        guard watch.isTree, !name.hasPrefix(".") else { return false }
        return mask & UInt32(IN_ISDIR) != 0 || name.hasSuffix(".desktop")
    }

    /// (Re)arms the reload timer: one debounce interval from now, but no later
    /// than ten intervals after the first change still waiting.
    private func scheduleReload() {
        let now = loop.now
        let first = firstPendingChange ?? now
        firstPendingChange = first
        reloadTimer?.arm(at: min(now + debounceMicroseconds, first + 10 * debounceMicroseconds))
    }

    private func reloadTimerFired() {
        // Armed by a lookup's reload with nothing new since: only onChange is owed.
        if firstPendingChange == nil, changeNotTold {
            changeNotTold = false
            return onChange()
        }
        firstPendingChange = nil
        reload()
    }
}
