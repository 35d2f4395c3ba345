import XCTest

@testable import MicroHTTP

/// Starts a server on 127.0.0.1, port 0, with short heartbeats unless told otherwise.
func startServer(
    _ configure: (inout HTTPServerConfiguration) -> Void = { _ in },
    routes: (inout Router) -> Void
) throws -> HTTPServer {
    var configuration = HTTPServerConfiguration()
    configuration.host = "127.0.0.1"
    configuration.port = 0
    configuration.heartbeatInterval = 0.25
    configure(&configuration)
    var router = Router()
    routes(&router)
    let server = HTTPServer(configuration: configuration, router: router)
    try server.start()
    XCTAssertNotEqual(server.port, 0)
    return server
}

/// The streams a test server opened, in order, for the test to send to.
final class StreamRegistry: @unchecked Sendable {
    private let lock = NSLock()
    private var streams: [EventStream] = []
    private var reasons: [StreamCloseReason] = []

    func add(_ stream: EventStream) {
        lock.lock()
        streams.append(stream)
        lock.unlock()
        stream.onClose { reason in
            self.lock.lock()
            self.reasons.append(reason)
            self.lock.unlock()
        }
    }
    var all: [EventStream] {
        lock.lock()
        defer { lock.unlock() }
        return streams
    }
    var closeReasons: [StreamCloseReason] {
        lock.lock()
        defer { lock.unlock() }
        return reasons
    }
    func send(_ frame: Frame) { for stream in all { stream.send(frame) } }
}
