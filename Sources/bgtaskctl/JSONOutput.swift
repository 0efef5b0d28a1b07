import Foundation

/// Prints `--json` output: one JSON document on one line of standard output,
/// keys sorted so the output is stable, snake_case keys as the D-Bus
/// arguments are named. Pipe it through `jq` to read it.
enum JSONOutput {
    static func print(_ value: some Encodable) throws(ClientError) {
        let encoder = JSONEncoder()
        encoder.outputFormatting = [.sortedKeys, .withoutEscapingSlashes]
        do {
            let data = try encoder.encode(value)
            Swift.print(String(decoding: data, as: UTF8.self))
        } catch {
            throw ClientError("cannot write JSON: \(error)")
        }
    }
}
