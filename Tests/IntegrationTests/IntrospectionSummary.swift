import Foundation
import FoundationXML

/// The members of bgtaskd's interfaces in an introspection XML, one line each,
/// so that two descriptions can be compared regardless of order, comments and
/// formatting.
struct IntrospectionSummary: Equatable, CustomStringConvertible {
    var lines: Set<String>

    init(xml: String, interfacePrefix: String = "org.bgtaskd.") throws {
        let document = try XMLDocument(xmlString: xml, options: [])
        var lines = Set<String>()
        for interface in try document.nodes(forXPath: "/node/interface") {
            guard let element = interface as? XMLElement, let name = element.attribute(forName: "name")?.stringValue,
                  name.hasPrefix(interfacePrefix) else { continue }
            lines.insert("interface \(name)")
            for member in element.children ?? [] {
                guard let member = member as? XMLElement, let kind = member.name,
                      let memberName = member.attribute(forName: "name")?.stringValue else { continue }
                switch kind {
                case "method", "signal":
                    let arguments = member.elements(forName: "arg").map { arg in
                        let direction = arg.attribute(forName: "direction")?.stringValue ?? (kind == "method" ? "in" : "out")
                        return "\(direction) \(arg.attribute(forName: "type")?.stringValue ?? "?") \(arg.attribute(forName: "name")?.stringValue ?? "?")"
                    }
                    lines.insert("\(name) \(kind) \(memberName)(\(arguments.joined(separator: ", ")))")
                case "property":
                    let emits = member.elements(forName: "annotation")
                        .first { $0.attribute(forName: "name")?.stringValue == "org.freedesktop.DBus.Property.EmitsChangedSignal" }?
                        .attribute(forName: "value")?.stringValue ?? "true"
                    let type = member.attribute(forName: "type")?.stringValue ?? "?"
                    let access = member.attribute(forName: "access")?.stringValue ?? "?"
                    lines.insert("\(name) property \(memberName) \(type) \(access) emits=\(emits)")
                default:
                    continue
                }
            }
        }
        self.lines = lines
    }

    var description: String { lines.sorted().joined(separator: "\n") }

    /// What one side has and the other lacks, for a readable failure.
    func difference(from other: IntrospectionSummary) -> String {
        let missing = other.lines.subtracting(lines).sorted().map { "- \($0)" }
        let extra = lines.subtracting(other.lines).sorted().map { "+ \($0)" }
        return (missing + extra).joined(separator: "\n")
    }
}
