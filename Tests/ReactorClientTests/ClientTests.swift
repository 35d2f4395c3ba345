import Foundation
import ReactorClient
import ReactorService
import XCTest

#if canImport(FoundationNetworking)
import FoundationNetworking
#endif

/// `ReactorClient` against a real reactord server in this process.
final class ClientTests: XCTestCase {
    private var fixture: ServerFixture!

    override func tearDown() {
        fixture?.stop()
    }

    func testCreateSendAndReadTheCurrentState() async throws {
        fixture = try ServerFixture()
        let session = try await fixture.client.createSession(reactor: "counter", state: CounterState.self)
        XCTAssertEqual(session.id.count, 22)
        XCTAssertEqual(session.reactor, "counter")
        XCTAssertEqual(session.initial?.state, CounterState(count: 0))
        XCTAssertEqual(session.initial?.version, 0)
        let after = try await session.send(CounterAction.increase)
        XCTAssertEqual(after.state.count, 1)
        XCTAssertEqual(after.version, 1)
        try await session.send(TypedAction("increase"))
        let current = try await session.current()
        XCTAssertEqual(current.state.count, 2)
        XCTAssertEqual(current.version, 2)
    }

    func testErrorsArriveAsProblems() async throws {
        fixture = try ServerFixture()
        let session = try await fixture.client.createSession(state: CounterState.self)
        do {
            try await session.send(TypedAction("nonsense"))
            XCTFail("an unknown action type should fail")
        } catch let ReactorClientError.problem(problem) {
            XCTAssertEqual(problem.status, 422)
            XCTAssertTrue(problem.detail?.contains("nonsense") ?? false, problem.description)
        }
        let unknown = fixture.client.session(id: "AAAAAAAAAAAAAAAAAAAAAA", state: CounterState.self)
        do {
            _ = try await unknown.current()
            XCTFail("an unknown session should fail")
        } catch let ReactorClientError.problem(problem) {
            XCTAssertEqual(problem.status, 404)
        }
        do {
            for try await _ in unknown.events() { XCTFail("no events from an unknown session") }
            XCTFail("the stream of an unknown session should throw")
        } catch let ReactorClientError.problem(problem) {
            XCTAssertEqual(problem.status, 404)
        }
    }

    func testStatesAndEveryPulseAsTheyHappen() async throws {
        fixture = try ServerFixture()
        let session = try await fixture.client.createSession(reactor: "counter", state: CounterState.self)
        let events = session.events(pulses: CounterPulse.self)
        let received = try await withTimeout(10) {
            var received: [ReactorEvent<CounterState, CounterPulse>] = []
            for try await event in events {
                received.append(event)
                if case .state(_, version: 0) = event {
                    try await session.send(CounterAction.increase)
                    try await session.send(CounterAction.alert("Hello"))
                    try await session.send(CounterAction.alert("Hello"))
                }
                if received.count == 5 { break }
            }
            return received
        }
        XCTAssertEqual(received.map(\.version), [0, 1, 2, 3, 4])
        guard received.count == 5 else { return }
        if case let .state(state, _) = received[1] { XCTAssertEqual(state.count, 1) } else { XCTFail("\(received[1])") }
        if case let .state(state, _) = received[2] {
            XCTAssertEqual(state.alertMessage, "Hello")
        } else {
            XCTFail("\(received[2])")
        }
        // The same message twice: two pulses, and no second state (it did not change).
        if case let .pulse(pulse, _) = received[3] {
            XCTAssertEqual(pulse, .alertMessage("Hello"))
        } else {
            XCTFail("\(received[3])")
        }
        if case let .pulse(pulse, _) = received[4] {
            XCTAssertEqual(pulse, .alertMessage("Hello"))
        } else {
            XCTFail("\(received[4])")
        }
    }

    func testAnyPulseAndFieldsFilter() async throws {
        fixture = try ServerFixture()
        struct CountOnly: Decodable, Sendable { var count: Int }
        let created = try await fixture.client.createSession(state: CounterState.self)
        let session = fixture.client.session(id: created.id, state: CountOnly.self)
        let events = session.events(fields: ["count"])
        let received = try await withTimeout(10) {
            var received: [String] = []
            for try await event in events {
                switch event {
                case let .state(state, _): received.append("count \(state.count)")
                case let .pulse(pulse, _):
                    received.append("\(pulse.name) \(try pulse.value(as: String?.self) ?? "nil")")
                }
                if received.count == 1 {
                    try await session.send(CounterAction.alert("Hey"))  // a state change outside `count`, and a pulse
                    try await session.send(CounterAction.decrease)
                }
                if received.count == 3 { break }
            }
            return received
        }
        XCTAssertEqual(received, ["count 0", "alertMessage Hey", "count -1"])
    }

    func testAnyPulseKeepsItsValueAsSentIntegersExact() throws {
        let data = Data(#"{"name":"big","value":{"tags":["a",null,true],"ratio":0.5,"id":9007199254740993}}"#.utf8)
        let pulse = try JSONDecoder().decode(AnyPulse.self, from: data)
        XCTAssertEqual(pulse.valueJSON, #"{"id":9007199254740993,"ratio":0.5,"tags":["a",null,true]}"#)
        struct Value: Decodable { let id: Int64 }
        XCTAssertEqual(try pulse.value(as: Value.self).id, 9_007_199_254_740_993, "past 2^53: not rounded")
    }

    func testDeletingTheSessionEndsTheSequence() async throws {
        fixture = try ServerFixture()
        let session = try await fixture.client.createSession(state: CounterState.self)
        let events = session.events()
        let count = try await withTimeout(10) {
            var count = 0
            for try await _ in events {
                count += 1
                try await session.delete()
            }
            return count
        }
        XCTAssertEqual(count, 1)
    }

    /// The server closes the stream (stream max age) without `event: end`; the client
    /// reconnects and resumes with Last-Event-ID. A pulse sent while it was away only comes
    /// back on a resume: a fresh connection starts with the current state and no pulses.
    func testReconnectsAndResumesWithLastEventID() async throws {
        fixture = try ServerFixture { $0.streamMaxAge = .milliseconds(500) }
        let session = try await fixture.client.createSession(state: CounterState.self)
        let events = session.events(pulses: CounterPulse.self, reconnectDelay: .seconds(1))
        let start = ContinuousClock.now
        let received = try await withTimeout(15) {
            var received: [ReactorEvent<CounterState, CounterPulse>] = []
            for try await event in events {
                received.append(event)
                if received.count == 1 {
                    // The stream closes at 0.5 s and the client waits 1 s: this lands in the gap.
                    try await Task.sleep(for: .milliseconds(800))
                    try await session.send(CounterAction.alert("while away"))
                }
                if received.count == 3 { break }
            }
            return received
        }
        // Not live: they came with the reconnect, after the stream's 0.5 s and the client's 1 s.
        XCTAssertGreaterThanOrEqual(ContinuousClock.now - start, .milliseconds(1_400))
        XCTAssertEqual(received.map(\.version), [0, 1, 2])
        guard received.count == 3 else { return }
        if case let .pulse(pulse, _) = received[2] {
            XCTAssertEqual(pulse, .alertMessage("while away"))
        } else {
            XCTFail("\(received[2])")
        }
    }

    /// Many drops in a row (the server ends each stream after 0.3 s): every version arrives
    /// exactly once and in order.
    func testNoEventLostOrRepeatedAcrossManyReconnects() async throws {
        fixture = try ServerFixture {
            $0.streamMaxAge = .milliseconds(300)
            $0.streamRetry = .milliseconds(50)
        }
        let session = try await fixture.client.createSession(state: CounterState.self)
        let sender = Task {
            for _ in 0..<30 {
                try await session.send(CounterAction.increase)
                try await Task.sleep(for: .milliseconds(50))
            }
        }
        defer { sender.cancel() }
        let events = session.events()
        let versions = try await withTimeout(20) {
            var versions: [UInt64] = []
            for try await event in events {
                versions.append(event.version)
                if case let .state(state, _) = event, state.count == 30 { break }
            }
            return versions
        }
        XCTAssertEqual(versions.last, 30)
        XCTAssertEqual(versions, Array(versions.first!...30), "gaps or repeats: \(versions)")
    }

    /// Leaving the loop closes the connection: the server sees its subscriber go.
    func testLeavingTheLoopClosesTheStream() async throws {
        fixture = try ServerFixture()
        let session = try await fixture.client.createSession(state: CounterState.self)
        for try await _ in session.events() { break }
        let deadline = ContinuousClock.now + .seconds(5)
        var subscribers = -1.0
        while ContinuousClock.now < deadline {
            let (data, _) = try await URLSession.shared.data(
                from: fixture.client.baseURL.appendingPathComponent("metrics"))
            let line = String(decoding: data, as: UTF8.self).split(separator: "\n")
                .first { $0.hasPrefix("reactord_subscribers ") }
            subscribers = line.flatMap { Double($0.split(separator: " ")[1]) } ?? -1
            if subscribers == 0 { break }
            try await Task.sleep(for: .milliseconds(100))
        }
        XCTAssertEqual(subscribers, 0)
    }
}
