import Dispatch
import Glibc

/// The first SIGTERM or SIGINT, as something to await: a user-started app
/// runs until then, then says goodbye and closes its connection.
final class StopSignal: Sendable {
    private let stream: AsyncStream<String>
    private nonisolated(unsafe) let sources: [any DispatchSourceSignal]

    init() {
        let (stream, continuation) = AsyncStream.makeStream(of: String.self)
        self.stream = stream
        sources = [(SIGTERM, "SIGTERM"), (SIGINT, "SIGINT")].map { number, name in
            signal(number, SIG_IGN)  // the dispatch source takes it instead
            let source = DispatchSource.makeSignalSource(signal: number, queue: .global())
            source.setEventHandler { continuation.yield(name) }
            source.resume()
            return source
        }
    }

    /// The name of the first stop signal, once one arrived.
    func first() async -> String {
        for await name in stream { return name }
        return "end"
    }
}
