import BgTaskTransferCore
import Testing

/// Transfer URLs as logs and transfer descriptions show them: no password.
struct TransferURLTests {
    @Test func thePasswordIsMasked() {
        #expect(TransferURL.redacted("http://user:secretpw@host/a/b?c=d#e") == "http://user:***@host/a/b?c=d#e")
        #expect(TransferURL.redacted("https://user:secret@127.0.0.1:8080/x") == "https://user:***@127.0.0.1:8080/x")
        #expect(TransferURL.redacted("HTTP://u:p%40ss@h") == "HTTP://u:***@h")
        // An unescaped "@" in the password: the last one before the path ends the userinfo.
        #expect(TransferURL.redacted("http://u:se@cret@host/p@q") == "http://u:***@host/p@q")
        #expect(TransferURL.redacted("http://u:@host/") == "http://u:***@host/")
    }

    @Test func aUserinfoWithoutPasswordIsMaskedWhole() {
        #expect(TransferURL.redacted("https://ghp_token@host/repo") == "https://***@host/repo")
    }

    @Test func whatIsNoURLIsMaskedAlike() {
        #expect(TransferURL.redacted("not a url u:pw@h/x") == "not a url u:***@h/x")
        #expect(TransferURL.redacted("ftp://u:pw@h\r\nX-Injected: 1") == "ftp://u:***@h\r\nX-Injected: 1")
        // An "@" that a combining mark joins into one Character is an "@" all the same.
        #expect(TransferURL.redacted("http://u:pw@\u{301}h/x") == "http://u:***@\u{301}h/x")
        #expect(TransferURL.redacted("http://u:pw\r\n@h/x") == "http://u:***@h/x")
    }

    @Test(arguments: ["", "http://host/a@b", "http://host?x=u:p@h", "http://host#u:p@h", "http://@host/", "file:///etc/passwd", "not a url"])
    func urlsWithoutUserinfoAreKept(_ url: String) {
        #expect(TransferURL.redacted(url) == url)
    }

    /// Cut before redacting, a long password would lose its "@" and show.
    @Test func aLongPasswordIsHiddenBeforeTheURLIsCut() {
        let url = "http://u:" + String(repeating: "s", count: 300) + "@host/file"
        #expect(TransferURL.redacted(url) == "http://u:***@host/file")
        #expect(!TransferURL.redacted(url).prefix(200).contains("sss"))
    }
}
