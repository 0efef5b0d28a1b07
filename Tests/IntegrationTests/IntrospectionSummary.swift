import Foundation
import FoundationXML

/// The members of bgtaskd's interfaces in an introspection XML, one line each,
/// so that two descriptions can be compared regardless of comments and
/// formatting (equal when ``lines`` are); ``order`` keeps the interfaces and
/// members in the order given, which a reader diffing the text sees.
struct IntrospectionSummary: Equatable, CustomStringConvertible {
    var lines: Set<String>
    /// Interface and member names, in document order.
    var order: [String]

    init(xml: String, interfacePrefix: String = "org.bgtaskd.") throws {
        let document = try XMLDocument(xmlString: xml, options: [])
        var lines = Set<String>()
        var order: [String] = []
        for interface in try document.nodes(forXPath: "/node/interface") {
            guard let element = interface as? XMLElement, let name = element.attribute(forName: "name")?.stringValue,
                  name.hasPrefix(interfacePrefix) else { continue }
            lines.insert("interface \(name)")
            order.append(name)
            for member in element.children ?? [] {
                guard let member = member as? XMLElement, let kind = member.name,
                      let memberName = member.attribute(forName: "name")?.stringValue else { continue }
                if ["method", "signal", "property"].contains(kind) { order.append("\(name) \(kind) \(memberName)") }
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
        self.order = order
    }

    static func == (a: IntrospectionSummary, b: IntrospectionSummary) -> Bool { a.lines == b.lines }

    var description: String { lines.sorted().joined(separator: "\n") }

    /// What one side has and the other lacks, for a readable failure.
    func difference(from other: IntrospectionSummary) -> String {
        let missing = other.lines.subtracting(lines).sorted().map { "- \($0)" }
        let extra = lines.subtracting(other.lines).sorted().map { "+ \($0)" }
        guard missing.isEmpty, extra.isEmpty, order != other.order else { return (missing + extra).joined(separator: "\n") }
        let at = zip(order, other.order).enumerated().first { $0.element.0 != $0.element.1 }?.offset ?? min(order.count, other.order.count)
        return "the same members in another order, from \(other.order[safe: at] ?? "the end") (XML) against \(order[safe: at] ?? "the end")"
    }
}

private extension Array {
    subscript(safe index: Int) -> Element? { indices.contains(index) ? self[index] : nil }
}
