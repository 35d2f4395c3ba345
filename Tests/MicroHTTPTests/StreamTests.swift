import Dispatch
import XCTest

@testable import MicroHTTP

/// Behaviours 2–5: many subscribers, idle cost, vanished clients, a slow subscriber.
final class StreamTests: XCTestCase {
    /// Every connection socket of the server is closed, and the descriptor count is back near
    /// its baseline (the runtime may have opened one or two of its own meanwhile).
    private func assertConnectionsReleased(
        _ server: HTTPServer, descriptorBaseline baseline: Int,
        file: StaticString = #filePath, line: UInt = #line
    ) {
        XCTAssertTrue(
            waitUntil(timeout: 5) { ProcessStats.connectedSockets(localPort: server.port) == 0 },
            "\(ProcessStats.connectedSockets(localPort: server.port)) server sockets still open",
            file: file, line: line)
        XCTAssertLessThanOrEqual(ProcessStats.openDescriptors(), baseline + 2, file: file, line: line)
    }

    private func streamServer(
        _ registry: StreamRegistry,
        _ configure: (inout HTTPServerConfiguration) -> Void = { _ in }
    ) throws -> HTTPServer {
        try startServer(configure) { router in
            router.add(.GET, "/events") { _ in
                .eventStream(headers: HTTPHeaders([("X-Stream", "yes")])) { stream in
                    stream.send(Frame("retry: 1000\n\n"))  // sent inside open: goes out first
                    registry.add(stream)
                }
            }
        }
    }

    /// `count` clients of `path`, each with its stream open and its head read.
    private func answeredStreams(of server: HTTPServer, count: Int, path: String) throws -> StreamFleet {
        let fleet = try StreamFleet(port: server.port, count: count, path: path)
        XCTAssertTrue(waitUntil(timeout: 20) { server.openStreamCount == count }, "\(server.openStreamCount) streams")
        fleet.pump(timeout: 10) { fleet in fleet.members.allSatisfy { $0.parser.status != nil } }
        return fleet
    }

    /// Sends events 0..<count to every stream of `registry`; returns their data, as received.
    private func sendEvents(_ count: Int, to registry: StreamRegistry) -> [String] {
        for index in 0..<count { registry.send(Frame("id: \(index)\ndata: event \(index)\n\n")) }
        return (0..<count).map { "event \($0)" }
    }

    /// 2. 1,000 subscribers each receive 100 events, in order, none lost or duplicated.
    func testThousandSubscribersReceiveEveryEventInOrder() throws {
        let registry = StreamRegistry()
        let server = try streamServer(registry) { $0.heartbeatInterval = 60 }
        defer { server.stop() }
        let fleet = try answeredStreams(of: server, count: 1000, path: "/events")
        let expected = sendEvents(100, to: registry)
        let done = fleet.pump(timeout: 30) { fleet in fleet.members.allSatisfy { $0.events.count >= 100 } }
        XCTAssertTrue(done, "not every subscriber got 100 events")
        for member in fleet.members {
            XCTAssertEqual(member.parser.status, 200)
            XCTAssertEqual(member.parser.header("Content-Type"), "text/event-stream")
            XCTAssertEqual(member.parser.header("Cache-Control"), "no-cache")
            XCTAssertEqual(member.parser.header("X-Accel-Buffering"), "no")
            XCTAssertEqual(member.parser.header("X-Stream"), "yes")
            XCTAssertTrue(member.parser.bodyText.hasPrefix("retry: 1000\n\n"))
            XCTAssertEqual(member.events, expected)
            if member.events != expected { break }
        }
    }

    /// A deferred request answered with an event stream from another thread (a handler that had
    /// to look elsewhere first): the stream opens with its head and the responder's extra
    /// headers, what `open` sends goes out first, and later events follow, in order.
    func testADeferredRequestAnsweredWithAnEventStreamFromAnotherThread() throws {
        let registry = StreamRegistry()
        let server = try startServer { router in
            router.add(.GET, "/late-events") { _ in
                .deferred { responder in
                    responder.extraHeaders.add("X-Extra", "1")
                    DispatchQueue.global().asyncAfter(deadline: .now() + 0.2) {
                        responder.respond(eventStreamWith: HTTPHeaders([("X-Stream", "late")])) { stream in
                            stream.send(Frame("retry: 500\n\n"))
                            registry.add(stream)
                        }
                    }
                }
            }
        }
        defer { server.stop() }
        let fleet = try answeredStreams(of: server, count: 3, path: "/late-events")
        let expected = sendEvents(5, to: registry)
        XCTAssertTrue(fleet.pump(timeout: 10) { fleet in fleet.members.allSatisfy { $0.events.count >= 5 } })
        for member in fleet.members {
            XCTAssertEqual(member.parser.status, 200)
            XCTAssertEqual(member.parser.header("Content-Type"), "text/event-stream")
            XCTAssertEqual(member.parser.header("X-Stream"), "late")
            XCTAssertEqual(member.parser.header("X-Extra"), "1")
            XCTAssertTrue(member.parser.bodyText.hasPrefix("retry: 500\n\n"), member.parser.bodyText)
            XCTAssertEqual(member.events, expected)
        }
        fleet.closeAll()
        XCTAssertTrue(waitUntil(timeout: 5) { server.openStreamCount == 0 }, "\(server.openStreamCount) streams left")
    }

    /// 3. 1,000 idle streams cost (next to) no CPU: a reader that returned 0 without
    /// suspending would spin at 100 %. The server shares its process with the test and, in the
    /// TSan pass, with the sanitizer's own thread, so what the streams cost is the process's CPU
    /// while they are open less its CPU while the same server has none.
    func testIdleStreamsCostNoCPU() throws {
        let registry = StreamRegistry()
        let server = try streamServer(registry) { $0.heartbeatInterval = 60 }
        defer { server.stop() }
        let baseline = ProcessStats.cpuShare(seconds: 3)
        let fleet = try StreamFleet(port: server.port, count: 1000, path: "/events")
        let allOpen = waitUntil(timeout: 20) { server.openStreamCount == 1000 }
        fleet.pump(timeout: 10) { fleet in fleet.members.allSatisfy { $0.events.count + $0.parser.body.count > 0 } }
        XCTAssertTrue(
            allOpen,
            "\(server.openStreamCount) streams, \(server.openConnectionCount) connections; of the clients "
                + "\(fleet.members.filter(\.ended).count) were closed, \(fleet.members.filter { $0.parser.status == nil }.count) unanswered"
        )
        usleep(200_000)  // let the connections settle into suspension

        let open = ProcessStats.cpuShare(seconds: 5)
        XCTAssertLessThan(
            open.share - baseline.share, 0.02,
            "idle streams used \(open.share * 100) % of a core, \(baseline.share * 100) % without them; "
                + "busiest threads: \(open.busiest)")
        XCTAssertEqual(server.openStreamCount, 1000)
    }

    /// 4. 1,000 clients that vanish are found by the heartbeat within three intervals; the
    /// stream count returns to 0 and the descriptor count to its baseline.
    func testVanishedClientsAreFoundWithinThreeHeartbeats() throws {
        let registry = StreamRegistry()
        let heartbeat = 0.3
        let server = try streamServer(registry) { $0.heartbeatInterval = heartbeat }
        defer { server.stop() }
        let baseline = ProcessStats.openDescriptors()
        let fleet = try StreamFleet(port: server.port, count: 1000, path: "/events")
        XCTAssertTrue(waitUntil(timeout: 20) { server.openStreamCount == 1000 })
        fleet.pump(timeout: 10) { fleet in fleet.members.allSatisfy { $0.parser.status != nil } }

        fleet.closeAll()  // no goodbye: the suspended server side sees nothing until it writes
        let closedAt = monotonicNow()
        XCTAssertTrue(waitUntil(timeout: 10) { server.openStreamCount == 0 })
        let elapsed = monotonicNow() - closedAt
        XCTAssertLessThan(elapsed, 3 * heartbeat, "vanished clients found after \(elapsed) s")
        XCTAssertTrue(waitUntil(timeout: 5) { registry.closeReasons.count == 1000 })
        XCTAssertEqual(registry.closeReasons.filter { $0 == .clientGone }.count, 1000)
        XCTAssertTrue(registry.all.allSatisfy(\.isClosed))
        assertConnectionsReleased(server, descriptorBaseline: baseline)
    }

    /// 5. A subscriber that stops reading is closed (.overflow) once its queue is full, while
    /// 100 others keep receiving every event without waiting for it.
    func testSlowSubscriberOverflowsWithoutDelayingOthers() throws {
        let registry = StreamRegistry()
        let server = try streamServer(registry) {
            $0.heartbeatInterval = 60
            $0.streamQueueLimit = 64 * 1024
            $0.streamSocketSendBuffer = 32 * 1024  // else the kernel buffers megabytes for the slow peer
        }
        defer { server.stop() }
        let fleet = try StreamFleet(port: server.port, count: 0, path: "/events")
        try fleet.add(port: server.port, path: "/events", receiveBuffer: 4096)  // index 0: never read
        XCTAssertTrue(waitUntil(timeout: 5) { server.openStreamCount == 1 })
        for _ in 0..<100 { try fleet.add(port: server.port, path: "/events") }
        XCTAssertTrue(waitUntil(timeout: 10) { server.openStreamCount == 101 })
        let slow = registry.all[0]

        let payload = String(repeating: "x", count: 1000)
        // Until the slow peer's socket buffers and then its queue are full, and 200 events more.
        var eventCount = 0
        var overflowAt: Int?
        var readerLag: [Double] = []
        let slowSkipped: Set<Int> = [0]
        for index in 0..<6000 {
            if let overflowAt, index >= overflowAt + 200 { break }
            eventCount += 1
            let start = monotonicNow()
            registry.send(Frame("data: \(index) \(payload)\n\n"))
            XCTAssertLessThan(monotonicNow() - start, 0.5, "send blocked")
            if index % 10 == 9 {
                // Every 10 events (10 kB, well within the queue bound) the 100 readers catch up at once:
                // none of them waits for the slow one.
                let before = monotonicNow()
                let caught = fleet.pump(timeout: 5, skipping: slowSkipped) { fleet in
                    fleet.members.dropFirst().allSatisfy { $0.events.count == index + 1 }
                }
                XCTAssertTrue(
                    caught,
                    "readers fell behind at event \(index): \(Set(fleet.members.dropFirst().map { $0.events.count }))")
                readerLag.append(monotonicNow() - before)
                if overflowAt == nil && slow.isClosed { overflowAt = index }
            }
        }
        XCTAssertNotNil(overflowAt)
        fleet.pump(timeout: 5, skipping: slowSkipped) { fleet in
            fleet.members.dropFirst().allSatisfy { $0.events.count == eventCount }
        }
        XCTAssertTrue(slow.isClosed, "the slow stream was not closed")
        XCTAssertTrue(waitUntil(timeout: 5) { registry.closeReasons.contains(.overflow) })
        XCTAssertEqual(registry.closeReasons, [.overflow])
        XCTAssertEqual(server.openStreamCount, 100)
        for member in fleet.members.dropFirst() {
            XCTAssertEqual(member.events.count, eventCount)
            XCTAssertEqual(member.events.last.map { $0.hasPrefix("\(eventCount - 1) ") }, true)
        }
        let worst = readerLag.max() ?? 0
        XCTAssertLessThan(worst, 1.0, "100 readers needed \(worst) s to catch up with 10 events")
    }

    /// 6. Clients that close (FIN) or reset (RST) are let go when the kernel reports it, not at
    /// a heartbeat: with no heartbeat in the test's time, every stream still ends, .clientGone.
    func testClosedAndResetClientsAreReleasedWithoutAHeartbeat() throws {
        let registry = StreamRegistry()
        let server = try streamServer(registry) { $0.heartbeatInterval = 3600 }
        defer { server.stop() }
        let baseline = ProcessStats.openDescriptors()
        let closing = try StreamFleet(port: server.port, count: 100, path: "/events")
        let resetting = try StreamFleet(port: server.port, count: 100, path: "/events")
        XCTAssertTrue(waitUntil(timeout: 20) { server.openStreamCount == 200 })
        closing.pump(timeout: 10) { fleet in fleet.members.allSatisfy { $0.parser.status != nil } }
        resetting.pump(timeout: 10) { fleet in fleet.members.allSatisfy { $0.parser.status != nil } }
        usleep(200_000)  // every stream suspended, waiting for events
        XCTAssertEqual(ProcessStats.connectedSockets(localPort: server.port), 200, "the server's ends, counted")

        closing.closeAll()
        XCTAssertTrue(
            waitUntil(timeout: 10) { server.openStreamCount == 100 },
            "\(server.openStreamCount) streams open after 100 of 200 clients closed")
        resetting.resetAll()
        XCTAssertTrue(
            waitUntil(timeout: 10) { server.openStreamCount == 0 },
            "\(server.openStreamCount) streams open after every client closed")
        XCTAssertTrue(waitUntil(timeout: 5) { registry.closeReasons.count == 200 })
        XCTAssertEqual(registry.closeReasons.filter { $0 == .clientGone }.count, 200)
        assertConnectionsReleased(server, descriptorBaseline: baseline)
    }

    /// 7. Dead subscribers do not keep connection slots: at a limit of 40, 30 subscribers that
    /// disconnect at once are let go at once (the heartbeat is an hour), and 30 new ones must then
    /// all fit, and an ordinary request too. (libmicrohttpd counts a suspended connection against
    /// the limit: before the disconnect watcher the new ones waited for the heartbeat. Connecting
    /// in the very instant of the disconnect, some would be answered 503 for the limit.)
    func testDeadSubscribersDoNotHoldConnectionSlots() throws {
        let registry = StreamRegistry()
        let server = try startServer({
            $0.heartbeatInterval = 3600
            $0.connectionLimit = 40
        }) { router in
            router.add(.GET, "/events") { _ in .eventStream(headers: HTTPHeaders()) { registry.add($0) } }
            router.add(.GET, "/ping") { _ in .response(.text("pong")) }
        }
        defer { server.stop() }
        let first = try StreamFleet(port: server.port, count: 30, path: "/events")
        XCTAssertTrue(waitUntil(timeout: 10) { server.openStreamCount == 30 })
        first.pump(timeout: 10) { fleet in fleet.members.allSatisfy { $0.parser.status != nil } }
        first.closeAll()
        XCTAssertTrue(waitUntil(timeout: 2) { server.openConnectionCount == 0 }, "dead subscribers kept their slots")

        let second = try StreamFleet(port: server.port, count: 30, path: "/events")
        let served = second.pump(timeout: 10) { fleet in fleet.members.allSatisfy { $0.parser.status != nil } }
        XCTAssertTrue(served, "\(second.members.filter { $0.parser.status != nil }.count) of 30 new subscribers served")
        let client = try TestSocket(port: server.port)
        client.setTimeout(10)
        try client.write("GET /ping HTTP/1.1\r\nHost: 127.0.0.1\r\n\r\n")
        XCTAssertEqual(client.readResponse()?.status, 200)
        XCTAssertTrue(waitUntil(timeout: 10) { server.openStreamCount == 30 })
    }
}
