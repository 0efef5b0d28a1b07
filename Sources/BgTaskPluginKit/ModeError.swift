@_exported public import BgTaskProtocol

/// An error a plugin answers a call with: the vocabulary's one error type
/// (a D-Bus error name and a message).
public typealias ModeError = BgTaskError
