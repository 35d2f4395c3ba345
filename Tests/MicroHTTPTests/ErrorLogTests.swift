import Foundation
import XCTest

@testable import MicroHTTP

/// libmicrohttpd's own error log goes to `HTTPServerConfiguration.errorLog`, never to stderr:
/// clients that vanish or send nonsense cannot flood the process's log.
final class ErrorLogTests: XCTestCase {
    /// Runs `body` with fd 2 pointed at a file; returns what was written to it.
    private func capturingStderr(_ body: () throws -> Void) rethrows -> String {
        let path = NSTemporaryDirectory() + "stderr-\(getpid())-\(UInt32.random(in: 0...UInt32.max))"
        let file = open(path, O_CREAT | O_TRUNC | O_WRONLY, 0o600)
        let saved = dup(2)
        dup2(file, 2)
        defer {
            dup2(saved, 2)
            close(saved)
            close(file)
            unlink(path)
        }
        try body()
        return (try? String(contentsOfFile: path, encoding: .utf8)) ?? ""
    }

    func testLibmicrohttpdLinesGoToTheHandlerNotStderr() throws {
        let lines = Locked<[String]>([])
        let registry = StreamRegistry()
        var server: HTTPServer!
        let stderr = try capturingStderr {
            server = try startServer({
                $0.bodyLimit = 1024
                $0.errorLog = { line in lines.update { $0.append(line) } }
            }) { router in
                router.add(.POST, "/echo") { request in .response(Response(body: request.body)) }
                router.add(.GET, "/events") { _ in .eventStream(headers: HTTPHeaders()) { registry.add($0) } }
            }
            // An upload cut off past twice the body limit: the handler says no, libmicrohttpd logs it.
            let client = try TestClient(port: server.port)
            client.send("POST /echo HTTP/1.1\r\nHost: test\r\nTransfer-Encoding: chunked\r\n\r\n")
            let piece = String(repeating: "y", count: 700)
            for _ in 0..<4 { client.send(String(piece.utf8.count, radix: 16) + "\r\n" + piece + "\r\n") }
            XCTAssertTrue(client.isClosedByPeer(timeout: 2))
            // 50 event-stream clients vanish; the heartbeat's writes find them, libmicrohttpd logs each.
            let fleet = try StreamFleet(port: server.port, count: 50, path: "/events")
            XCTAssertTrue(waitUntil(timeout: 5) { server.openStreamCount == 50 })
            fleet.resetAll()
            XCTAssertTrue(waitUntil(timeout: 5) { server.openStreamCount == 0 })
            server.stop()
        }
        XCTAssertFalse(lines.value.isEmpty, "libmicrohttpd logged something")
        XCTAssertTrue(lines.value.contains { $0.contains("internal error") }, "\(lines.value.prefix(5))")
        XCTAssertTrue(lines.value.allSatisfy { !$0.hasSuffix("\n") }, "one line per call, without its newline")
        XCTAssertFalse(
            lines.value.contains { $0.contains("not the first option") }, "the logger is set before any option")
        XCTAssertEqual(server.lastErrorLogLine, lines.value.last)
        XCTAssertFalse(
            stderr.contains("internal error") || stderr.contains("Failed to send"),
            "nothing of libmicrohttpd's on stderr: \(stderr.prefix(300))")
        print("libmicrohttpd lines routed to the handler: \(lines.value.count); e.g. \(lines.value.first ?? "")")
    }

    func testWithoutAHandlerTheLinesAreDropped() throws {
        let stderr = try capturingStderr {
            let server = try startServer({ $0.bodyLimit = 1024 }) { router in
                router.add(.POST, "/echo") { request in .response(Response(body: request.body)) }
            }
            let client = try TestClient(port: server.port)
            client.send("POST /echo HTTP/1.1\r\nHost: test\r\nTransfer-Encoding: chunked\r\n\r\n")
            let piece = String(repeating: "y", count: 700)
            for _ in 0..<4 { client.send(String(piece.utf8.count, radix: 16) + "\r\n" + piece + "\r\n") }
            XCTAssertTrue(client.isClosedByPeer(timeout: 2))
            // The 413 ends the client's side at once; the cut past twice the limit, which
            // libmicrohttpd logs, comes as the server reads the rest.
            XCTAssertTrue(waitUntil(timeout: 2) { server.lastErrorLogLine != nil })
            server.stop()
        }
        XCTAssertEqual(stderr, "")
    }
}
