import BgTaskTestKit
import Foundation
import Testing

/// The short run of the project's D-Bus fuzzer against the built daemon:
/// thousands of typed, extreme, wrong and random calls on every interface
/// of the contract, and not one crash, hang, leak, error name outside the
/// contract or failed restart.
@Suite struct FuzzTests {
    @Test func quickFuzzRunHasNoFindings() throws {
        // The fuzzer starts and stops its own bus and daemon by pid; it finds bgtaskd and the plugins beside itself.
        let result = try CommandResult.run(BinaryLocator.path(of: "bgtaskd-fuzz"), ["--quick", "--json"], timeout: .seconds(150))
        let object = try JSONSerialization.jsonObject(with: Data(result.standardOutput.utf8))
        let report = try #require(object as? [String: Any], "not a JSON report: \(result)")
        let findings = (report["findings"] as? [[String: Any]]) ?? []
        let described = findings.map { finding in
            let reproduction = (finding["reproduction"] as? String).map { "\n  reproduce: \($0)" } ?? ""
            return "\(finding["kind"] ?? "?"): \(finding["summary"] ?? "?")\(reproduction)"
        }
        #expect(result.exit == .status(0), "bgtaskd-fuzz --quick: \(result.exit)\n\(described.joined(separator: "\n"))\n\(result.standardError)")
        #expect(findings.isEmpty)

        let calls = try #require(report["callsMade"] as? Int)
        #expect(calls >= 3000, "only \(calls) calls")
        let byInterface = try #require(report["callsByInterface"] as? [String: Int])
        let contract = try IntrospectionSummary(
            xml: String(contentsOfFile: BinaryLocator.packageRoot() + "/dbus/org.bgtaskd.BackgroundTasks1.xml", encoding: .utf8))
        let interfaces = contract.lines.filter { $0.hasPrefix("interface ") }.map { String($0.dropFirst("interface ".count)) }
        #expect(interfaces.count >= 3)
        for interface in interfaces {
            #expect((byInterface[interface] ?? 0) >= 300, "\(interface): \(byInterface[interface] ?? 0) calls")
        }
        // It did restart the daemon on the state the calls left, and the daemon came back.
        let restart = try #require(report["restart"] as? [String: Any])
        #expect(restart["ok"] as? Bool == true, "\(restart)")
    }
}
