@testable import BgTaskTransferCore
import Testing

/// The transfer mode's pure rules: paths, conditions, backoff, options, records.
@Suite struct TransferCoreTests {
    @Test func pathsMustBeAbsoluteCleanFiles() {
        #expect(TransferPath.problem(with: "/home/u/.cache/app/file.bin") == nil)
        #expect(TransferPath.problem(with: "") != nil)
        #expect(TransferPath.problem(with: "file.bin") != nil)
        #expect(TransferPath.problem(with: "/home/u/../etc/passwd") != nil)
        #expect(TransferPath.problem(with: "/home/u/./x") != nil)
        #expect(TransferPath.problem(with: "/home//u/x") != nil)
        #expect(TransferPath.problem(with: "/home/u/dir/") != nil)
        #expect(TransferPath.problem(with: "/home/u/a\u{0}b") != nil)
        #expect(TransferPath.problem(with: "/" + String(repeating: "a", count: 5000)) != nil)
    }

    @Test func insideMeansStrictlyBelowTheRoot() {
        #expect(TransferPath.isInside("/h/.cache/app/x", root: "/h/.cache/app"))
        #expect(TransferPath.isInside("/h/.cache/app/x", root: "/h/.cache/app/"))
        #expect(!TransferPath.isInside("/h/.cache/app", root: "/h/.cache/app"))
        #expect(!TransferPath.isInside("/h/.cache/application/x", root: "/h/.cache/app"))
        #expect(!TransferPath.isInside("/x", root: ""))
    }

    @Test func rootsFollowTheBaseDirectories() {
        #expect(TransferPath.roots(app: "A", home: "/h", dataHome: nil, cacheHome: nil, downloads: nil)
            == ["/h/.local/share/A", "/h/.cache/A", "/h/Downloads", "/h/.var/app/A"])
        #expect(TransferPath.roots(app: "A", home: "/h", dataHome: "/d/", cacheHome: "relative", downloads: "/dl")
            == ["/d/A", "/h/.cache/A", "/dl", "/h/.var/app/A"])
    }

    /// xdg-user-dirs writes `XDG_DOWNLOAD_DIR="$HOME/"` for a disabled
    /// directory: taken as a root, every app could write `~/.bashrc` and
    /// upload `~/.ssh/id_rsa`. Such a directory, and any holding the user's
    /// base directories, is no root at all.
    @Test func aDownloadDirectoryThatHoldsTheHomeOrTheBaseDirectoriesIsNoRoot() {
        for bad in ["/h/", "/h", "/", "/h/.", "/h/x/..", "/h/.local", "/h/.local/share", "/h/.config", "/h/.cache"] {
            #expect(TransferPath.roots(app: "A", home: "/h", dataHome: nil, cacheHome: nil, downloads: bad)
                == ["/h/.local/share/A", "/h/.cache/A", "/h/.var/app/A"], "\(bad)")
        }
        #expect(TransferPath.roots(app: "A", home: "/h", dataHome: "/d", cacheHome: nil, downloads: "/d")
            == ["/d/A", "/h/.cache/A", "/h/.var/app/A"])
        #expect(TransferPath.roots(app: "A", home: "/h", dataHome: nil, cacheHome: nil, configHome: "/etc/xdg-user", downloads: "/etc")
            == ["/h/.local/share/A", "/h/.cache/A", "/h/.var/app/A"])
        #expect(TransferPath.isAcceptableDownloadRoot("/h/Downloads", protecting: ["/h", "/h/.local/share"]))
        #expect(TransferPath.isAcceptableDownloadRoot("/srv/dl", protecting: ["/h"]))
    }

    @Test func thePartialFileIsHiddenBesideTheDestination() {
        #expect(TransferPath.partialFile(for: "/h/.cache/A/f.bin", id: "t1-ab") == "/h/.cache/A/.f.bin.t1-ab.bgtaskd-part")
    }

    @Test func conditionsHoldBackOnlyWhatTheyMust() {
        var plain = TransferOptions()
        var discretionary = TransferOptions()
        discretionary.discretionary = true
        var wifiOnly = TransferOptions()
        wifiOnly.allowMetered = false
        // Nothing known: everything runs.
        let unknown = TransferConditions()
        #expect(unknown.blocker(for: plain) == nil && unknown.blocker(for: discretionary) == nil)
        // Guess-yes counts as metered.
        let metered = TransferConditions(connectivity: 4, metered: 3, onBattery: false)
        #expect(metered.blocker(for: plain) == nil)
        #expect(metered.blocker(for: wifiOnly) == "unmetered network")
        #expect(metered.blocker(for: discretionary) == "unmetered network")
        let battery = TransferConditions(connectivity: 4, metered: 4, onBattery: true)
        #expect(battery.blocker(for: discretionary) == "AC power" && battery.blocker(for: wifiOnly) == nil)
        let saver = TransferConditions(connectivity: 4, metered: 2, onBattery: false, powerSaver: true)
        #expect(saver.blocker(for: discretionary) == "power-saver mode to end" && saver.blocker(for: plain) == nil)
        for offline in [UInt32(1), 2, 3] {
            #expect(TransferConditions(connectivity: offline).blocker(for: plain) == "network")
        }
        #expect(TransferConditions(connectivity: 0).blocker(for: plain) == nil)
    }

    /// A NetworkManager that is there but cannot be read: what it said
    /// before holds; having said nothing, the network may be metered, so
    /// what must avoid one waits, and nothing else does.
    @Test func anUnreadableNetworkManagerHoldsBackOnlyWhatMustAvoidMeteredNetworks() {
        var plain = TransferOptions()
        plain.allowMetered = true
        var wifiOnly = TransferOptions()
        wifiOnly.allowMetered = false
        var discretionary = TransferOptions()
        discretionary.discretionary = true
        let never = TransferConditions(networkUnreadable: true)
        #expect(never.blocker(for: wifiOnly) == "unmetered network" && never.blocker(for: discretionary) == "unmetered network")
        #expect(never.blocker(for: plain) == nil)
        let saidUnmetered = TransferConditions(connectivity: 4, metered: 2, networkUnreadable: true)
        #expect(saidUnmetered.blocker(for: wifiOnly) == nil)
        let saidMetered = TransferConditions(connectivity: 4, metered: 1, networkUnreadable: true)
        #expect(saidMetered.blocker(for: wifiOnly) == "unmetered network")
    }

    /// `Retry-After` as a date (valid HTTP) was ignored: only seconds were read.
    @Test func retryAfterIsReadAsSecondsOrAsADate() {
        let now = 1_795_818_453.0  // Fri, 27 Nov 2026 22:27:33 GMT
        #expect(TransferBackoff.httpDate("Fri, 27 Nov 2026 22:27:33 GMT") == now)
        #expect(TransferBackoff.httpDate("Thu, 01 Jan 1970 00:00:00 GMT") == 0)
        #expect(TransferBackoff.httpDate("Tue, 29 Feb 2028 12:00:00 GMT") == 1_835_438_400)
        #expect(TransferBackoff.retryAfter("Fri, 27 Nov 2026 22:30:53 GMT", now: now) == 200)
        #expect(TransferBackoff.retryAfter("Fri, 27 Nov 2026 22:00:00 GMT", now: now) == 0, "a date past is no wait")
        #expect(TransferBackoff.retryAfter(" 120 ", now: now) == 120)
        for bad in ["", "-5", "1.5", "soon", "Fri, 27 Nov 2026 22:30:53 CET", "Fri, 27 Foo 2026 22:30:53 GMT",
                    "Fri, 32 Nov 2026 22:30:53 GMT", "Fri, 27 Nov 2026 25:30:53 GMT", "Friday, 27-Nov-26 22:30:53 GMT"] {
            #expect(TransferBackoff.retryAfter(bad, now: now) == nil, "\(bad)")
        }
    }

    @Test func backoffDoublesToItsCeilingAndHonoursRetryAfter() {
        #expect(TransferBackoff.delay(afterAttempt: 1) == 1)
        #expect(TransferBackoff.delay(afterAttempt: 2) == 2)
        #expect(TransferBackoff.delay(afterAttempt: 9) == 256)
        #expect(TransferBackoff.delay(afterAttempt: 10) == 300)
        #expect(TransferBackoff.delay(afterAttempt: Int.max) == 300)
        #expect(TransferBackoff.delay(afterAttempt: 0) == 1)
        #expect(TransferBackoff.delay(afterAttempt: 3, retryAfter: 7) == 7)
        #expect(TransferBackoff.delay(afterAttempt: 3, retryAfter: 1e12) == 3600)
        #expect(TransferBackoff.delay(afterAttempt: 3, retryAfter: .nan) == 4)
        // A server asking for less did not slow the retries: Retry-After 0 was a busy loop.
        #expect(TransferBackoff.delay(afterAttempt: 1, retryAfter: 0) == 1)
        #expect(TransferBackoff.delay(afterAttempt: 5, retryAfter: 0) == 16)
        #expect(TransferBackoff.delay(afterAttempt: 5, retryAfter: -3) == 16)
        #expect(TransferBackoff.delay(afterAttempt: 12, retryAfter: 2) == 300)
        #expect(TransferBackoff.isTransient(status: 503) && TransferBackoff.isTransient(status: 429))
        #expect(!TransferBackoff.isTransient(status: 404) && !TransferBackoff.isTransient(status: 403))
    }

    @Test func redirectsAreFollowedTenTimesWithoutCyclesToHTTPOnly() {
        var redirects = TransferRedirects(url: "http://a.example/start")
        #expect(redirects.next(status: 200, location: "/x", from: "http://a.example/start") == .none)
        #expect(redirects.next(status: 302, location: nil, from: "http://a.example/start") == .none)
        #expect(redirects.next(status: 302, location: "/x?y=1", from: "http://a.example/start") == .follow("http://a.example/x?y=1"))
        #expect(redirects.next(status: 307, location: "/start", from: "http://a.example/x?y=1") == .refuse("the server's redirects go round in a cycle"))
        for scheme in ["file:///etc/passwd", "ftp://a.example/f", "http+unix://x/y", "http:///nohost"] {
            guard case .refuse = redirects.next(status: 301, location: scheme, from: "http://a.example/x") else {
                Issue.record("followed \(scheme)")
                continue
            }
        }
        // A port past 65535 made the HTTP client trap, taking the daemon with it, again after each restart.
        for bad in ["http://127.0.0.1:99999/x", "http://a.example:0/x", "//b.example:70000/y"] {
            guard case .refuse(let why) = redirects.next(status: 302, location: bad, from: "http://a.example/x") else {
                Issue.record("followed \(bad)")
                continue
            }
            #expect(why.contains("cannot be used"), "\(why)")
        }
        var long = TransferRedirects(url: "http://a.example/0")
        for hop in 1...TransferRedirects.limit {
            #expect(long.next(status: 302, location: "/\(hop)", from: "http://a.example/\(hop - 1)") == .follow("http://a.example/\(hop)"))
        }
        #expect(long.next(status: 302, location: "/11", from: "http://a.example/10") == .refuse("the server redirects more than 10 times"))
    }

    @Test func theAppsHeadersGoOnlyToTheFirstOriginOrItsUpgradeToHTTPS() {
        let redirects = TransferRedirects(url: "http://a.example/start")
        #expect(redirects.mayCarryTheAppsHeaders(to: "http://A.example:80/other"))
        #expect(redirects.mayCarryTheAppsHeaders(to: "https://a.example/other"))
        #expect(!redirects.mayCarryTheAppsHeaders(to: "http://b.example/other"))
        #expect(!redirects.mayCarryTheAppsHeaders(to: "http://a.example:8080/other"))
        #expect(!redirects.mayCarryTheAppsHeaders(to: "https://a.example:8443/other"))
        let secure = TransferRedirects(url: "https://a.example/start")
        #expect(!secure.mayCarryTheAppsHeaders(to: "http://a.example/start"), "no downgrade")
    }

    @Test func headersAreTokensWithoutLineBreaksAndNotOurs() {
        #expect(TransferOptions.problem(withHeaders: ["Authorization": "Bearer x", "X-Thing": "1"]) == nil)
        #expect(TransferOptions.problem(withHeaders: ["Bad Name": "x"]) != nil)
        #expect(TransferOptions.problem(withHeaders: ["": "x"]) != nil)
        #expect(TransferOptions.problem(withHeaders: ["X": "a\r\nInjected: y"]) != nil)
        // The HTTP client refuses control characters but tabs at every attempt: refused at the call, not retried for days.
        for control in ["\u{0B}", "\u{01}", "\u{7F}", "\u{00}", "\u{1B}"] {
            #expect(TransferOptions.problem(withHeaders: ["X-T": "a\(control)b"])?.contains("control character") == true, "\(control.unicodeScalars.first!.value)")
        }
        #expect(TransferOptions.problem(withHeaders: ["X-T": "a\tb \u{85}\u{2028}é"]) == nil)
        #expect(TransferOptions.problem(withHeaders: ["range": "bytes=0-"]) != nil)
        #expect(TransferOptions.problem(withHeaders: ["X": String(repeating: "v", count: 9000)]) != nil)
        let many = Dictionary(uniqueKeysWithValues: (0..<65).map { ("X-\($0)", "v") })
        #expect(TransferOptions.problem(withHeaders: many) != nil)
    }

    @Test func secondsSaturateAndExpiryNeverWraps() {
        #expect(TransferOptions.microseconds(1.5) == 1_500_000)
        #expect(TransferOptions.microseconds(1e300) == .max)
        #expect(TransferOptions.microseconds(.infinity) == 0)
        #expect(TransferOptions.microseconds(-1) == 0)
        var options = TransferOptions()
        options.resourceTimeout = TransferOptions.maximumResourceTimeout
        let late = TransferRecord(id: "t1", app: "A", session: "", kind: .download, url: "http://x/", path: "/x", options: options,
                                  createdAt: .max - 10)
        #expect(late.expiresAt == .max)
        let normal = TransferRecord(id: "t2", app: "A", session: "", kind: .download, url: "http://x/", path: "/x", options: TransferOptions(),
                                    createdAt: 1_000_000)
        #expect(normal.expiresAt == 1_000_000 + 604_800_000_000)
    }

    @Test func contentRangesReadHugeFilesAndRefuseNonsense() {
        let plain = ContentRange("bytes 100-199/1000")
        #expect(plain?.start == 100 && plain?.end == 199 && plain?.total == 1000)
        let huge = ContentRange("bytes 4294967296-10737418239/10737418240")
        #expect(huge?.start == 4_294_967_296 && huge?.end == 10_737_418_239 && huge?.total == 10_737_418_240)
        #expect(ContentRange("bytes 0-9/*")?.total == nil)
        #expect(ContentRange("bytes 10-9/100") == nil)
        #expect(ContentRange("bytes 0-100/100") == nil)
        #expect(ContentRange("items 0-9/10") == nil)
        #expect(ContentRange("bytes 0-9") == nil)
        #expect(ContentRange("bytes -5-9/10") == nil)
        #expect(ContentRange("bytes 0-99999999999999999999/1") == nil)
        // The byte after the largest end does not exist: taken, it trapped the daemon.
        #expect(ContentRange("bytes 0-18446744073709551615/*") == nil)
        #expect(ContentRange("bytes 0-18446744073709551614/*")?.reachesEnd == true)
    }

    /// A 206 to a request for no range was taken for the whole file, and a
    /// resumed one for the file's end whatever total it claimed.
    @Test func aRangeContinuesOnlyFromTheByteAskedForAndOfTheSameFile() throws {
        let range = { (header: String) throws -> ContentRange in try #require(ContentRange(header)) }
        // Nothing asked for: only bytes from the start will do.
        #expect(try range("bytes 0-9/1000").problem(continuing: 0, knownTotal: 0) == nil)
        #expect(try range("bytes 500-509/1000").problem(continuing: 0, knownTotal: 0)?.contains("500-509") == true)
        // Bytes kept: the range starts where they end.
        #expect(try range("bytes 1000-99999/100000").problem(continuing: 1000, knownTotal: 100_000) == nil)
        #expect(try range("bytes 999-99999/100000").problem(continuing: 1000, knownTotal: 100_000) != nil)
        #expect(try range("bytes 1001-99999/100000").problem(continuing: 1000, knownTotal: 100_000) != nil)
        // And is of the file they came with: another total, or bytes past its end, are of another file.
        #expect(try range("bytes 1000-1004/1005").problem(continuing: 1000, knownTotal: 100_000)?.contains("100000") == true)
        #expect(try range("bytes 1000-100000/*").problem(continuing: 1000, knownTotal: 100_000) != nil)
        #expect(try range("bytes 1000-1009/*").problem(continuing: 1000, knownTotal: 100_000) == nil)
        // An unknown size, or nothing kept, has nothing to contradict.
        #expect(try range("bytes 1000-1004/1005").problem(continuing: 1000, knownTotal: 0) == nil)
        #expect(try range("bytes 0-4/1005").problem(continuing: 0, knownTotal: 100_000) == nil)
    }

    @Test func aRangeEndsTheFileWhenItReachesItsTotal() throws {
        #expect(ContentRange("bytes 1000-99999/100000")?.reachesEnd == true)
        #expect(ContentRange("bytes 0-9/1000")?.reachesEnd == false)
        #expect(ContentRange("bytes 1000-1009/*")?.reachesEnd == true)
    }
}
