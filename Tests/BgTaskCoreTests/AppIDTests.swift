import BgTaskCore
import Testing

@Suite struct AppIDTests {
    @Test(arguments: ["org.example.Weather", "com.x.y_z", "org.gnome.Terminal-2", "a.b"])
    func validIDs(_ text: String) throws {
        #expect(try AppID(validating: text).rawValue == text)
    }

    @Test(arguments: [
        ("", "empty"), ("weather", "two elements"), ("org..x", "empty element"), ("org.example.", "empty element"),
        ("org.1password.App", "digit"), ("org.example.Wea ther", "only letters"), ("org/example.x", "only letters"),
        (String(repeating: "a.", count: 128) + "b", "255"),
    ])
    func invalidIDs(_ text: String, _ reason: String) {
        let error = #expect(throws: CoreError.self) { try AppID(validating: text) }
        #expect(error?.code == .invalidArgs)
        #expect(error?.message.contains(reason) == true, "\(error?.message ?? "")")
    }
}
