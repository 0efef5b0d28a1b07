import Glibc

/// `value` with a fixed number of decimals (no Foundation in this tool: the
/// victims it spawns should start fast).
func format(_ value: Double, _ decimals: Int) -> String {
    guard value.isFinite else { return "\(value)" }
    var buffer = [CChar](repeating: 0, count: 64)
    _ = withVaList([Int32(decimals), value]) { vsnprintf(&buffer, buffer.count, "%.*f", $0) }
    return cString(buffer)
}

/// The text of a NUL-terminated buffer.
func cString(_ buffer: [CChar]) -> String {
    String(decoding: buffer.prefix { $0 != 0 }.map { UInt8(bitPattern: $0) }, as: UTF8.self)
}

/// Microseconds as milliseconds with three decimals.
func milliseconds(_ microseconds: Double) -> String {
    format(microseconds / 1000, 3)
}

/// Writes a line to standard output at once (unbuffered: progress shows while
/// a benchmark runs, and a victim's line is out before it exits).
func say(_ text: String) {
    write(line: text, to: STDOUT_FILENO)
}

/// Writes a line to standard error (problems; standard output carries results).
func note(_ text: String) {
    write(line: text, to: STDERR_FILENO)
}

private func write(line text: String, to fd: Int32) {
    let bytes = Array((text + "\n").utf8)
    var done = 0
    while done < bytes.count {
        let n = bytes[done...].withUnsafeBytes { Glibc.write(fd, $0.baseAddress, $0.count) }
        if n < 0 && errno == EINTR { continue }
        guard n > 0 else { return }
        done += n
    }
}
