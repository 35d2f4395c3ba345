import XCTest

@testable import MicroHTTP

/// Behaviour 1: keep-alive, chunked POST bodies, 413 (by Content-Length and chunked),
/// 404/405 problem documents, query and header decoding, path parameters, deferred replies.
final class RequestTests: XCTestCase {
    private func echoServer(bodyLimit: Int = 1 << 20) throws -> HTTPServer {
        try startServer({ $0.bodyLimit = bodyLimit }) { router in
            let echo: Handler = { request in
                var lines = [
                    "method=\(request.method)", "path=\(request.path)",
                    "peer=\(request.peer ?? "-")", "bytes=\(request.body.count)",
                    "body=\(String(decoding: request.body, as: UTF8.self))",
                ]
                for (name, value) in request.query.sorted(by: { $0.key < $1.key }) {
                    lines.append("q.\(name)=\(value)")
                }
                for (name, value) in request.pathParameters.sorted(by: { $0.key < $1.key }) {
                    lines.append("p.\(name)=\(value)")
                }
                lines.append("h.x-custom=\(request.headers["x-CUSTOM"] ?? "-")")
                return .response(.text(lines.joined(separator: "\n")))
            }
            router.add(.GET, "/echo", echo)
            router.add(.POST, "/echo", echo)
            router.add(.GET, "/items/{id}/parts/{part}", echo)
            router.add(.GET, "/items/new", { _ in .response(.text("literal")) })
            router.add(.DELETE, "/items/{id}/parts/{part}", echo)
            router.add(.GET, "/now") { _ in
                .deferred { responder in responder.respond(.json(Array("{\"late\":false}".utf8), status: 202)) }
            }
            router.add(.GET, "/forgotten") { _ in .deferred { _ in } }
            router.add(.GET, "/later") { _ in
                .deferred { responder in
                    DispatchQueue.global().asyncAfter(deadline: .now() + 0.05) {
                        responder.respond(.json(Array("{\"late\":true}".utf8), status: 202))
                    }
                }
            }
        }
    }

    /// Everything the server sends until it closes the connection (or the client's receive
    /// timeout), and whether it closed.
    private func readUntilClosed(_ client: TestClient) -> (text: String, closed: Bool) {
        var received: [UInt8] = []
        while true {
            do {
                received += try client.socket.receive()
            } catch TestSocket.Failure.closed {
                return (String(decoding: received, as: UTF8.self), true)
            } catch {
                return (String(decoding: received, as: UTF8.self), false)
            }
        }
    }

    func testKeepAliveQueryHeadersAndPathParameters() throws {
        let server = try echoServer()
        defer { server.stop() }
        let client = try TestClient(port: server.port)

        let first = try XCTUnwrap(
            client.request(
                "GET", "/echo?name=J%C3%BCrgen+Smith&name=second&flag&x=a%26b",
                headers: ["X-Custom: Value 1"]))
        XCTAssertEqual(first.status, 200)
        XCTAssertEqual(first.header("content-type"), "text/plain; charset=utf-8")
        let lines = Set(first.bodyText.split(separator: "\n").map(String.init))
        XCTAssertTrue(
            lines.isSuperset(of: [
                "method=GET", "path=/echo", "peer=127.0.0.1", "q.name=Jürgen Smith",
                "q.flag=", "q.x=a&b", "h.x-custom=Value 1",
            ]), first.bodyText)

        // The same socket again: keep-alive.
        let second = try XCTUnwrap(client.request("GET", "/items/42/parts/wheel"))
        XCTAssertEqual(second.status, 200)
        XCTAssertTrue(second.bodyText.contains("p.id=42\np.part=wheel"), second.bodyText)
        let third = try XCTUnwrap(client.request("GET", "/items/new"))
        XCTAssertEqual(third.bodyText, "literal")
        let posted = try XCTUnwrap(client.request("POST", "/echo", body: "hello body"))
        XCTAssertTrue(posted.bodyText.contains("body=hello body"), posted.bodyText)
        let head = try XCTUnwrap(client.request("HEAD", "/echo"))
        XCTAssertEqual(head.status, 200)
        XCTAssertFalse(client.isClosedByPeer(timeout: 0.1))
    }

    func testChunkedPostBody() throws {
        let server = try echoServer()
        defer { server.stop() }
        let client = try TestClient(port: server.port)
        client.send("POST /echo HTTP/1.1\r\nHost: test\r\nTransfer-Encoding: chunked\r\n\r\n")
        let pieces = ["first piece,", " second piece,", String(repeating: "x", count: 5000)]
        for piece in pieces {
            client.send(String(piece.utf8.count, radix: 16) + "\r\n" + piece + "\r\n")
            usleep(20_000)  // separate TCP segments: the body arrives in pieces
        }
        client.send("0\r\n\r\n")
        let response = try XCTUnwrap(client.readResponse())
        XCTAssertEqual(response.status, 200)
        XCTAssertTrue(response.bodyText.contains("bytes=\(pieces.joined().utf8.count)"), response.bodyText)
        XCTAssertTrue(response.bodyText.contains("body=first piece, second piece,xxx"))
    }

    func testBodyOverLimitIs413ByContentLengthBeforeReading() throws {
        let server = try echoServer(bodyLimit: 1024)
        defer { server.stop() }
        let client = try TestClient(port: server.port)
        // Only the head is sent: the 413 must come from Content-Length alone.
        client.send("POST /echo HTTP/1.1\r\nHost: test\r\nContent-Length: 5000000\r\n\r\n")
        let response = try XCTUnwrap(client.readResponse())
        XCTAssertEqual(response.status, 413)
        XCTAssertEqual(response.header("Content-Type"), "application/problem+json")
        XCTAssertTrue(
            response.bodyText.contains("\"detail\":\"request body exceeds the limit of 1024 bytes\""),
            response.bodyText)
        XCTAssertTrue(response.bodyText.contains("\"status\":413"))
    }

    func testChunkedBodyOverLimitIs413() throws {
        let server = try echoServer(bodyLimit: 1024)
        defer { server.stop() }
        let client = try TestClient(port: server.port)
        client.send("POST /echo HTTP/1.1\r\nHost: test\r\nTransfer-Encoding: chunked\r\n\r\n")
        let piece = String(repeating: "y", count: 700)
        for _ in 0..<2 { client.send(String(piece.utf8.count, radix: 16) + "\r\n" + piece + "\r\n") }
        client.send("0\r\n\r\n")
        let response = try XCTUnwrap(client.readResponse())
        XCTAssertEqual(response.status, 413)
        XCTAssertTrue(response.bodyText.contains("exceeds the limit of 1024 bytes"), response.bodyText)

        // The 413 comes as the body passes the limit, while the sender is still sending.
        let early = try TestClient(port: server.port, receiveTimeout: 3)
        early.send("POST /echo HTTP/1.1\r\nHost: test\r\nTransfer-Encoding: chunked\r\n\r\n")
        for _ in 0..<2 { early.send(String(piece.utf8.count, radix: 16) + "\r\n" + piece + "\r\n") }
        let refused = try XCTUnwrap(early.readResponse(), "no answer before the upload's end")
        XCTAssertEqual(refused.status, 413)
        XCTAssertEqual(refused.header("Connection"), "close")
        early.send("5\r\nabcdeXX\r\n")  // malformed: libmicrohttpd's own 400 must not follow the 413
        let (after, closed) = readUntilClosed(early)
        XCTAssertTrue(closed)
        XCTAssertEqual(after, "", "nothing after the 413")

        // An upload that goes on past twice the limit is cut off without waiting for its end.
        let endless = try TestClient(port: server.port)
        endless.send("POST /echo HTTP/1.1\r\nHost: test\r\nTransfer-Encoding: chunked\r\n\r\n")
        for _ in 0..<4 { endless.send(String(piece.utf8.count, radix: 16) + "\r\n" + piece + "\r\n") }
        XCTAssertTrue(endless.isClosedByPeer(timeout: 2))
    }

    func testUnknownPathIs404AndWrongMethodIs405WithAllow() throws {
        let server = try echoServer()
        defer { server.stop() }
        let client = try TestClient(port: server.port)
        let missing = try XCTUnwrap(client.request("GET", "/nothing/here"))
        XCTAssertEqual(missing.status, 404)
        XCTAssertEqual(missing.header("Content-Type"), "application/problem+json")
        XCTAssertTrue(missing.bodyText.contains("\"title\":\"Not Found\""), missing.bodyText)
        XCTAssertFalse(missing.bodyText.contains("/nothing/here"), "paths are not echoed (they may hold capabilities)")

        let wrong = try XCTUnwrap(client.request("PUT", "/items/1/parts/2", body: "{}"))
        XCTAssertEqual(wrong.status, 405)
        XCTAssertEqual(wrong.header("Allow"), "DELETE, GET, HEAD")
        XCTAssertTrue(wrong.bodyText.contains("\"status\":405"), wrong.bodyText)
    }

    func testDeferredReplyAnswersFromAnotherThread() throws {
        let server = try echoServer()
        defer { server.stop() }
        let client = try TestClient(port: server.port)
        for _ in 0..<3 {
            let response = try XCTUnwrap(client.request("GET", "/later"))
            XCTAssertEqual(response.status, 202)
            XCTAssertEqual(response.bodyText, "{\"late\":true}")
        }
    }

    /// A handler that drops its responder unanswered: the request is answered 500, not held.
    func testADeferredReplyDroppedUnansweredIsA500() throws {
        let server = try echoServer()
        defer { server.stop() }
        let client = try TestClient(port: server.port)
        let forgotten = try XCTUnwrap(client.request("GET", "/forgotten"))
        XCTAssertEqual(forgotten.status, 500)
        XCTAssertTrue(forgotten.bodyText.contains("finished without answering"), forgotten.bodyText)
        let answered = try XCTUnwrap(client.request("GET", "/now"))
        XCTAssertEqual(answered.status, 202, "the connection serves on")
    }

    /// A client may send its request and then its end of the stream (`shutdown(SHUT_WR)`, as
    /// `nc -N` does) and still read the answer: libmicrohttpd reads a resumed connection before
    /// it calls back, and it must not close on that end before a deferred reply is answered.
    /// Requests sent ahead of the end all get their answer; then the connection closes.
    func testADeferredReplyReachesAClientThatHalfClosed() throws {
        let server = try echoServer()
        defer { server.stop() }
        // One idle keep-alive connection besides: libmicrohttpd 0.9.75 (epoll) first looks at the
        // oldest connection of its timeout list on each turn, and a resumed connection that is the
        // only one is answered before it is read; behind an older one it is read first.
        let idle = try TestClient(port: server.port)
        XCTAssertEqual(idle.request("GET", "/echo")?.status, 200)

        let later = "GET /later HTTP/1.1\r\nHost: t\r\n\r\n"
        let now = "GET /now HTTP/1.1\r\nHost: t\r\n\r\n"
        for (requests, answers) in [
            (later, 1), (now, 1), ("GET /later HTTP/1.0\r\n\r\n", 1), (now + later, 2), (later + now, 2),
            (later + later, 2), ("POST /echo HTTP/1.1\r\nHost: t\r\nContent-Length: 2\r\n\r\nhi" + later, 2),
        ] {
            let client = try TestClient(port: server.port, receiveTimeout: 3)
            client.send(requests)
            XCTAssertEqual(shutdown(client.socket.fd, Int32(SHUT_WR)), 0)
            let (text, closed) = readUntilClosed(client)
            let statuses = text.components(separatedBy: "HTTP/1.1 ").dropFirst().map { $0.prefix(3) }
            XCTAssertEqual(statuses.count, answers, "\(requests.debugDescription) got \(text.debugDescription)")
            XCTAssertTrue(statuses.allSatisfy { $0 == "200" || $0 == "202" }, text)
            XCTAssertTrue(closed, "the connection stays open after its answers to \(requests.debugDescription)")
        }
        XCTAssertFalse(idle.isClosedByPeer(timeout: 0.1), "the idle connection the cases need was closed")
    }

    /// The client's end of stream waits behind its request when libmicrohttpd first reads it (the
    /// one thread is busy meanwhile): the short read raised no new epoll event, and the
    /// connection stayed open until its idle timeout after the answer.
    func testAConnectionWhoseEndCameWithItsRequestClosesAfterTheAnswer() throws {
        let server = try startServer({ $0.connectionTimeout = 20 }) { router in
            router.add(.GET, "/now") { _ in .response(.text("now")) }
            router.add(.GET, "/busy") { _ in
                usleep(300_000)
                return .response(.text("done"))
            }
        }
        defer { server.stop() }
        let now = "GET /now HTTP/1.1\r\nHost: t\r\n\r\n"
        for (requests, answers) in [(now, 1), (now + now, 2), ("GET /now HTTP/1.1\r\nHo", 0)] {
            let busy = try TestClient(port: server.port)
            busy.send("GET /busy HTTP/1.1\r\nHost: t\r\n\r\n")
            usleep(100_000)  // the server's one thread is in /busy
            let client = try TestClient(port: server.port, receiveTimeout: 5)
            client.send(requests)
            XCTAssertEqual(shutdown(client.socket.fd, Int32(SHUT_WR)), 0)
            let sent = monotonicNow()
            let (text, closed) = readUntilClosed(client)
            let statuses = text.components(separatedBy: "HTTP/1.1 ").dropFirst().map { $0.prefix(3) }
            XCTAssertEqual(statuses, Array(repeating: "200", count: answers), requests.debugDescription)
            XCTAssertTrue(closed, "the connection stays open after \(requests.debugDescription)")
            XCTAssertLessThan(monotonicNow() - sent, 2, requests.debugDescription)
            XCTAssertEqual(busy.readResponse()?.bodyText, "done")
        }
    }

    func testThreadPoolServesAndStops() throws {
        let server = try startServer({ $0.threads = 2 }) { router in
            router.add(.GET, "/n/{n}") { request in .response(.text(request.pathParameters["n"] ?? "")) }
        }
        let clients = try (0..<4).map { _ in try TestClient(port: server.port) }
        for round in 0..<10 {
            for (index, client) in clients.enumerated() {
                XCTAssertEqual(client.request("GET", "/n/\(round * 10 + index)")?.bodyText, "\(round * 10 + index)")
            }
        }
        server.stop(deadline: 1)
        XCTAssertTrue(clients.allSatisfy { $0.isClosedByPeer(timeout: 2) })
    }

    func testLimitsPerIPAndSlowlorisTimeout() throws {
        try checkLimitsPerIPAndSlowlorisTimeout(threads: 1)
    }

    /// The acceptor counts for every thread's daemon: one address's connections meet one count.
    func testLimitsPerIPHoldAcrossThreads() throws {
        try checkLimitsPerIPAndSlowlorisTimeout(threads: 3)
    }

    private func checkLimitsPerIPAndSlowlorisTimeout(threads: Int) throws {
        let server = try startServer({
            $0.connectionsPerIP = 2
            $0.connectionTimeout = 1
            $0.threads = threads
        }) { router in
            router.add(.GET, "/ping") { _ in .response(.text("pong")) }
        }
        defer { server.stop() }
        let first = try TestClient(port: server.port)
        let second = try TestClient(port: server.port)
        XCTAssertEqual(first.request("GET", "/ping")?.bodyText, "pong")
        XCTAssertEqual(second.request("GET", "/ping")?.bodyText, "pong")
        let third = try TestClient(port: server.port)
        XCTAssertEqual(third.request("GET", "/ping")?.status, 429, "a third connection from one IP is refused")

        // A client that sends half a request head and stalls is dropped after the timeout.
        first.send("GET /ping HTTP/1.1\r\nHost: te")
        let start = monotonicNow()
        XCTAssertTrue(first.isClosedByPeer(timeout: 4))
        XCTAssertLessThan(monotonicNow() - start, 3.5)
    }

    func testBindingATakenPortThrows() throws {
        let server = try echoServer()
        defer { server.stop() }
        var configuration = HTTPServerConfiguration()
        configuration.port = server.port
        let second = HTTPServer(configuration: configuration, router: Router())
        XCTAssertThrowsError(try second.start()) { error in
            XCTAssertTrue("\(error)".contains("cannot listen on 127.0.0.1:\(server.port)"), "\(error)")
        }
    }

    /// `decorate` sees every response the layer makes itself (framing 400, 404, 405, 413,
    /// 503 while stopping) and none of a handler's.
    func testDecorateMarksTheLayersOwnAnswersOnly() throws {
        let stuck = DispatchSemaphore(value: 0)
        let held = HeldResponders()
        let server = try startServer({ configuration in
            configuration.bodyLimit = 100
            configuration.decorate = { head, response in
                response.headers.add("X-Decorated", "\(head.method) \(head.path) \(head.headers["X-Tag"] ?? "-")")
            }
        }) { router in
            router.add(.GET, "/ok") { _ in .response(.text("fine")) }
            router.add(.POST, "/ok") { _ in .response(.text("fine")) }
            router.add(.GET, "/slow") { _ in
                .deferred {
                    held.keep($0)
                    stuck.signal()
                }
            }  // answered by stop()
        }
        var stopped = false
        defer { if !stopped { server.stop() } }
        func ask(_ text: String) throws -> ResponseParser? {
            let client = try TestClient(port: server.port, receiveTimeout: 5)
            client.send(text)
            return client.readResponse()
        }
        let cases: [(String, Int, String)] = [
            ("GET /ok HTTP/1.1\r\nHost: t\r\nX-Tag: a\r\n\r\n", 200, ""),
            ("GET /nowhere HTTP/1.1\r\nHost: t\r\nX-Tag: b\r\n\r\n", 404, "GET /nowhere b"),
            ("DELETE /ok HTTP/1.1\r\nHost: t\r\nX-Tag: c\r\n\r\n", 405, "DELETE /ok c"),
            ("POST /ok HTTP/1.1\r\nHost: t\r\nX-Tag: d\r\nContent-Length: 500\r\n\r\n", 413, "POST /ok d"),
            ("GET /ok HTTP/1.1\r\nX-Tag: e\r\n\r\n", 400, "GET /ok e"),
            (
                "POST /ok HTTP/1.1\r\nHost: t\r\nX-Tag: f\r\nContent-Length: 2\r\nContent-Length: 3\r\n\r\nab", 400,
                "POST /ok f"
            ),
        ]
        for (request, status, mark) in cases {
            let response = try XCTUnwrap(try ask(request), request)
            XCTAssertEqual(response.status, status, request)
            XCTAssertEqual(response.header("X-Decorated") ?? "", mark, request)
        }

        // 503 while stopping, to a keep-alive connection that asks again once stop() has begun.
        let kept = try TestClient(port: server.port, receiveTimeout: 5)
        kept.send("GET /ok HTTP/1.1\r\nHost: t\r\n\r\n")
        XCTAssertEqual(kept.readResponse()?.status, 200)
        let slow = try TestClient(port: server.port, receiveTimeout: 5)
        slow.send("GET /slow HTTP/1.1\r\nHost: t\r\n\r\n")  // holds stop() in its drain phase
        XCTAssertEqual(stuck.wait(timeout: .now() + 5), .success)
        let stopping = DispatchSemaphore(value: 0)
        DispatchQueue.global().async {
            server.stop(deadline: 2)
            stopping.signal()
        }
        stopped = true
        XCTAssertTrue(waitUntil(timeout: 5) { server.isStopping })
        kept.send("GET /ok HTTP/1.1\r\nHost: t\r\nX-Tag: g\r\n\r\n")
        let refused = try XCTUnwrap(kept.readResponse())
        XCTAssertEqual(refused.status, 503)
        XCTAssertEqual(refused.header("X-Decorated"), "GET /ok g")
        XCTAssertEqual(stopping.wait(timeout: .now() + 10), .success)
    }
}

extension RequestTests {
    /// At the connection limit a new connection's request is answered 503 with Retry-After,
    /// through `decorate` (so CORS headers reach a browser), and the connection is closed;
    /// once a slot is free, new connections are served again.
    func testAConnectionPastTheLimitIsAnswered503ThenClosed() throws {
        let server = try startServer({ configuration in
            configuration.connectionLimit = 2
            configuration.decorate = { head, response in
                response.headers.add("X-Decorated", "\(head.method) \(head.path)")
            }
        }) { router in
            router.add(.GET, "/ok") { _ in .response(.text("fine")) }
        }
        defer { server.stop() }
        var first: TestClient? = try TestClient(port: server.port, receiveTimeout: 5)
        let second = try TestClient(port: server.port, receiveTimeout: 5)
        XCTAssertEqual(first?.request("GET", "/ok")?.status, 200)
        XCTAssertEqual(second.request("GET", "/ok")?.status, 200)

        let third = try TestClient(port: server.port, receiveTimeout: 5)
        let refused = try XCTUnwrap(third.request("GET", "/ok"))
        XCTAssertEqual(refused.status, 503)
        XCTAssertEqual(refused.header("Retry-After"), "1")
        XCTAssertEqual(refused.header("Content-Type"), "application/problem+json")
        XCTAssertEqual(refused.header("X-Decorated"), "GET /ok")
        XCTAssertTrue(refused.bodyText.contains("limit of 2 connections"), refused.bodyText)
        XCTAssertTrue(third.isClosedByPeer())
        XCTAssertEqual(first?.request("GET", "/ok")?.status, 200, "a connection within the limit is unaffected")

        first = nil  // closes its socket
        XCTAssertTrue(
            waitUntil(timeout: 5) {
                (try? TestClient(port: server.port, receiveTimeout: 2))?.request("GET", "/ok")?.status == 200
            }, "a freed slot was not given to a new connection")
    }
}

extension RequestTests {
    /// Past the limit and its over-limit slots nothing more is accepted: a new connection waits
    /// in the listen backlog, unanswered, until a connection closes; then it is accepted.
    func testPastTheOverLimitSlotsConnectionsWaitInTheBacklog() throws {
        let server = try startServer({ $0.connectionLimit = 1 }) { router in
            router.add(.GET, "/ok") { _ in .response(.text("fine")) }
        }
        defer { server.stop() }
        let capacity = 1 + HTTPServer.overLimitSlots
        let served = try TestClient(port: server.port, receiveTimeout: 5)
        XCTAssertEqual(served.request("GET", "/ok")?.status, 200)
        var idle = try (1..<capacity).map { _ in try TestClient(port: server.port) }  // silent: they keep their slots
        XCTAssertTrue(waitUntil(timeout: 5) { server.openConnectionCount == capacity })

        let waiting = try TestClient(port: server.port, receiveTimeout: 1)
        waiting.send("GET /ok HTTP/1.1\r\nHost: test\r\n\r\n")
        XCTAssertNil(waiting.readResponse(), "a connection past every slot was served")
        XCTAssertEqual(server.openConnectionCount, capacity)

        idle.removeLast()  // one closes: the waiting connection is accepted, past the limit
        waiting.socket.setTimeout(5)
        XCTAssertEqual(waiting.readResponse()?.status, 503)
        XCTAssertEqual(served.request("GET", "/ok")?.status, 200)
    }
}

/// Keeps responders unanswered (a dropped one answers 500 at once).
private final class HeldResponders: @unchecked Sendable {
    private let lock = NSLock()
    private var responders: [Responder] = []
    func keep(_ responder: Responder) {
        lock.lock()
        responders.append(responder)
        lock.unlock()
    }
}
