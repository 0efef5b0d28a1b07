import SDBus

/// One `a{sv}` of a daemon's `aa{sv}` answer (`GetApplications`,
/// `ListPushes`), variants unwrapped, with typed reads of its keys. Keys
/// this bgtaskctl does not know are kept for `--json`.
struct BusRecord {
    /// Every key the daemon sent, variants unwrapped.
    var fields: [String: BusValue]

    /// Reads an `aa{sv}` answer of `member`.
    static func list(from reply: Message, member: String) throws(ClientError) -> [BusRecord] {
        let value: BusValue?
        do { value = try reply.readValue() } catch { throw ClientError(error) }
        func malformed() -> ClientError {
            let found = value.map { "a value of type '\($0.signature)'" } ?? "nothing"
            return ClientError("the daemon answered \(member) with \(found); this bgtaskctl expects 'aa{sv}'")
        }
        guard case .array(_, let entries)? = value else { throw malformed() }
        var records: [BusRecord] = []
        for entry in entries {
            guard case .dictionary(_, _, let pairs) = entry else { throw malformed() }
            var fields: [String: BusValue] = [:]
            for pair in pairs {
                guard case .string(let key) = pair.key else { throw malformed() }
                fields[key] = pair.value.unwrapped
            }
            records.append(BusRecord(fields: fields))
        }
        return records
    }

    /// The dictionary as the daemon sent it, for `--json`.
    var json: [String: BusValueJSON] { fields.mapValues(BusValueJSON.init) }

    func string(_ key: String) -> String? {
        if case .string(let text)? = fields[key] { text } else { nil }
    }

    func bool(_ key: String) -> Bool? {
        if case .bool(let flag)? = fields[key] { flag } else { nil }
    }

    func double(_ key: String) -> Double? {
        if case .double(let value)? = fields[key] { value } else { nil }
    }

    /// Any unsigned or non-negative integer.
    func uint(_ key: String) -> UInt64? {
        switch fields[key] {
        case .uint64(let v)?: v
        case .uint32(let v)?: UInt64(v)
        case .int64(let v)? where v >= 0: UInt64(v)
        case .int32(let v)? where v >= 0: UInt64(v)
        default: nil
        }
    }
}
