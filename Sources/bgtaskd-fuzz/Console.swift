import Foundation

/// Messages for people on standard error (standard output carries the report).
enum Console {
    static func error(_ text: String) {
        FileHandle.standardError.write(Data("bgtaskd-fuzz: \(text)\n".utf8))
    }
}
