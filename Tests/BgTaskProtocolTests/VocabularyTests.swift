import BgTaskProtocol
import Foundation
import Testing

/// The vocabulary and the checked-in XML, the contract, name the same things:
/// every interface, member and property both ways; every error name both
/// ways; every dictionary key both ways (the XML documents each as
/// `` `key` (type `` in a comment); every enum spelling appears in the XML.
@Suite struct VocabularyTests {
    static let xml: String = {
        let root = URL(fileURLWithPath: #filePath).deletingLastPathComponent().deletingLastPathComponent().deletingLastPathComponent()
        return (try? String(contentsOf: root.appendingPathComponent("dbus/org.bgtaskd.BackgroundTasks1.xml"), encoding: .utf8)) ?? ""
    }()

    /// `interface.member` for every method, signal and property the XML declares.
    static func declaredInXML() -> Set<String> {
        var names: Set<String> = []
        var interface = ""
        let pattern = try! NSRegularExpression(pattern: #"<(interface|method|signal|property) name="([^"]+)""#)
        for match in pattern.matches(in: xml, range: NSRange(xml.startIndex..., in: xml)) {
            let kind = String(xml[Range(match.range(at: 1), in: xml)!])
            let name = String(xml[Range(match.range(at: 2), in: xml)!])
            if kind == "interface" { interface = name; names.insert(name) } else { names.insert("\(interface).\(kind).\(name)") }
        }
        return names
    }

    static func vocabulary() -> Set<String> {
        func members<M: CaseIterable & RawRepresentable<String>, S: CaseIterable & RawRepresentable<String>>(
            _ interface: String, _ methods: M.Type, _ signals: S.Type
        ) -> [String] {
            [interface] + M.allCases.map { "\(interface).method.\($0.rawValue)" } + S.allCases.map { "\(interface).signal.\($0.rawValue)" }
        }
        return Set(
            members(ManagerInterface.name, ManagerInterface.Method.self, ManagerInterface.Signal.self)
                + ManagerInterface.Property.allCases.map { "\(ManagerInterface.name).property.\($0.rawValue)" }
                + members(FetchInterface.name, FetchInterface.Method.self, FetchInterface.Signal.self)
                + members(RemoteNotificationsInterface.name, RemoteNotificationsInterface.Method.self, RemoteNotificationsInterface.Signal.self)
                + members(LocationInterface.name, LocationInterface.Method.self, LocationInterface.Signal.self)
                + members(TransfersInterface.name, TransfersInterface.Method.self, TransfersInterface.Signal.self))
    }

    @Test func theForegroundIsActiveOrInactive() {
        #expect(["active", "inactive"].allSatisfy { ApplicationState.isForeground($0) })
        #expect(!["background", "Active", "", "sleeping"].contains { ApplicationState.isForeground($0) })
        #expect(!ApplicationState.isForeground(nil), "not running")
    }

    @Test func membersAreTheXMLs() {
        let (declared, known) = (Self.declaredInXML(), Self.vocabulary())
        #expect(declared.subtracting(known).sorted() == [], "in the XML, not in the vocabulary")
        #expect(known.subtracting(declared).sorted() == [], "in the vocabulary, not in the XML")
    }

    @Test func errorNamesAreTheXMLs() throws {
        let pattern = try NSRegularExpression(pattern: #"org\.(?:bgtaskd\.BackgroundTasks1|freedesktop\.DBus)\.Error\.[A-Za-z]+"#)
        let inXML = Set(pattern.matches(in: Self.xml, range: NSRange(Self.xml.startIndex..., in: Self.xml)).map {
            String(Self.xml[Range($0.range, in: Self.xml)!])
        })
        #expect(inXML == Set(BgTaskError.Code.all.map(\.rawValue)))
    }

    /// Every dictionary key: `` `key` (type`` in the XML's comments.
    @Test func dictionaryKeysAreTheXMLs() throws {
        let pattern = try NSRegularExpression(pattern: #"`([a-z][a-z_]*)` \((?:s|b|t|d|u|as|a\{ss\})[,:)]"#)
        let inXML = Set(pattern.matches(in: Self.xml, range: NSRange(Self.xml.startIndex..., in: Self.xml)).map {
            String(Self.xml[Range($0.range(at: 1), in: Self.xml)!])
        })
        let known = Set(
            ManagerInterface.LaunchKey.allCases.map(\.rawValue) + ManagerInterface.ApplicationKey.allCases.map(\.rawValue)
                + FetchInterface.ApplicationKey.allCases.map(\.rawValue) + RemoteNotificationsInterface.OptionKey.allCases.map(\.rawValue)
                + RemoteNotificationsInterface.PushKey.allCases.map(\.rawValue)
                + RemoteNotificationsInterface.ApplicationKey.allCases.map(\.rawValue)
                + LocationInterface.OptionKey.allCases.map(\.rawValue) + LocationInterface.RegionKey.allCases.map(\.rawValue)
                + LocationInterface.ApplicationKey.allCases.map(\.rawValue) + TransfersInterface.OptionKey.allCases.map(\.rawValue))
        #expect(inXML.subtracting(known).sorted() == [], "documented in the XML, not in the vocabulary")
        #expect(known.subtracting(inXML).sorted() == [], "in the vocabulary, not documented in the XML")
    }

    /// Every spelling of a value on the bus appears in the XML, quoted.
    @Test func enumSpellingsAppearInTheXML() {
        let spellings = ApplicationState.allCases.map(\.rawValue) + FetchResult.allCases.map(\.rawValue)
            + BackgroundRefreshStatus.allCases.map(\.rawValue) + BgTaskMode.allCases.map(\.rawValue)
            + [LaunchReason.user.rawValue] + FetchInterface.Policy.allCases.map(\.rawValue)
            + RemoteNotificationsInterface.PushState.allCases.map(\.rawValue) + [FetchInterface.missedResult]
            + LocationInterface.Crossing.allCases.map(\.rawValue) + LocationInterface.RegionState.allCases.map(\.rawValue)
            + TransfersInterface.Result.allCases.map(\.rawValue) + TransfersInterface.State.allCases.map(\.rawValue)
            + TransfersInterface.OptionKey.allCases.map(\.rawValue)
        let missing = spellings.filter { !Self.xml.contains("`\($0)`") }
        #expect(missing == [])
    }

    /// Each mode's plugin file and configuration section are what the loader and the parser expect.
    @Test func modesNameTheirPluginsAndSections() {
        #expect(BgTaskMode.allCases.map(\.pluginFile) == [
            "libbgtaskd-mode-fetch.so", "libbgtaskd-mode-remote-notification.so", "libbgtaskd-mode-location.so",
            "libbgtaskd-mode-transfer.so",
        ])
        #expect(BgTaskMode(configSection: "Transfers") == .transfer)
        #expect(BgTaskMode(configSection: "RemoteNotifications") == .remoteNotification)
        #expect(BgTaskMode(configSection: "Tasks") == nil)
    }
}
