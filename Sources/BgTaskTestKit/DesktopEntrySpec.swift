/// A desktop entry for a test's applications directory.
public struct DesktopEntrySpec: Sendable {
    public var id: String
    public var name: String?
    public var modes: [String]
    public var exec: String
    public var backgroundExec: String?
    /// `Path=`, the directory the app starts in.
    public var workingDirectory: String?

    public init(id: String, name: String? = nil, modes: [String], exec: String, backgroundExec: String? = nil, workingDirectory: String? = nil) {
        self.id = id
        self.name = name
        self.modes = modes
        self.exec = exec
        self.backgroundExec = backgroundExec
        self.workingDirectory = workingDirectory
    }

    /// The file's text.
    public var text: String {
        var text = "[Desktop Entry]\nType=Application\nName=\(name ?? id)\nExec=\(exec)\n"
        if !modes.isEmpty { text += "X-BgTaskd-Modes=\(modes.joined(separator: ";"));\n" }
        if let backgroundExec { text += "X-BgTaskd-Exec=\(backgroundExec)\n" }
        if let workingDirectory { text += "Path=\(workingDirectory)\n" }
        return text
    }
}
