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

    /// The id keeps its text's hash: ids made apart from the same text are
    /// one key, and ids of different text are not.
    @Test func idsMadeApartAreOneKey() throws {
        let made = try AppID(validating: "org.example.Weather")
        // Text built at run time, not the literal's storage.
        let built = try AppID(validating: ["org", "example", "Weather"].joined(separator: "."))
        #expect(made == built)
        #expect(made.hashValue == built.hashValue)
        var table = [made: 1]
        table[built, default: 0] += 1
        #expect(table.count == 1 && table[made] == 2)
        let other = try AppID(validating: "org.example.Weather2")
        #expect(made != other)
        #expect(table[other] == nil)
        #expect(Set([made, built, other]).count == 2)
    }
}
