/// How configuration files, `--set` and `bgtaskd --help` spell a number:
/// whole numbers without a fraction (`600`, not `600.0`), others as Swift does.
public enum ConfigNumber {
    public static func text(_ number: Double) -> String {
        number.rounded() == number && abs(number) < 1e15 ? String(Int(number)) : String(number)
    }
}
