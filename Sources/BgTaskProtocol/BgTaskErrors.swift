/// The D-Bus error names bgtaskd answers with (docs/DESIGN.md §1), in one table.
public enum BgTaskErrors {
    public static let invalidArgs = "org.freedesktop.DBus.Error.InvalidArgs"
    public static let failed = "org.freedesktop.DBus.Error.Failed"
    public static let noSuchTask = BgTaskNames.errorPrefix + "NoSuchTask"
    public static let notPermitted = BgTaskNames.errorPrefix + "NotPermitted"
    public static let unknownApplication = BgTaskNames.errorPrefix + "UnknownApplication"
    public static let modeNotDeclared = BgTaskNames.errorPrefix + "ModeNotDeclared"
    public static let refreshDisabled = BgTaskNames.errorPrefix + "RefreshDisabled"
    public static let limitExceeded = BgTaskNames.errorPrefix + "LimitExceeded"
    public static let payloadTooLarge = BgTaskNames.errorPrefix + "PayloadTooLarge"
    public static let noSuchToken = BgTaskNames.errorPrefix + "NoSuchToken"
    /// A write could not be made durable (the disk is full, an I/O error):
    /// nothing of the call took effect. The message says why.
    public static let storageFailed = BgTaskNames.errorPrefix + "StorageFailed"

    /// Why a string argument cannot be read (sd-bus answers `-EBADMSG`).
    public static let unreadableString =
        "a string argument cannot be read: it is not valid UTF-8, or it holds a Unicode noncharacter "
        + "(U+FDD0–U+FDEF, or a code point ending in FFFE or FFFF), which the D-Bus specification allows "
        + "but the bus library bgtaskd is built on (libsystemd's sd-bus) refuses"

    /// The bus error name for an error code of the core (`InvalidArgs`, `NoSuchTask` …).
    public static func name(forCode code: String) -> String {
        switch code {
        case "InvalidArgs": invalidArgs
        case "Failed": failed
        default: BgTaskNames.errorPrefix + code
        }
    }
}
