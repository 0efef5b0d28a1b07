import Foundation
import FoundationXML

/// The methods of an object's interfaces as an introspection XML describes
/// them: what the fuzzer calls, with which argument types, and what a
/// successful reply must carry.
struct InterfaceModel: Equatable {
    /// One argument of a method.
    struct Argument: Equatable {
        var name: String
        var signature: String
    }

    /// One method: its in arguments and the signature of its reply.
    struct Method: Equatable {
        var interface: String
        var name: String
        var inputs: [Argument]
        var outputs: [Argument]

        var inputSignature: String { inputs.map(\.signature).joined() }
        var outputSignature: String { outputs.map(\.signature).joined() }
        /// `Interface.Member`, with the interface's last element only.
        var shortName: String { "\(interface.split(separator: ".").last ?? "").\(name)" }
    }

    /// Interface names in document order.
    var interfaces: [String]
    var methods: [Method]
    /// `interface property NAME TYPE ACCESS` and `interface signal NAME(SIG)`:
    /// the rest of the contract, compared but not called.
    var otherMembers: Set<String>

    init(interfaces: [String] = [], methods: [Method] = [], otherMembers: Set<String> = []) {
        self.interfaces = interfaces
        self.methods = methods
        self.otherMembers = otherMembers
    }

    /// Parses an introspection document.
    init(xml: String) throws {
        let document = try XMLDocument(xmlString: xml, options: [])
        var interfaces: [String] = []
        var methods: [Method] = []
        var others = Set<String>()
        for node in try document.nodes(forXPath: "/node/interface") {
            guard let element = node as? XMLElement, let interface = element.attribute(forName: "name")?.stringValue else { continue }
            interfaces.append(interface)
            for member in element.children ?? [] {
                guard let member = member as? XMLElement, let name = member.attribute(forName: "name")?.stringValue else { continue }
                let arguments = member.elements(forName: "arg").map { arg in
                    (direction: arg.attribute(forName: "direction")?.stringValue,
                     argument: Argument(name: arg.attribute(forName: "name")?.stringValue ?? "",
                                        signature: arg.attribute(forName: "type")?.stringValue ?? ""))
                }
                switch member.name {
                case "method":
                    methods.append(Method(
                        interface: interface, name: name,
                        inputs: arguments.filter { ($0.direction ?? "in") == "in" }.map(\.argument),
                        outputs: arguments.filter { $0.direction == "out" }.map(\.argument)))
                case "signal":
                    others.insert("\(interface) signal \(name)(\(arguments.map(\.argument.signature).joined(separator: ",")))")
                case "property":
                    let type = member.attribute(forName: "type")?.stringValue ?? "?"
                    let access = member.attribute(forName: "access")?.stringValue ?? "?"
                    others.insert("\(interface) property \(name) \(type) \(access)")
                default:
                    continue
                }
            }
        }
        self.init(interfaces: interfaces, methods: methods, otherMembers: others)
    }

    /// One line per member, for comparing two descriptions of the same object.
    var summary: Set<String> {
        var lines = otherMembers
        for interface in interfaces { lines.insert("interface \(interface)") }
        for method in methods {
            let inputs = method.inputs.map { "in \($0.signature) \($0.name)" }
            let outputs = method.outputs.map { "out \($0.signature) \($0.name)" }
            lines.insert("\(method.interface) method \(method.name)(\((inputs + outputs).joined(separator: ", ")))")
        }
        return lines
    }

    /// Only the interfaces whose name starts with `prefix`.
    func restricted(to prefix: String) -> InterfaceModel {
        InterfaceModel(
            interfaces: interfaces.filter { $0.hasPrefix(prefix) },
            methods: methods.filter { $0.interface.hasPrefix(prefix) },
            otherMembers: otherMembers.filter { $0.hasPrefix(prefix) })
    }

    /// This model's methods and those of `other` that it lacks (the live
    /// object adds the standard interfaces; the XML may name methods whose
    /// plugin did not load).
    func merged(with other: InterfaceModel) -> InterfaceModel {
        var result = self
        for interface in other.interfaces where !result.interfaces.contains(interface) { result.interfaces.append(interface) }
        for method in other.methods where !result.methods.contains(where: { $0.interface == method.interface && $0.name == method.name }) {
            result.methods.append(method)
        }
        result.otherMembers.formUnion(other.otherMembers)
        return result
    }

    func method(_ interface: String, _ name: String) -> Method? {
        methods.first { $0.interface == interface && $0.name == name }
    }
}
