public import BgTaskProtocol

/// An error the core answers a request with: the vocabulary's one error type.
public typealias CoreError = BgTaskError
