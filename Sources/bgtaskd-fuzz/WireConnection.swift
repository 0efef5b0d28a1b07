import Glibc
import SDBus

/// A D-Bus client connection spoken by hand over the bus's Unix socket:
/// SASL EXTERNAL, Hello, method calls marshalled by ``WireEncoder``, and
/// just enough parsing of incoming messages to match replies. It exists for
/// the calls sd-bus will not send (strings holding Unicode noncharacters,
/// which the bus daemon passes on and the daemon's sd-bus must refuse).
final class WireConnection {
    private let fd: Int32
    private var serial: UInt32 = 0
    private var buffer: [UInt8] = []

    /// What came back for a call.
    enum Reply {
        case methodReturn(signature: String)
        case error(name: String, message: String)
        case timeout
        case closed
    }

    /// Connects to `address` (`unix:path=…` or `unix:abstract=…`) and says Hello.
    init(address: String, timeout: Double = 5) throws(HarnessError) {
        guard address.hasPrefix("unix:") else { throw HarnessError("not a unix address: \(address)") }
        var path: String?
        var abstract: String?
        for pair in address.dropFirst(5).split(separator: ",") {
            let parts = pair.split(separator: "=", maxSplits: 1).map(String.init)
            guard parts.count == 2 else { continue }
            if parts[0] == "path" { path = parts[1] }
            if parts[0] == "abstract" { abstract = parts[1] }
        }
        guard let name = path ?? abstract else { throw HarnessError("no path in \(address)") }
        fd = socket(AF_UNIX, Int32(SOCK_STREAM.rawValue) | Int32(SOCK_CLOEXEC.rawValue), 0)
        guard fd >= 0 else { throw HarnessError("socket: \(String(cString: strerror(errno)))") }
        var socketAddress = sockaddr_un()
        socketAddress.sun_family = sa_family_t(AF_UNIX)
        let nameBytes = Array(name.utf8)
        let offset = abstract != nil ? 1 : 0  // an abstract name starts with a NUL byte
        guard nameBytes.count + offset < MemoryLayout.size(ofValue: socketAddress.sun_path) else {
            close(fd)
            throw HarnessError("socket name too long: \(name)")
        }
        withUnsafeMutableBytes(of: &socketAddress.sun_path) { raw in
            for (i, byte) in nameBytes.enumerated() { raw[i + offset] = byte }
        }
        let length = socklen_t(MemoryLayout<sa_family_t>.size + offset + nameBytes.count + (abstract != nil ? 0 : 1))
        let connected = withUnsafePointer(to: &socketAddress) {
            $0.withMemoryRebound(to: sockaddr.self, capacity: 1) { connect(fd, $0, length) }
        }
        guard connected == 0 else {
            let problem = String(cString: strerror(errno))
            close(fd)
            throw HarnessError("connecting to \(address): \(problem)")
        }
        do throws(HarnessError) {
            let uid = String(getuid()).utf8.map { String($0, radix: 16) }.joined()
            try write(Array("\0AUTH EXTERNAL \(uid)\r\n".utf8))
            let answer = try readLine(timeout: timeout)
            guard answer.hasPrefix("OK") else { throw HarnessError("the bus refused authentication: \(answer)") }
            try write(Array("BEGIN\r\n".utf8))
            guard case .methodReturn = call(
                destination: "org.freedesktop.DBus", path: "/org/freedesktop/DBus", interface: "org.freedesktop.DBus",
                member: "Hello", body: [], timeout: timeout)
            else { throw HarnessError("Hello failed") }
        } catch {
            close(fd)
            throw error
        }
    }

    deinit { close(fd) }

    /// Sends a method call and waits up to `timeout` seconds for its reply;
    /// signals and other replies that arrive meanwhile are dropped.
    func call(destination: String?, path: String, interface: String?, member: String, body: [BusValue], timeout: Double) -> Reply {
        serial &+= 1
        if serial == 0 { serial = 1 }
        let mine = serial
        let message = WireEncoder.methodCall(
            serial: mine, destination: destination, path: path, interface: interface, member: member, body: body)
        do throws(HarnessError) {
            try write(message)
        } catch {
            return .closed
        }
        let deadline = Monotonic.seconds() + timeout
        while true {
            while let parsed = nextMessage() {
                guard parsed.replySerial == mine else { continue }
                if parsed.type == 3 { return .error(name: parsed.errorName ?? "", message: parsed.errorMessage ?? "") }
                if parsed.type == 2 { return .methodReturn(signature: parsed.signature) }
            }
            let remaining = deadline - Monotonic.seconds()
            if remaining <= 0 { return .timeout }
            switch receive(timeout: remaining) {
            case .some(true): continue
            case .some(false): return .closed
            case .none: return .timeout
            }
        }
    }

    // MARK: Bytes

    private func write(_ bytes: [UInt8]) throws(HarnessError) {
        var offset = 0
        while offset < bytes.count {
            let n = bytes[offset...].withUnsafeBytes { send(fd, $0.baseAddress, $0.count, Int32(MSG_NOSIGNAL)) }
            if n < 0 && errno == EINTR { continue }
            guard n > 0 else { throw HarnessError("send: \(String(cString: strerror(errno)))") }
            offset += n
        }
    }

    /// Reads what arrives within `timeout`: true when bytes came, false when
    /// the bus closed the connection, nil on timeout.
    private func receive(timeout: Double) -> Bool? {
        var poller = pollfd(fd: fd, events: Int16(POLLIN), revents: 0)
        let r = poll(&poller, 1, Int32(max(1, min(timeout * 1000, 600_000))))
        if r == 0 { return nil }
        if r < 0 { return errno == EINTR ? true : false }
        var chunk = [UInt8](repeating: 0, count: 65536)
        let n = chunk.withUnsafeMutableBytes { recv(fd, $0.baseAddress, $0.count, 0) }
        if n < 0 && errno == EINTR { return true }
        guard n > 0 else { return false }
        buffer.append(contentsOf: chunk[0..<n])
        return true
    }

    private func readLine(timeout: Double) throws(HarnessError) -> String {
        let deadline = Monotonic.seconds() + timeout
        while true {
            if let end = buffer.firstIndex(of: UInt8(ascii: "\n")) {
                let line = String(decoding: buffer[..<end], as: UTF8.self)
                buffer.removeSubrange(...end)
                return line.trimmingSuffix("\r")
            }
            let remaining = deadline - Monotonic.seconds()
            guard remaining > 0, receive(timeout: remaining) == true else { throw HarnessError("no answer to AUTH") }
        }
    }

    // MARK: Incoming messages

    /// What the fuzzer needs of an incoming message.
    private struct Parsed {
        var type: UInt8
        var replySerial: UInt32?
        var errorName: String?
        var signature = ""
        var errorMessage: String?
    }

    /// Takes one complete message off the buffer, if there is one.
    private func nextMessage() -> Parsed? {
        guard buffer.count >= 16 else { return nil }
        let little = buffer[0] == UInt8(ascii: "l")
        func u32(_ at: Int) -> UInt32 {
            let b = buffer[at..<(at + 4)].map(UInt32.init)
            return little ? b[0] | b[1] << 8 | b[2] << 16 | b[3] << 24 : b[3] | b[2] << 8 | b[1] << 16 | b[0] << 24
        }
        let bodyLength = Int(u32(4))
        let fieldsLength = Int(u32(12))
        let headerEnd = 16 + fieldsLength
        let bodyStart = (headerEnd + 7) & ~7
        guard buffer.count >= bodyStart + bodyLength else { return nil }
        var parsed = Parsed(type: buffer[1])
        var at = 16
        while at < headerEnd {
            at = (at + 7) & ~7
            guard at + 2 < headerEnd else { break }
            let code = buffer[at]
            let signatureLength = Int(buffer[at + 1])
            let type = buffer[at + 2]
            at += 2 + signatureLength + 1
            switch type {
            case UInt8(ascii: "u"):
                at = (at + 3) & ~3
                if code == 5 { parsed.replySerial = u32(at) }
                at += 4
            case UInt8(ascii: "s"), UInt8(ascii: "o"):
                at = (at + 3) & ~3
                let length = Int(u32(at))
                let text = String(decoding: buffer[(at + 4)..<(at + 4 + length)], as: UTF8.self)
                if code == 4 { parsed.errorName = text }
                at += 4 + length + 1
            case UInt8(ascii: "g"):
                let length = Int(buffer[at])
                if code == 8 { parsed.signature = String(decoding: buffer[(at + 1)..<(at + 1 + length)], as: UTF8.self) }
                at += 1 + length + 1
            default:
                at = headerEnd  // a field type this client does not know: skip the rest
            }
        }
        if parsed.type == 3, parsed.signature.hasPrefix("s"), bodyLength >= 4 {
            let length = Int(u32(bodyStart))
            if bodyStart + 4 + length <= buffer.count {
                parsed.errorMessage = String(decoding: buffer[(bodyStart + 4)..<(bodyStart + 4 + length)], as: UTF8.self)
            }
        }
        buffer.removeSubrange(0..<(bodyStart + bodyLength))
        return parsed
    }
}

extension String {
    fileprivate func trimmingSuffix(_ suffix: String) -> String {
        hasSuffix(suffix) ? String(dropLast(suffix.count)) : self
    }
}
