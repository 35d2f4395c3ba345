import XCTest

@testable import MicroHTTP

/// Behaviour 6: a graceful, bounded stop with streams open and a request in flight.
final class StopTests: XCTestCase {
    private func server(
        _ registry: StreamRegistry, started: DispatchSemaphore,
        answerAfter delay: Double?
    ) throws -> HTTPServer {
        try startServer({ $0.heartbeatInterval = 60 }) { router in
            router.add(.GET, "/events") { _ in
                .eventStream(headers: HTTPHeaders()) { stream in registry.add(stream) }
            }
            router.add(.GET, "/slow") { _ in
                .deferred { responder in
                    started.signal()
                    guard let delay else {
                        // Never answers while the server runs: hold the responder past stop().
                        DispatchQueue.global().asyncAfter(deadline: .now() + 30) { _ = responder }
                        return
                    }
                    DispatchQueue.global().asyncAfter(deadline: .now() + delay) {
                        responder.respond(.text("late answer"))
                    }
                }
            }
        }
    }

    /// Requests libmicrohttpd ends before the access handler's first call (a head it answers
    /// itself, a client gone mid-head, a malformed target) must not count as completed ones: the
    /// count went below zero, and stop() waited on it for most of its deadline.
    func testRequestsEndedBeforeTheHandlerLeaveNothingInFlight() throws {
        let server = try startServer { router in router.add(.GET, "/hello") { _ in .response(.text("hi")) } }
        for head in [
            "GET /hello HTTP/1.1\r\nHost: t\r\nNoColonHere\r\n\r\n",  // libmicrohttpd's own 400
            "GET /hello HTTP/1.1\r\nHost: t\r\nX-Half: ",  // then the client leaves
            "GET /a b HTTP/1.1\r\nHost: t\r\n\r\n",  // our 400
            "GET /hello HTTP/1.1\r\nHost: t\r\n\r\n",
        ] {  // answered
            let client = try TestClient(port: server.port, receiveTimeout: 2)
            client.send(head)
            _ = client.readResponse()
        }
        XCTAssertTrue(waitUntil(timeout: 5) { server.requestsInFlight == 0 })
        Thread.sleep(forTimeInterval: 0.3)  // a late completion would take it below zero
        XCTAssertEqual(server.requestsInFlight, 0)
        let before = monotonicNow()
        server.stop(deadline: 4)
        XCTAssertLessThan(monotonicNow() - before, 1.5, "stop() waited for requests that had ended")
    }

    func testStopWithFiveHundredStreamsAndARequestInFlight() throws {
        let registry = StreamRegistry()
        let started = DispatchSemaphore(value: 0)
        let server = try server(registry, started: started, answerAfter: 0.3)
        let fleet = try StreamFleet(port: server.port, count: 500, path: "/events")
        XCTAssertTrue(waitUntil(timeout: 10) { server.openStreamCount == 500 })
        registry.send(Frame("data: hello\n\n"))  // queued bytes, flushed before the final frame
        let inFlight = try TestClient(port: server.port)
        inFlight.send("GET /slow HTTP/1.1\r\nHost: test\r\n\r\n")
        XCTAssertEqual(started.wait(timeout: .now() + 5), .success)

        let deadline = 3.0
        let before = monotonicNow()
        server.stop(finalFrame: Frame("event: end\ndata: bye\n\n"), deadline: deadline)
        let took = monotonicNow() - before
        XCTAssertLessThan(took, deadline + 0.5, "stop took \(took) s")
        XCTAssertTrue(server.isStopping)
        XCTAssertEqual(server.openStreamCount, 0)
        server.stop()  // idempotent

        let answer = try XCTUnwrap(inFlight.readResponse())
        XCTAssertEqual(answer.status, 200)
        XCTAssertEqual(answer.bodyText, "late answer")

        let ended = fleet.pump(timeout: 5) { fleet in fleet.members.allSatisfy(\.ended) }
        XCTAssertTrue(ended)
        for member in fleet.members {
            XCTAssertEqual(member.events, ["hello", "bye"])
            XCTAssertTrue(member.parser.isComplete, "the chunked stream did not end cleanly")
            if member.events != ["hello", "bye"] { break }
        }
        XCTAssertTrue(waitUntil(timeout: 2) { registry.closeReasons.count == 500 })
        XCTAssertEqual(Set(registry.closeReasons), [.serverStopping])
    }

    /// A server with one request in flight that it never answers by itself.
    private func serverWithAStuckRequest() throws -> (HTTPServer, TestClient) {
        let started = DispatchSemaphore(value: 0)
        let server = try server(StreamRegistry(), started: started, answerAfter: nil)
        let stuck = try TestClient(port: server.port)
        stuck.send("GET /slow HTTP/1.1\r\nHost: test\r\n\r\n")
        XCTAssertEqual(started.wait(timeout: .now() + 5), .success)
        return (server, stuck)
    }

    func testStopAnswersAStuckRequest503WithinItsDeadline() throws {
        let (server, stuck) = try serverWithAStuckRequest()

        let before = monotonicNow()
        server.stop(deadline: 1)
        XCTAssertLessThan(monotonicNow() - before, 1.5)
        let answer = try XCTUnwrap(stuck.readResponse())
        XCTAssertEqual(answer.status, 503)
        XCTAssertEqual(answer.header("Content-Type"), "application/problem+json")
        XCTAssertTrue(answer.bodyText.contains("the server is stopping"))
        XCTAssertThrowsError(try TestClient(port: server.port), "the listener is closed after stop")
    }

    /// A connect made while the stop waits for a request is refused, not left in the backlog.
    func testConnectsAreRefusedWhileTheStopWaits() throws {
        let (server, stuck) = try serverWithAStuckRequest()

        let stopped = DispatchSemaphore(value: 0)
        DispatchQueue.global().async {
            server.stop(deadline: 6)  // waits 3 s for the stuck request, then answers it 503
            stopped.signal()
        }
        XCTAssertTrue(
            waitUntil(timeout: 1.5) { (try? TestClient(port: server.port)) == nil },
            "connects were accepted while the stop waited")
        XCTAssertEqual(stopped.wait(timeout: .now()), .timedOut, "the stop did not wait for the request")
        XCTAssertEqual(stopped.wait(timeout: .now() + 8), .success)
        XCTAssertEqual(try XCTUnwrap(stuck.readResponse()).status, 503)
    }
}

/// Stopping never aborts the process, however connections arrive during the stop: libmicrohttpd
/// 0.9.75 aborted on a listening socket it was asked to give back (MHD_quiesce_daemon) while its
/// own thread took the same socket out of its epoll set; MicroHTTP accepts connections itself.
final class StopUnderArrivalsTests: XCTestCase {
    /// What the clients of one test saw; each request carries its own number.
    private final class Tally: @unchecked Sendable {
        private let lock = NSLock()
        private(set) var handled = Set<Int>()  // requests a handler answered 200
        private(set) var received = Set<Int>()  // 200s a client read whole
        private(set) var stopping = 0  // 503s a client read whole
        private(set) var truncated: [String] = []  // answers that ended part way
        private var next = 0

        func number() -> Int {
            lock.withLock {
                next += 1
                return next
            }
        }
        func handle(_ number: Int) { lock.withLock { _ = handled.insert(number) } }
        func answered(_ number: Int, status: Int?) {
            lock.withLock {
                if status == 200 { received.insert(number) } else if status == 503 { stopping += 1 }
            }
        }
        func cut(_ what: String) { lock.withLock { truncated.append(what) } }
    }

    func testTwoThousandStopsWhileConnectionsArriveNeverAbortAndAnswerEveryRequestTheyTook() throws {
        let cycles = Int(ProcessInfo.processInfo.environment["STOP_CYCLES"] ?? "") ?? 2_000
        let tally = Tally()
        for cycle in 0..<cycles {
            let server = try startServer({
                $0.heartbeatInterval = 60
                $0.threads = cycle % 2 + 1
            }) { router in
                router.add(.GET, "/hello") { request in
                    tally.handle(Int(request.query["n"] ?? "") ?? -1)
                    return .response(.text("hi"))
                }
                router.add(.GET, "/events") { _ in
                    .eventStream(headers: HTTPHeaders()) { stream in stream.send(Frame("data: x\n\n")) }
                }
            }
            let port = server.port
            let clients = DispatchGroup()
            for client in 0..<2 {
                DispatchQueue.global().async(group: clients) {
                    // Bounded: at most 50 connections a client a cycle, until connects are refused.
                    for _ in 0..<50 {
                        guard let socket = try? TestSocket(port: port, timeout: 5) else { return }
                        let number = tally.number()
                        let path = client == 0 || number % 3 != 0 ? "/hello?n=\(number)" : "/events"
                        guard (try? socket.write("GET \(path) HTTP/1.1\r\nHost: t\r\n\r\n")) != nil else { continue }
                        Self.read(socket, number: number, stream: path == "/events", into: tally)
                    }
                }
            }
            usleep(UInt32.random(in: 0...3_000))
            server.stop(deadline: 2)
            XCTAssertEqual(clients.wait(timeout: .now() + 30), .success, "a client hung after stop \(cycle)")
        }
        XCTAssertEqual(tally.truncated, [], "answers cut part way")
        XCTAssertEqual(tally.handled.subtracting(tally.received), [], "requests answered 200 that no client read")
        XCTAssertGreaterThan(tally.received.count, cycles, "too few requests were served to exercise the stop")
        print("stops: \(cycles), answered 200: \(tally.received.count), answered 503: \(tally.stopping)")
    }

    /// Reads one answer whole; a stream's answer is whole once its head and a frame came, or the
    /// server ended it with its final chunk.
    private static func read(_ socket: TestSocket, number: Int, stream: Bool, into tally: Tally) {
        var parser = ResponseParser()
        while !parser.isComplete {
            if stream, parser.status == 200, !parser.body.isEmpty { return }
            do {
                parser.feed(try socket.receive())
            } catch TestSocket.Failure.closed {
                parser.endOfStream()
                break
            } catch {
                break  // reset: a connection the server never took (it closed it unread)
            }
        }
        if parser.isComplete {
            tally.answered(number, status: parser.status)
        } else if parser.status != nil {
            tally.cut("request \(number): status \(parser.status ?? 0) then the connection ended")
        }
    }
}
