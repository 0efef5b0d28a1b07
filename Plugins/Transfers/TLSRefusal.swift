import NIOSSL

/// A TLS failure no retry mends: the handshake failed on what the server
/// presented (a certificate that is not trusted or not for its host) or
/// spoke (no TLS at all on that port), not on a broken connection. Retried
/// with backoff such a transfer waited for days with nothing said to its app.
enum TLSRefusal {
    /// Why `error` is such a failure, for the app and the log; nil for any
    /// other error (an end of stream during the handshake is a network one).
    static func reason(of error: any Error) -> String? {
        if let extra = error as? NIOSSLExtraError, extra == .failedToValidateHostname {
            return "the server's certificate is not for its host name"
        }
        guard let ssl = error as? NIOSSLError, case .handshakeFailed(.sslError(let stack)) = ssl else { return nil }
        // "Error: 268435581 error:1000007d:SSL routines:OPENSSL_internal:CERTIFICATE_VERIFY_FAILED at FILE:LINE";
        // the library's own notes (an EOF) have no code, and no file of its build is worth showing.
        let reasons = stack.map(\.description).compactMap { text -> String? in
            guard text.hasPrefix("Error: "), text.dropFirst(7).first?.isNumber == true else { return nil }
            let message = text.components(separatedBy: " at ")[0]
            return message.split(separator: ":").last.map(String.init)
        }
        guard !reasons.isEmpty else { return nil }
        let what = reasons.contains("CERTIFICATE_VERIFY_FAILED") ? "the server's certificate is not trusted" : "the TLS handshake with the server failed"
        return "\(what) (\(reasons.joined(separator: ", "))); not retried"
    }
}
