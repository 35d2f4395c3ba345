import Foundation
import XCTest

/// Issue 6, part 3: vanishing, stalled and interrupted clients. Nothing leaks, nobody else
/// waits, nothing accepted is lost.
final class FaultTests: XCTestCase {
    private func metric(_ name: String, _ fixture: ServerFixture) throws -> Double? {
        let text = try HTTPClient(port: fixture.port).request("GET", "/metrics").text
        for line in text.split(separator: "\n") where line.hasPrefix(name + " ") {
            return Double(line.split(separator: " ")[1])
        }
        return nil
    }

    func testFiveThousandSubscribersKilledAtOnce() throws {
        // 5,000 streams from 127.0.0.1: past the default per-address limit.
        let fixture = try ServerFixture {
            $0.heartbeat = .milliseconds(250)
            $0.connectionsPerIP = 0
        }
        defer { fixture.stop() }
        let session = try fixture.createSession()
        XCTAssertEqual(try fixture.send(session, #"{"type":"increase"}"#).status, 200)
        Thread.sleep(forTimeInterval: 0.3)
        let baselineFDs = ProcessStats.openDescriptors()
        XCTAssertEqual(fixture.server.openStreamCount, 0)

        let fleet = try StreamFleet(port: fixture.port, count: 5000, path: "/sessions/\(session)/events")
        XCTAssertTrue(
            waitUntil(timeout: 60) { fixture.server.openStreamCount == 5000 },
            "\(fixture.server.openStreamCount) streams open")
        XCTAssertTrue(
            fleet.pump(timeout: 60) { $0.members.allSatisfy { !$0.events.isEmpty } },
            "every subscriber got its first state")
        XCTAssertEqual(try metric("reactord_subscribers", fixture), 5000)
        XCTAssertGreaterThan(ProcessStats.openDescriptors(), baselineFDs + 9_000, "both ends live in this process")

        // All 5,000 vanish at once (RST). Suspended connections see nothing until a write:
        // the heartbeat's finds them.
        let killed = monotonicNow()
        fleet.resetAll()
        XCTAssertTrue(
            waitUntil(timeout: 30) { fixture.server.openStreamCount == 0 },
            "\(fixture.server.openStreamCount) streams still open")
        let reclaimed = monotonicNow() - killed
        XCTAssertTrue(
            waitUntil(timeout: 10) { ProcessStats.openDescriptors() <= baselineFDs + 2 },
            "fds: \(ProcessStats.openDescriptors()) vs baseline \(baselineFDs)")
        XCTAssertEqual(try metric("reactord_subscribers", fixture), 0)
        print(
            "5,000 subscribers reset: streams at 0 after \(String(format: "%.2f", reclaimed)) s (heartbeat 0.25 s); fds \(ProcessStats.openDescriptors()) vs baseline \(baselineFDs)"
        )

        // The session and the server go on.
        let after = try fixture.subscribe(session)
        XCTAssertEqual(after.next()?.state["count"] as? Int, 1)
        XCTAssertEqual(try fixture.send(session, #"{"type":"increase"}"#).status, 200)
        XCTAssertEqual(after.next()?.state["count"] as? Int, 2)
    }

    func testASubscriberThatNeverReadsIsClosedAndOthersAreUnaffected() throws {
        let fixture = try ServerFixture {
            $0.streamQueueLimit = 64 * 1024
            $0.heartbeat = .seconds(60)
        }
        defer { fixture.stop() }
        let session = try fixture.createSession()
        let fleet = try StreamFleet(port: fixture.port, count: 0, path: "")
        try fleet.add(port: fixture.port, path: "/sessions/\(session)/events", receiveBuffer: 4096)  // 0: never read
        try fleet.add(port: fixture.port, path: "/sessions/\(session)/events")  // 1: reads
        XCTAssertTrue(waitUntil(timeout: 5) { fixture.server.openStreamCount == 2 })

        // 1,000-character alerts (the counter's limit), each different: a state and a pulse
        // event each. The stalled reader's socket buffers fill, then its 64 KiB queue, then it
        // is closed; the reader hears everything.
        let message = String(repeating: "m", count: 990)
        var sent = 0
        var slowest = 0.0
        let start = monotonicNow()
        while fixture.server.openStreamCount == 2, sent < 3000, monotonicNow() - start < 60 {
            let before = monotonicNow()
            let response = try fixture.send(session, #"{"type":"alert","message":"\#(sent)\#(message)"}"#)
            slowest = max(slowest, monotonicNow() - before)
            XCTAssertEqual(response.status, 200)
            sent += 1
            fleet.pump(timeout: 0.001, skipping: [0]) { _ in false }
        }
        XCTAssertEqual(fixture.server.openStreamCount, 1, "the stalled stream was closed after \(sent) actions")
        // The reader gets every one: 1 initial state + (state + pulse) per action.
        XCTAssertTrue(
            fleet.pump(timeout: 20, skipping: [0]) { $0.members[1].events.count == 1 + 2 * sent },
            "\(fleet.members[1].events.count) of \(1 + 2 * sent)")
        XCTAssertFalse(fleet.members[1].ended)
        XCTAssertLessThan(slowest, 1, "no action waited for the stalled subscriber")
        print(
            "stalled subscriber closed after \(sent) actions of 1 KB; slowest action \(String(format: "%.3f", slowest)) s"
        )
        // The stalled client finds its connection closed once it reads.
        XCTAssertTrue(fleet.pump(timeout: 10) { $0.members[0].ended })
        XCTAssertEqual(try metric("reactord_subscribers", fixture), 1)
    }

    func testSessionTTLExpiryUnderLoad() throws {
        let fixture = try ServerFixture {
            $0.sessionTTL = .seconds(2)
            $0.threads = 2
        }
        defer { fixture.stop() }
        let active = try (0..<50).map { _ in try fixture.createSession() }
        let idle = try (0..<50).map { _ in try fixture.createSession() }
        let idleStreams = try idle.prefix(10).map { try fixture.subscribe($0) }
        for stream in idleStreams { XCTAssertEqual(stream.next()?.event, "state") }
        for stream in idleStreams { stream.reset() }  // their subscribers vanish: then they idle out

        // Two clients keep the active sessions busy for 5 s while the sweeper runs.
        let failures = Locked<[String]>([])
        let answered = Locked(0)
        DispatchQueue.concurrentPerform(iterations: 2) { worker in
            let client = HTTPClient(port: fixture.port)
            let until = monotonicNow() + 5  // (no reads of the idle ones: a GET counts as activity)
            while monotonicNow() < until {
                for session in active.enumerated().filter({ $0.offset % 2 == worker }).map(\.element) {
                    let status =
                        (try? client.request(
                            "POST", "/action",
                            body: #"{"session":"\#(session)","action":{"type":"increase"}}"#
                        ).status) ?? -1
                    if status == 200 { answered.update { $0 += 1 } } else { failures.update { $0.append("\(status)") } }
                }
                Thread.sleep(forTimeInterval: 0.01)
            }
        }
        XCTAssertEqual(failures.value, [], "every action on a live session answered 200")
        XCTAssertGreaterThan(answered.value, 100)
        // At once (the TTL is 2 s): the idle ones are gone, the busy ones all there.
        XCTAssertEqual(fixture.server.sessionCount, 50)
        let total = try active.map { session -> Int in
            let state = try fixture.client.request("GET", "/sessions/\(session)").object["state"] as? [String: Any]
            return state?["count"] as? Int ?? -1
        }.reduce(0, +)
        XCTAssertEqual(total, answered.value, "every 200 was applied exactly once")
        for session in idle {
            XCTAssertEqual(try fixture.client.request("GET", "/sessions/\(session)").status, 404)
        }
        XCTAssertEqual(try metric("reactord_sessions", fixture), 50)
        XCTAssertEqual(fixture.server.openStreamCount, 0, "the vanished subscribers' streams are gone")
        // Once the load stops, the busy ones expire too. The sweeper takes them out of the table
        // first, then ends them one by one, lowering the gauge as it goes: wait for both.
        XCTAssertTrue(waitUntil(timeout: 8) { fixture.server.sessionCount == 0 }, "\(fixture.server.sessionCount)")
        XCTAssertTrue(
            waitUntil(timeout: 8) { (try? metric("reactord_sessions", fixture)) == 0 },
            "\(String(describing: try? metric("reactord_sessions", fixture)))")
    }

    func testSIGTERMUnderLoadLosesNoAcceptedAction() throws {
        let server = try ReactordProcess(
            arguments: ["--admin-token", "t", "--threads", "2"],
            environment: ["REACTORD_HEARTBEAT": "1"])
        let port = server.port
        let session = try XCTUnwrap(
            try HTTPClient(port: port).request("POST", "/sessions").object["session"] as? String)
        // The subscriber reads on its own thread, which owns its client; the last state before
        // `end` is final.
        let firstEvent = Locked<String?>(nil)
        let subscribed = DispatchSemaphore(value: 0)
        let lastCount = Locked<Int?>(nil)
        let endReason = Locked<String?>(nil)
        let reader = Thread {
            let events = try? EventStreamClient(port: port, path: "/sessions/\(session)/events", timeout: 10)
            firstEvent.update { $0 = events?.next()?.event }
            subscribed.signal()
            while let event = events?.next(timeout: 15) {
                if event.event == "state" { lastCount.update { $0 = event.state["count"] as? Int } }
                if event.event == "end" { endReason.update { $0 = event.object["reason"] as? String } }
            }
        }
        reader.start()
        XCTAssertEqual(subscribed.wait(timeout: .now() + 15), .success)
        XCTAssertEqual(firstEvent.value, "state")

        // Eight clients send actions as fast as they can; SIGTERM lands in the middle.
        let ok = Locked(0)
        let refused = Locked(0)
        let unanswered = Locked(0)
        let other = Locked<[Int]>([])
        let group = DispatchGroup()
        let stop = Locked(false)
        for _ in 0..<8 {
            group.enter()
            Thread {
                defer { group.leave() }
                var client = HTTPClient(port: port)
                let until = monotonicNow() + 20
                while !stop.value, monotonicNow() < until {
                    do {
                        let response = try client.request(
                            "POST", "/action",
                            body: #"{"session":"\#(session)","action":{"type":"increase"}}"#)
                        switch response.status {
                        case 200: ok.update { $0 += 1 }
                        case 503: refused.update { $0 += 1 }
                        default: other.update { $0.append(response.status) }
                        }
                    } catch {
                        // Closed without an answer, or no longer accepting: the server is going.
                        unanswered.update { $0 += 1 }
                        if (try? TestSocket(port: port, timeout: 1)) == nil { return }
                        client = HTTPClient(port: port)
                    }
                }
            }.start()
        }
        Thread.sleep(forTimeInterval: 1.5)
        let atSignal = ok.value
        kill(server.process.processIdentifier, SIGTERM)
        XCTAssertEqual(server.waitForExit(timeout: 15), 0, "exit status 0")
        stop.update { $0 = true }
        XCTAssertEqual(group.wait(timeout: .now() + 30), .success)
        XCTAssertTrue(waitUntil(timeout: 20) { endReason.value != nil })

        print(
            "SIGTERM under load: \(ok.value) answered 200 (\(atSignal) before the signal), \(refused.value) refused 503, "
                + "\(unanswered.value) requests unanswered (closed or refused connections), final count \(lastCount.value ?? -1)"
        )
        XCTAssertEqual(other.value, [], "only 200 and 503")
        XCTAssertGreaterThan(atSignal, 100)
        XCTAssertEqual(endReason.value, "shutdown")
        XCTAssertEqual(lastCount.value, ok.value, "every action answered 200 was applied, and no other")
    }
}
