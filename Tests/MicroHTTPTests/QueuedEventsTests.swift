import XCTest

@testable import MicroHTTP

/// Issue 26, item 4: the events waiting for one subscriber leave together. The stream's reader
/// copies every queued frame that fits into libmicrohttpd's write buffer, which sends it as one
/// chunk in one send(2): what the wire shows is one chunk for all of them, not one per event.
final class QueuedEventsTests: XCTestCase {
    func testEventsQueuedTogetherLeaveInOneChunk() throws {
        let registry = StreamRegistry()
        let server = try startServer({ $0.heartbeatInterval = 60 }) { router in
            router.add(.GET, "/events") { _ in
                .eventStream(headers: HTTPHeaders()) { stream in
                    stream.send(Frame("retry: 1000\n\n"))
                    registry.add(stream)
                }
            }
        }
        defer { server.stop() }
        let socket = try TestSocket(port: server.port)
        try socket.write("GET /events HTTP/1.1\r\nHost: t\r\n\r\n")
        var received: [UInt8] = []
        func receive(until done: ([UInt8]) -> Bool) throws {
            while !done(received) { received += try socket.receive() }
        }
        let opened = Array("retry: 1000\n\n\r\n".utf8)
        try receive { $0.firstRange(of: opened) != nil }
        XCTAssertTrue(waitUntil(timeout: 5) { registry.all.first?.isSuspended == true }, "the reader waits for events")
        let start = received.count
        // The reader finds the queue empty and suspends the connection; the 40 frames are queued
        // before the one resume the batch ends with.
        let frames = (0..<40).map { "id: \($0)\ndata: event \($0)\n\n" }
        EventStream.batchingResumes { for frame in frames { registry.send(Frame(frame)) } }
        let all = Array(frames.joined().utf8)
        let last = Array(frames.last!.utf8)
        try receive { $0[start...].firstRange(of: last) != nil }
        try receive { $0.count - start >= all.count + 2 + String(all.count, radix: 16).count + 2 }
        // One chunk: its size line, then every frame, then its CRLF.
        let chunk = Array(String(all.count, radix: 16).utf8) + Array("\r\n".utf8) + all + Array("\r\n".utf8)
        XCTAssertEqual(String(decoding: received[start...], as: UTF8.self), String(decoding: chunk, as: UTF8.self))
    }
}
