import Foundation
import OpenCombine
import ReactorCore
import ReactorService
import TestSupport
import XCTest

/// Sessions that live in the store: with a durable store a session leaves memory once idle
/// (`unloadAfter`) or when memory is needed (`maxSessions`), and its next request, subscription or
/// resume loads it as it was. Real SQLite files, a real server on a loopback port.
final class UnloadingTests: XCTestCase {
    private var folder: URL!

    override func setUpWithError() throws {
        folder = FileManager.default.temporaryDirectory.appendingPathComponent(
            "reactord-unloading-\(UUID().uuidString)")
        try FileManager.default.createDirectory(at: folder, withIntermediateDirectories: true)
    }

    override func tearDownWithError() throws {
        try? FileManager.default.removeItem(at: folder)
    }

    private func start(_ configure: (inout ServiceConfiguration) -> Void = { _ in }) throws -> ServerFixture {
        let path = folder.appendingPathComponent("reactord.sqlite").path
        return try ServerFixture { configuration in
            configuration.store = .sqlite(path: path)
            configuration.unloadAfter = .milliseconds(300)
            configure(&configuration)
        }
    }

    private func health(_ fixture: ServerFixture) throws -> (loaded: Int?, stored: Int?) {
        let object = try fixture.client.request("GET", "/healthz").object
        return (object["loaded_sessions"] as? Int, object["stored_sessions"] as? Int)
    }

    private func metric(_ fixture: ServerFixture, _ line: String) throws -> Double? {
        let text = try fixture.client.request("GET", "/metrics").text
        for row in text.split(separator: "\n") where row.hasPrefix(line + " ") {
            return Double(row.dropFirst(line.count + 1))
        }
        return nil
    }

    func testAnIdleSessionLeavesMemoryAndComesBackAsItWas() throws {
        let fixture = try start()
        defer { fixture.stop() }
        let session = try fixture.createSession()
        for _ in 0..<3 { XCTAssertEqual(try fixture.send(session, #"{"type":"increase"}"#).status, 200) }
        XCTAssertTrue(waitUntil(timeout: 10) { (try? self.health(fixture).loaded) == 0 }, "unloaded once idle")
        XCTAssertEqual(try health(fixture).stored, 1, "still stored")
        XCTAssertEqual(try metric(fixture, #"reactord_session_unloads_total{reason="idle"}"#), 1)

        let read = try fixture.client.request("GET", "/sessions/\(session)")
        XCTAssertEqual(read.status, 200, read.text)
        XCTAssertEqual((read.object["state"] as? [String: Any])?["count"] as? Int, 3)
        XCTAssertEqual(read.object["version"] as? Int, 3)
        XCTAssertEqual(try health(fixture).loaded, 1, "loaded by its read")
        XCTAssertEqual(try metric(fixture, "reactord_session_loads_total"), 1)
        XCTAssertEqual(try metric(fixture, "reactord_session_load_duration_seconds_count"), 1)

        XCTAssertTrue(waitUntil(timeout: 10) { (try? self.health(fixture).loaded) == 0 })
        let acted = try fixture.send(session, #"{"type":"increase"}"#)
        XCTAssertEqual(acted.status, 200, acted.text)
        XCTAssertEqual(acted.object["version"] as? Int, 4, "an action loads it and continues its versions")
    }

    func testReadsRacingToLoadASessionAreOneLoadTimedOnce() throws {
        let fixture = try start { $0.threads = 4 }
        defer { fixture.stop() }
        let session = try fixture.createSession()
        XCTAssertTrue(waitUntil(timeout: 10) { (try? self.health(fixture).loaded) == 0 }, "unloaded once idle")
        let statuses = TestSupport.Locked([Int]())
        let port = fixture.port
        DispatchQueue.concurrentPerform(iterations: 16) { _ in
            let status = (try? HTTPClient(port: port).request("GET", "/sessions/\(session)"))?.status ?? 0
            statuses.update { $0.append(status) }
        }
        XCTAssertEqual(statuses.value, Array(repeating: 200, count: 16))
        XCTAssertEqual(try metric(fixture, "reactord_session_loads_total"), 1)
        XCTAssertEqual(try metric(fixture, "reactord_session_load_duration_seconds_count"), 1, "the one load, timed")
    }

    func testAResumeAcrossAnUnloadMissesNothing() throws {
        let fixture = try start()
        defer { fixture.stop() }
        let session = try fixture.createSession()
        let first = try fixture.subscribe(session)
        XCTAssertEqual(first.next()?.id, "0")
        try fixture.send(session, #"{"type":"increase"}"#)
        XCTAssertEqual(first.next()?.id, "1")
        first.reset()
        for _ in 0..<2 { XCTAssertEqual(try fixture.send(session, #"{"type":"increase"}"#).status, 200) }
        XCTAssertTrue(
            waitUntil(timeout: 10) { (try? self.health(fixture).loaded) == 0 }, "unloaded once its stream is gone")

        let resumed = try fixture.subscribe(session, headers: ["Last-Event-ID": "1"])
        let missed = resumed.take(2)
        XCTAssertEqual(missed.map(\.id), ["2", "3"])
        XCTAssertEqual(missed.last?.state["count"] as? Int, 3)
    }

    func testActionsAndStreamsRacingUnloadsLoseNothing() throws {
        let fixture = try start { $0.unloadAfter = .milliseconds(20) }
        defer { fixture.stop() }
        let sessions = try (0..<6).map { _ in try fixture.createSession() }
        let answered = Locked<[String: Int]>([:])
        let failures = Locked<[String]>([])
        let done = DispatchGroup()
        for worker in 0..<4 {
            done.enter()
            Thread.detachNewThread {
                defer { done.leave() }
                let client = HTTPClient(port: fixture.port)
                for round in 0..<60 {  // bounded
                    let session = sessions[(worker + round) % sessions.count]
                    if round % 5 == worker % 5, let stream = try? fixture.subscribe(session) {
                        if stream.next() == nil { failures.update { $0.append("a stream of \(session) got no event") } }
                        stream.reset()
                    }
                    guard
                        let response = try? client.request(
                            "POST", "/action",
                            body: #"{"session":"\#(session)","action":{"type":"increase"}}"#)
                    else { continue }
                    if response.status == 200 {
                        answered.update { $0[session, default: 0] += 1 }
                    } else {
                        failures.update { $0.append("\(response.status): \(response.text)") }
                    }
                    Thread.sleep(forTimeInterval: Double(round % 4) * 0.02)  // now and then past --unload-after
                }
            }
        }
        XCTAssertEqual(done.wait(timeout: .now() + 120), .success)
        XCTAssertEqual(failures.value, [])
        XCTAssertGreaterThan(try metric(fixture, #"reactord_session_unloads_total{reason="idle"}"#) ?? 0, 20)
        for session in sessions {
            let read = try fixture.client.request("GET", "/sessions/\(session)")
            XCTAssertEqual(
                (read.object["state"] as? [String: Any])?["count"] as? Int, answered.value[session] ?? 0,
                "every answered action applied once")
        }
    }

    /// A stream found and never opened (a HEAD request) gives back the place it held.
    func testAStreamThatNeverOpensLeavesItsSessionFreeToUnload() throws {
        let fixture = try start()
        defer { fixture.stop() }
        let session = try fixture.createSession()
        let head = try fixture.client.request("HEAD", "/sessions/\(session)/events")
        XCTAssertEqual(head.status, 200)
        XCTAssertTrue(waitUntil(timeout: 10) { (try? self.health(fixture).loaded) == 0 }, "unloaded once idle")
    }

    func testAWatchedSessionStaysLoaded() throws {
        let fixture = try start()
        defer { fixture.stop() }
        let session = try fixture.createSession()
        let watcher = try fixture.subscribe(session)
        XCTAssertEqual(watcher.next()?.id, "0")
        Thread.sleep(forTimeInterval: 1.5)
        XCTAssertEqual(try health(fixture).loaded, 1, "a subscriber keeps it in memory")
        try fixture.send(session, #"{"type":"increase"}"#)
        XCTAssertEqual(watcher.next()?.id, "1", "and its stream goes on")
    }

    func testARunningEffectKeepsItsSessionLoadedUntilItEnds() throws {
        let fixture = try start()
        defer { fixture.stop() }
        let gate = EffectGate()
        fixture.server.register("slow") { _ in SlowReactor(gate: gate) }
        let created = try fixture.client.request("POST", "/sessions", body: #"{"reactor":"slow"}"#)
        let session = try XCTUnwrap(created.object["session"] as? String)
        XCTAssertEqual(try fixture.send(session, #""start""#).status, 200)
        Thread.sleep(forTimeInterval: 1.5)
        XCTAssertEqual(try health(fixture).loaded, 1, "its .run effect keeps it in memory")
        gate.open()
        XCTAssertTrue(
            waitUntil(timeout: 10) { (try? self.health(fixture).loaded) == 0 }, "unloaded once the effect ended")
        let read = try fixture.client.request("GET", "/sessions/\(session)")
        XCTAssertEqual(
            (read.object["state"] as? [String: Any])?["done"] as? Bool, true, "the effect's mutation was stored")
    }

    /// A running effect keeps its session in memory, not alive: idle past its TTL, it expires.
    func testARunningEffectDoesNotKeepItsSessionPastItsTTL() throws {
        let fixture = try start { $0.sessionTTL = .seconds(1) }
        defer { fixture.stop() }
        let gate = EffectGate()
        defer { gate.open() }
        fixture.server.register("slow") { _ in SlowReactor(gate: gate) }
        let created = try fixture.client.request("POST", "/sessions", body: #"{"reactor":"slow"}"#)
        let session = try XCTUnwrap(created.object["session"] as? String)
        XCTAssertEqual(try fixture.send(session, #""start""#).status, 200)
        XCTAssertTrue(
            waitUntil(timeout: 10) { (try? self.health(fixture).loaded) == 0 }, "expired, though its effect runs")
        XCTAssertEqual(try fixture.client.request("GET", "/sessions/\(session)").status, 404)
        XCTAssertEqual(try health(fixture).stored, 0)
    }

    /// A `transform(state:)` that gives no state at once (`debounce`, `receive(on:)`; here
    /// `dropFirst`) leaves the session at its initial state meanwhile, as ReactorKit's
    /// `currentState` does. It was `{}`: answered, streamed and stored so (every later load a 409),
    /// or not stored at all, and the first state then emitted a pulse never assigned.
    func testASessionIsAtItsInitialStateUntilItsStateTransformGivesOne() throws {
        var fixture = try start()
        fixture.server.register("late") { _ in LateStateReactor() }
        let created = try fixture.client.request("POST", "/sessions", body: #"{"reactor":"late"}"#)
        XCTAssertEqual(created.status, 201, created.text)
        XCTAssertEqual((created.object["state"] as? [String: Any])?["count"] as? Int, 0, created.text)
        let session = try XCTUnwrap(created.object["session"] as? String)
        let idle = try XCTUnwrap(
            try fixture.client.request("POST", "/sessions", body: #"{"reactor":"late"}"#).object["session"] as? String)
        let events = try fixture.subscribe(session)
        XCTAssertEqual(events.next()?.object["count"] as? Int, 0)
        let bumped = try fixture.client.request("POST", "/sessions/\(session)/actions", body: #""bump""#)
        XCTAssertEqual(bumped.object["version"] as? Int, 1, bumped.text)
        let next = try XCTUnwrap(events.next())
        XCTAssertEqual(next.event, "state", "no pulse of a never assigned field")
        XCTAssertEqual(next.object["count"] as? Int, 1)
        events.reset()
        fixture.stop()
        fixture = try start()
        defer { fixture.stop() }
        fixture.server.register("late") { _ in LateStateReactor() }
        for (id, count) in [(session, 1), (idle, 0)] {
            let read = try fixture.client.request("GET", "/sessions/\(id)")
            XCTAssertEqual(read.status, 200, read.text)
            XCTAssertEqual((read.object["state"] as? [String: Any])?["count"] as? Int, count, read.text)
        }
    }

    func testTheUserChangedWhileUnloadedReachesTheSessionWhenItLoads() throws {
        let fixture = try start()
        defer { fixture.stop() }
        let session = try fixture.createSession()
        XCTAssertTrue(waitUntil(timeout: 10) { (try? self.health(fixture).loaded) == 0 })
        XCTAssertEqual(try fixture.putUser(id: "u1", name: "Ada").status, 200)
        let read = try fixture.client.request("GET", "/sessions/\(session)")
        let user = (read.object["state"] as? [String: Any])?["user"] as? [String: Any]
        XCTAssertEqual(user?["name"] as? String, "Ada")
    }

    func testAFullTableUnloadsTheLeastRecentlyUsedAndRefusesOnlyWhenAllAreBusy() throws {
        let fixture = try start { configuration in
            configuration.maxSessions = 3
            configuration.unloadAfter = .zero  // memory pressure only
        }
        defer { fixture.stop() }
        let sessions = try (0..<3).map { _ in try fixture.createSession() }
        // Acted on over a second after their last stored activity (written every eighth of the
        // TTL only): no reason to keep any of them in memory.
        Thread.sleep(forTimeInterval: 1.2)
        for session in sessions { XCTAssertEqual(try fixture.send(session, #"{"type":"increase"}"#).status, 200) }
        let fourth = try fixture.createSession()
        XCTAssertEqual(try health(fixture).loaded, 3)
        XCTAssertEqual(try metric(fixture, #"reactord_session_unloads_total{reason="memory"}"#), 1)
        let first = try fixture.client.request("GET", "/sessions/\(sessions[0])")
        XCTAssertEqual(first.status, 200, "the least recently used one was unloaded, and loads again")
        XCTAssertEqual(first.object["version"] as? Int, 1)

        let watchers = try [sessions[0], sessions[1], fourth].map { session -> EventStreamClient in
            let watcher = try fixture.subscribe(session)
            XCTAssertNotNil(watcher.next())
            return watcher
        }
        let refused = try fixture.client.request("POST", "/sessions", body: #"{"reactor":"counter"}"#)
        assertProblem(refused, 503, mentions: ["busy"])
        XCTAssertNotNil(refused.header("Retry-After"))
        XCTAssertEqual(
            try fixture.client.request("GET", "/sessions/\(sessions[2])").status, 503, "no room to load it either")
        watchers[2].reset()
        XCTAssertTrue(
            waitUntil(timeout: 10) {
                (try? fixture.client.request("GET", "/sessions/\(sessions[2])").status) == 200
            }, "a stream gone frees its place")
    }

    /// A kept answer needs no reactor: a repeat is replayed while memory has no room to load it.
    func testARepeatIsReplayedWithoutRoomInMemory() throws {
        let fixture = try start { configuration in
            configuration.maxSessions = 2
            configuration.unloadAfter = .zero  // memory pressure only
        }
        defer { fixture.stop() }
        let session = try fixture.createSession()
        let first = try fixture.client.request(
            "POST", "/sessions/\(session)/actions", body: #"{"type":"increase"}"#, headers: ["Idempotency-Key": "k"])
        XCTAssertEqual(first.status, 200, first.text)
        Thread.sleep(forTimeInterval: 1.2)  // past its last stored activity: first to be unloaded
        let watchers = try (0..<2).map { _ -> EventStreamClient in
            let watcher = try fixture.subscribe(try fixture.createSession())
            XCTAssertNotNil(watcher.next())
            return watcher
        }
        XCTAssertEqual(try health(fixture).loaded, 2, "unloaded for the busy ones")
        XCTAssertEqual(
            try fixture.send(session, #"{"type":"increase"}"#).status, 503, "no room to run a new action")
        let repeated = try fixture.client.request(
            "POST", "/sessions/\(session)/actions", body: #"{"type":"increase"}"#, headers: ["Idempotency-Key": "k"])
        XCTAssertEqual(repeated.status, 200, repeated.text)
        XCTAssertEqual(repeated.header("Idempotent-Replayed"), "true")
        XCTAssertEqual(repeated.body, first.body)
        withExtendedLifetime(watchers) {}
    }

    func testSessionsExpireInTheStoreWithoutBeingLoaded() throws {
        let fixture = try start { $0.sessionTTL = .seconds(1) }
        defer { fixture.stop() }
        let sessions = try (0..<20).map { _ in try fixture.createSession() }
        XCTAssertTrue(waitUntil(timeout: 15) { (try? self.health(fixture).stored) == 0 }, "expired in the store")
        XCTAssertEqual(try metric(fixture, "reactord_session_loads_total"), 0, "none was loaded to expire it")
        XCTAssertEqual(try fixture.client.request("GET", "/sessions/\(sessions[0])").status, 404)
    }

    /// Reading a stored session's history loads it without using it: it still expires a TTL
    /// after its last action (deleted in the store, and taken out of memory), not a TTL after the
    /// read, nor once it leaves memory.
    func testReadingHistoryDoesNotPutOffExpiry() throws {
        let settings: (inout ServiceConfiguration) -> Void = {
            $0.sessionTTL = .seconds(4)
            $0.unloadAfter = .seconds(60)
        }
        var fixture = try start(settings)
        let session = try fixture.createSession()
        XCTAssertEqual(try fixture.send(session, #"{"type":"increase"}"#).status, 200)
        let lastUse = ProcessInfo.processInfo.systemUptime
        fixture.stop()
        fixture = try start(settings)
        defer { fixture.stop() }
        Thread.sleep(forTimeInterval: max(0, lastUse + 2 - ProcessInfo.processInfo.systemUptime))
        XCTAssertEqual(try fixture.client.request("GET", "/sessions/\(session)/states/1").status, 200)
        XCTAssertEqual(try fixture.client.request("GET", "/sessions/\(session)/actions").status, 200)
        XCTAssertEqual(try health(fixture).loaded, 1, "loaded by the reads")
        let expired = waitUntil(timeout: lastUse + 5.2 - ProcessInfo.processInfo.systemUptime) {
            (try? self.health(fixture)).map { $0.stored == 0 && $0.loaded == 0 } ?? false
        }
        XCTAssertTrue(expired, "still stored or loaded 5.2 s after its last action, with a TTL of 4 s")
    }

    /// A graceful stop writes every loaded session's last activity, however recent: a read a
    /// moment before a restart counts for the TTL after it.
    func testAReadJustBeforeAStopCountsAfterTheRestart() throws {
        var fixture = try start { $0.sessionTTL = .seconds(6) }
        let session = try fixture.createSession()
        let created = ProcessInfo.processInfo.systemUptime
        Thread.sleep(forTimeInterval: 2)
        XCTAssertEqual(try fixture.client.request("GET", "/sessions/\(session)").status, 200)
        fixture.stop()
        fixture = try start { $0.sessionTTL = .seconds(6) }
        defer { fixture.stop() }
        Thread.sleep(forTimeInterval: max(0, created + 6.8 - ProcessInfo.processInfo.systemUptime))
        XCTAssertEqual(
            try fixture.client.request("GET", "/sessions/\(session)").status, 200,
            "expired 6.8 s after it was made, 4.8 s after it was read, with a TTL of 6 s")
    }

    /// A session that leaves memory idle takes its last activity to the store, however recent:
    /// an action or a read just before counts the whole TTL from then, not from the coarser time
    /// stored with its writes (an eighth of the TTL behind at most).
    func testASessionUnloadedIdleExpiresATTLAfterItsLastUseNotBefore() throws {
        // Checked 0.7 s either side: before the TTL runs out after the last use, after it ran
        // out after the creation (the stored time without the fix).
        let fixture = try start { $0.sessionTTL = .seconds(12) }
        defer { fixture.stop() }
        let acted = try fixture.createSession()
        let read = try fixture.createSession()
        Thread.sleep(forTimeInterval: 1.4)  // within an eighth of the TTL of their creation
        XCTAssertEqual(try fixture.send(acted, #"{"type":"increase"}"#).status, 200)
        XCTAssertEqual(try fixture.client.request("GET", "/sessions/\(read)").status, 200)
        let lastUse = ProcessInfo.processInfo.systemUptime
        XCTAssertTrue(waitUntil(timeout: 5) { (try? self.health(fixture).loaded) == 0 }, "unloaded once idle")
        Thread.sleep(forTimeInterval: max(0, lastUse + 11.3 - ProcessInfo.processInfo.systemUptime))
        for session in [acted, read] {
            XCTAssertEqual(
                try fixture.client.request("GET", "/sessions/\(session)").status, 200,
                "expired 11.3 s after its last use, with a TTL of 12 s")
        }
    }

    func testWithoutATTLAStoredSessionNeverExpires() throws {
        var fixture = try start { $0.sessionTTL = .seconds(1) }
        let session = try fixture.createSession()
        fixture.stop()
        Thread.sleep(forTimeInterval: 1.5)  // past the TTL it was made with, while no server ran
        fixture = try start { $0.sessionTTL = .zero }
        defer { fixture.stop() }
        Thread.sleep(forTimeInterval: 0.5)  // a few sweeps
        XCTAssertEqual(try fixture.client.request("GET", "/sessions/\(session)").status, 200)
        XCTAssertEqual(try health(fixture).stored, 1)
    }
}

/// Opens once; `.run` effects wait on it.
private final class EffectGate: @unchecked Sendable {
    private let condition = NSCondition()
    private var isOpen = false

    func open() {
        condition.lock()
        isOpen = true
        condition.broadcast()
        condition.unlock()
    }

    func wait() {
        condition.lock()
        while !isOpen { condition.wait() }
        condition.unlock()
    }
}

/// A reactor whose `start` runs an effect until the test opens its gate.
private final class SlowReactor: Reactor {
    enum Action: String, Decodable { case start }
    enum Mutation { case finish }
    struct State: Codable { var done = false }

    let initialState = State()
    private let gate: EffectGate

    init(gate: EffectGate) { self.gate = gate }

    func mutate(action: Action) -> AnyPublisher<Mutation, Never> {
        .run { [gate] send in
            await Task.detached { gate.wait() }.value
            await send(.finish)
        }
    }

    func reduce(state: State, mutation: Mutation) -> State {
        State(done: true)
    }
}

/// A reactor whose `transform(state:)` gives no state until its first action (`dropFirst`: as a
/// `debounce` or a `receive(on:)` gives none at once), with a pulse never assigned.
private final class LateStateReactor: Reactor {
    enum Action: String, Decodable { case bump }
    struct State: Codable {
        var count = 0
        @Pulse var note: String?
    }

    let initialState = State()

    func reduce(state: State, mutation: Action) -> State {
        var state = state
        state.count += 1
        return state
    }

    func transform(state: AnyPublisher<State, Never>) -> AnyPublisher<State, Never> {
        state.dropFirst().eraseToAnyPublisher()
    }
}
