/// Renders interfaces as D-Bus introspection XML, the way sd-bus describes an
/// exported object (without the standard interfaces), for `--bus-introspect`.
public enum IntrospectionXML {
    public static func render(_ interfaces: [BusInterface]) -> String {
        var xml = """
            <!DOCTYPE node PUBLIC "-//freedesktop//DTD D-BUS Object Introspection 1.0//EN"
             "http://www.freedesktop.org/standards/dbus/1.0/introspect.dtd">
            <node>

            """
        for interface in interfaces {
            xml += " <interface name=\"\(escape(interface.name))\">\n"
            for method in interface.methods {
                xml += "  <method name=\"\(escape(method.name))\">\n"
                for argument in method.inputs { xml += argumentLine(argument, direction: "in") }
                for argument in method.outputs { xml += argumentLine(argument, direction: "out") }
                xml += "  </method>\n"
            }
            for signal in interface.signals {
                xml += "  <signal name=\"\(escape(signal.name))\">\n"
                for argument in signal.arguments { xml += argumentLine(argument, direction: nil) }
                xml += "  </signal>\n"
            }
            for property in interface.properties {
                let annotation: String? = switch property.change {
                case .constant: "const"
                case .emitsInvalidation: "invalidates"
                case .none: "false"
                case .emitsChange: nil
                }
                let open = "  <property name=\"\(escape(property.name))\" type=\"\(escape(property.signature))\" access=\"read\""
                if let annotation {
                    xml += open + ">\n"
                    xml += "   <annotation name=\"org.freedesktop.DBus.Property.EmitsChangedSignal\" value=\"\(annotation)\"/>\n"
                    xml += "  </property>\n"
                } else {
                    xml += open + "/>\n"
                }
            }
            xml += " </interface>\n"
        }
        xml += "</node>\n"
        return xml
    }

    private static func argumentLine(_ argument: BusArgument, direction: String?) -> String {
        let direction = direction.map { " direction=\"\($0)\"" } ?? ""
        return "   <arg type=\"\(escape(argument.signature))\" name=\"\(escape(argument.name))\"\(direction)/>\n"
    }

    private static func escape(_ text: String) -> String {
        var out = ""
        for character in text {
            switch character {
            case "&": out += "&amp;"
            case "<": out += "&lt;"
            case ">": out += "&gt;"
            case "\"": out += "&quot;"
            default: out.append(character)
            }
        }
        return out
    }
}
