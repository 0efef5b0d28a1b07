import BgTaskProtocol
import Testing

/// What sd-bus cannot send in a string, found by a byte scan first and the
/// scalars only when a byte may start one.
@Suite struct DBusTextTests {
    /// Text from scalar values (Swift literals refuse noncharacters).
    static func text(_ scalars: [UInt32]) -> String {
        String(String.UnicodeScalarView(scalars.map { Unicode.Scalar($0)! }))
    }

    @Test(arguments: [
        ([], nil), ([0x6F, 0x72, 0x67], nil), ([0xE9, 0x20AC, 0xFFFD, 0xEFFF, 0xF0000, 0x1F600], nil),
        ([0x61, 0x0, 0x62], 0x0), ([0x78, 0xFDD0], 0xFDD0), ([0x78, 0xFDEF], 0xFDEF), ([0xFFFE], 0xFFFE),
        ([0x6F, 0xFFFF], 0xFFFF), ([0x1FFFE], 0x1FFFE), ([0x10FFFF], 0x10FFFF), ([0xE9, 0xFDD5, 0x20AC], 0xFDD5),
    ] as [([UInt32], UInt32?)])
    func unsendableFindsTheFirstScalarSDBusRefuses(_ scalars: [UInt32], _ expected: UInt32?) {
        #expect(DBusText.unsendable(in: Self.text(scalars))?.value == expected)
    }
}
