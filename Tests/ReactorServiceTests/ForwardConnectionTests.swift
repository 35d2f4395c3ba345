import XCTest

@testable import ReactorService

#if canImport(Glibc)
import Glibc
#endif

/// The forwarding node's side of a forward: an answer read as bytes over a real socket, in
/// whatever pieces the holder's writes arrive, on a connection kept for the next exchange.
final class ForwardConnectionTests: XCTestCase {
    func testTheHeadIsReadAsBytes() throws {
        func head(_ text: String) -> AnswerHead? { AnswerHead(Array(text.utf8)[...]) }
        let answer = try XCTUnwrap(
            head(
                "HTTP/1.1 412 Precondition Failed\r\ncontent-type: application/problem+json\r\nETag:  \"7\" \r\n"
                    + "Date: x\r\nCONTENT-LENGTH: 12\r\nReactord-Not-Applied: true\r\nX-Other: dropped"))
        XCTAssertEqual(answer.status, 412)
        XCTAssertEqual(answer.contentLength, 12)
        XCTAssertTrue(answer.keepAlive)
        XCTAssertEqual(answer.headers["Content-Type"], "application/problem+json")
        XCTAssertEqual(answer.headers["ETag"], "\"7\"", "the value without the spaces around it")
        XCTAssertEqual(answer.headers["Reactord-Not-Applied"], "true")
        XCTAssertNil(answer.headers["Date"], "the forwarding node sets its own")
        XCTAssertNil(answer.headers["X-Other"])
        XCTAssertEqual(answer.headers.count, 3)

        XCTAssertFalse(try XCTUnwrap(head("HTTP/1.0 200 OK\r\nContent-Length: 2")).keepAlive, "HTTP/1.0 closes")
        XCTAssertFalse(try XCTUnwrap(head("HTTP/1.1 200 OK\r\nContent-Length: 2\r\nConnection: Close")).keepAlive)
        let delimited = try XCTUnwrap(head("HTTP/1.1 200 OK\r\nContent-Type: text/plain"))
        XCTAssertNil(delimited.contentLength, "no length: the body runs to the close")
        XCTAssertFalse(delimited.keepAlive)
        XCTAssertEqual(try XCTUnwrap(head("HTTP/1.1 204 No Content")).contentLength, 0)
        XCTAssertEqual(try XCTUnwrap(head("HTTP/1.1 503")).status, 503, "a status line without a reason")
        for garbage in ["", "HTTP/2 200 OK", "HTTP/1.1 2x0 OK", "HTTP/1.1 2000 OK", "SSH-2.0-OpenSSH", "HTTP/1.1  200"]
        {
            XCTAssertNil(head(garbage), garbage)
        }
        XCTAssertNil(try XCTUnwrap(head("HTTP/1.1 200 OK\r\nContent-Length: -1")).contentLength)
    }

    func testAnswersInPiecesOnOneKeptConnection() throws {
        let peer = try Peer()
        defer { peer.close() }
        let first = "HTTP/1.1 200 OK\r\nContent-Type: application/json\r\nContent-Length: 11\r\n\r\n{\"count\":1}"
        let second = "HTTP/1.1 201 Created\r\nLocation: /sessions/b\r\nContent-Length: 2\r\n\r\n{}"
        let last = "HTTP/1.1 200 OK\r\nContent-Type: text/plain\r\n\r\nuntil the close"
        let writer = Thread {
            // The first answer in three writes, cut inside a header line and inside the body.
            peer.answer([String(first.prefix(30)), String(first.dropFirst(30).prefix(40)), String(first.dropFirst(70))])
            peer.answer([second])
            peer.answer([last], thenClose: true)
        }
        writer.start()
        let connection = try ForwardConnection.open("http://127.0.0.1:\(peer.port)", timeout: 5).get()
        defer { connection.close() }
        for (expected, status, keepAlive) in [
            ("{\"count\":1}", 200, true), ("{}", 201, true), ("until the close", 200, false),
        ] {
            guard
                case let .answered(response, kept) = connection.exchange(
                    Array("GET / HTTP/1.1\r\n\r\n".utf8), timeout: 5)
            else { return XCTFail("no answer for \(expected)") }
            XCTAssertEqual(response.status, status)
            XCTAssertEqual(
                String(decoding: response.body, as: UTF8.self), expected, "no byte of an earlier answer left over")
            XCTAssertEqual(kept, keepAlive)
        }
        peer.waitDone()
    }

    /// What tells a holder started again on its address from one killed a moment ago: a killed
    /// process's listening socket still completes handshakes (its backlog) until the kernel
    /// closes it, but nothing answers there.
    func testOnlyAnAnswerCountsAsAServerAtAnAddress() throws {
        let silent = try Peer()
        defer { silent.close() }
        let address = "http://127.0.0.1:\(silent.port)"
        XCTAssertNoThrow(try ForwardConnection.open(address, timeout: 1).get().close(), "it connects")
        XCTAssertFalse(ForwardConnection.answers(address, timeout: 0.3), "a listener that never accepts")

        let answering = try Peer()
        defer { answering.close() }
        let writer = Thread { answering.answer(["HTTP/1.1 503 Service Unavailable\r\nContent-Length: 0\r\n\r\n"]) }
        writer.start()
        XCTAssertTrue(ForwardConnection.answers("http://127.0.0.1:\(answering.port)", timeout: 5), "any status")
    }
}

/// A one-connection TCP peer on 127.0.0.1 that reads a request head, then writes an answer.
private final class Peer: @unchecked Sendable {
    let port: UInt16
    private let listener: Int32
    private var connection: Int32 = -1
    private let done = DispatchSemaphore(value: 0)

    init() throws {
        let listener = socket(AF_INET, Int32(SOCK_STREAM.rawValue), 0)
        self.listener = listener
        var address = sockaddr_in()
        address.sin_family = sa_family_t(AF_INET)
        address.sin_addr.s_addr = inet_addr("127.0.0.1")
        var length = socklen_t(MemoryLayout<sockaddr_in>.size)
        let bound = withUnsafeMutablePointer(to: &address) {
            $0.withMemoryRebound(to: sockaddr.self, capacity: 1) {
                bind(listener, $0, length) == 0 && getsockname(listener, $0, &length) == 0
            }
        }
        guard bound, listen(listener, 1) == 0 else { throw POSIXError(.EADDRINUSE) }
        port = UInt16(bigEndian: address.sin_port)
    }

    /// Waits for the request's head, then writes `pieces` a few milliseconds apart.
    func answer(_ pieces: [String], thenClose: Bool = false) {
        if connection < 0 { connection = accept(listener, nil, nil) }
        var head: [UInt8] = []
        var byte: UInt8 = 0
        while !head.suffix(4).elementsEqual([13, 10, 13, 10]), recv(connection, &byte, 1, 0) == 1 { head.append(byte) }
        for piece in pieces {
            _ = Array(piece.utf8).withUnsafeBytes { send(connection, $0.baseAddress, $0.count, Int32(MSG_NOSIGNAL)) }
            usleep(5_000)
        }
        if thenClose {
            Glibc.close(connection)
            done.signal()
        }
    }

    func waitDone() { _ = done.wait(timeout: .now() + 10) }

    func close() { Glibc.close(listener) }
}
