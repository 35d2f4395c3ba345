import Foundation
import ReactorCore
import ReactorService
import TestSupport
import XCTest

/// The action log and the history routes against a real server, on the memory store and on a
/// real SQLite file (PostgreSQL: `ActionLogPostgresTests`).
class ActionLogTests: XCTestCase {
    /// The store the tests run on; subclasses change it.
    func store() throws -> StoreLocation { .memory }

    private var directory: URL?

    override func tearDownWithError() throws {
        if let directory { try? FileManager.default.removeItem(at: directory) }
    }

    func temporaryFile(_ name: String) throws -> String {
        let folder = FileManager.default.temporaryDirectory.appendingPathComponent("reactord-log-\(UUID().uuidString)")
        try FileManager.default.createDirectory(at: folder, withIntermediateDirectories: true)
        directory = folder
        return folder.appendingPathComponent(name).path
    }

    private func start(_ configure: (inout ServiceConfiguration) -> Void = { _ in }) throws -> ServerFixture {
        let store = try store()
        let fixture = try ServerFixture { configuration in
            configuration.store = store
            configuration.historyLength = 5_000
            configuration.actionLogLength = 5_000
            configure(&configuration)
        }
        fixture.server.register("ledger") { currentUser in LedgerReactor(currentUser: currentUser) }
        return fixture
    }

    private func open(_ fixture: ServerFixture, _ kind: String = "ledger") throws -> String {
        let created = try fixture.client.request("POST", "/sessions", body: #"{"reactor":"\#(kind)"}"#)
        XCTAssertEqual(created.status, 201, created.text)
        return try XCTUnwrap(created.object["session"] as? String)
    }

    @discardableResult
    private func act(
        _ fixture: ServerFixture, _ session: String, _ action: String,
        headers: [String: String] = [:]
    ) throws -> TestResponse {
        let response = try fixture.client.request(
            "POST", "/sessions/\(session)/actions", body: action, headers: headers)
        XCTAssertEqual(response.status, 200, response.text)
        return response
    }

    private func log(_ fixture: ServerFixture, _ session: String, query: String = "") throws -> [[String: Any]] {
        let response = try fixture.client.request("GET", "/sessions/\(session)/actions\(query)")
        XCTAssertEqual(response.status, 200, response.text)
        return response.object["actions"] as? [[String: Any]] ?? []
    }

    /// The whole log, page by page.
    private func wholeLog(_ fixture: ServerFixture, _ session: String) throws -> [[String: Any]] {
        var entries: [[String: Any]] = []
        var query = "?limit=1000"
        for _ in 0..<100 {
            let page = try fixture.client.request("GET", "/sessions/\(session)/actions\(query)")
            XCTAssertEqual(page.status, 200, page.text)
            entries += page.object["actions"] as? [[String: Any]] ?? []
            guard let next = page.object["next"] as? Int else { break }
            query = "?limit=1000&after=\(next)"
        }
        return entries
    }

    /// Waits for the log to hold `count` entries (effects log theirs when they run).
    private func log(_ fixture: ServerFixture, _ session: String, count: Int) throws -> [[String: Any]] {
        var entries: [[String: Any]] = []
        for _ in 0..<200 {
            entries = try wholeLog(fixture, session)
            if entries.count >= count { break }
            Thread.sleep(forTimeInterval: 0.02)
        }
        return entries
    }

    /// Waits for the log to reach `version` (an entry that made it, or one that changed nothing there).
    private func log(_ fixture: ServerFixture, _ session: String, through version: Int) throws -> [[String: Any]] {
        var entries: [[String: Any]] = []
        for _ in 0..<200 {
            entries = try wholeLog(fixture, session)
            if entries.contains(where: { $0["version"] as? Int ?? 0 >= version }) { break }
            Thread.sleep(forTimeInterval: 0.02)
        }
        return entries
    }

    func testEachActionIsLoggedWithItsVersionsKeyAndTime() throws {
        let fixture = try start()
        defer { fixture.stop() }
        let session = try open(fixture)
        let before = Date().addingTimeInterval(-1)
        // Logged as kept: without the whitespace after it (RFC 9110, 5.5).
        try act(fixture, session, #"{"type":"add","amount":2}"#, headers: ["Idempotency-Key": "first-add \t"])
        XCTAssertEqual(
            try fixture.client.request(
                "POST", "/action",
                body: #"{"session":"\#(session)","action":{"type":"add","amount":3}}"#
            ).status, 200)
        try act(fixture, session, #"{"type":"noop"}"#)
        let entries = try log(fixture, session)
        XCTAssertEqual(entries.count, 3, "\(entries)")
        XCTAssertEqual(entries.map { $0["number"] as? Int }, [1, 2, 3])
        XCTAssertEqual(entries.map { $0["cause"] as? String }, ["action", "action", "action"])
        XCTAssertEqual(entries[0]["action"] as? NSDictionary, ["type": "add", "amount": 2] as NSDictionary)
        XCTAssertEqual(
            entries[1]["action"] as? NSDictionary, ["type": "add", "amount": 3] as NSDictionary,
            "POST /action's action alone")
        XCTAssertEqual(entries[0]["idempotencyKey"] as? String, "first-add")
        XCTAssertNil(entries[1]["idempotencyKey"])
        XCTAssertEqual(entries[0]["from"] as? Int, 1)
        XCTAssertEqual(entries[0]["version"] as? Int, 1)
        XCTAssertEqual(entries[1]["version"] as? Int, 2)
        XCTAssertNil(entries[2]["from"], "noop changed nothing")
        XCTAssertEqual(entries[2]["version"] as? Int, 2)
        let formatter = ISO8601DateFormatter()
        formatter.formatOptions = [.withInternetDateTime, .withFractionalSeconds]
        let time = try XCTUnwrap(formatter.date(from: entries[0]["time"] as? String ?? ""), "\(entries[0])")
        XCTAssertTrue(time > before && time < Date().addingTimeInterval(1), "\(time)")
    }

    /// A change that another thread sends while an action runs (an effect's, a merged stream's) is
    /// not the action's: neither in its answer (the state its own run left) nor in its entry.
    func testAnEffectsChangeSentWhileItsActionRunsIsNotInTheAnswer() throws {
        let fixture = try start()
        defer { fixture.stop() }
        let session = try open(fixture)
        let answer = try act(fixture, session, #"{"type":"addDuring","amount":7}"#)
        XCTAssertEqual(answer.object["version"] as? Int, 1, answer.text)
        XCTAssertEqual((answer.object["state"] as? [String: Any])?["total"] as? Int, 0, answer.text)
        let entries = try log(fixture, session, count: 2)
        XCTAssertEqual(entries.count, 2, "\(entries)")
        XCTAssertEqual(entries.first?["cause"] as? String, "action", "\(entries)")
        XCTAssertEqual(entries.first?["version"] as? Int, 1, "\(entries)")
        XCTAssertEqual(entries.last?["cause"] as? String, "effect", "\(entries)")
        XCTAssertEqual(entries.last?["from"] as? Int, 2, "\(entries)")
        XCTAssertEqual(entries.last?["version"] as? Int, 2, "\(entries)")
        let state = try fixture.client.request("GET", "/sessions/\(session)")
        XCTAssertEqual((state.object["state"] as? [String: Any])?["total"] as? Int, 7, state.text)
    }

    func testAnEffectsLaterChangesAndTheUsersAreLoggedAsSuch() throws {
        let fixture = try start()
        defer { fixture.stop() }
        let session = try open(fixture)
        try act(fixture, session, #"{"type":"addLater","amount":5}"#)
        _ = try log(fixture, session, through: 3)
        XCTAssertEqual(try fixture.putUser(id: "u1", name: "Ann").status, 200)
        let entries = try log(fixture, session, through: 4)
        // The effect's two changes (versions 2 and 3) come 2 ms after its action: entries of their
        // own naming the action, or, when the action's thread stalled past them before its run
        // ended, the end of the action's own span. Either way each version is in one entry.
        let action = try XCTUnwrap(entries.first)
        XCTAssertEqual(action["cause"] as? String, "action", "\(entries)")
        XCTAssertEqual(action["from"] as? Int, 1, "the action's own mutation: pending")
        let actionLast = try XCTUnwrap(action["version"] as? Int)
        let effects = entries.dropFirst().filter { $0["cause"] as? String == "effect" }
        let effectVersions: [Int?] = Array(stride(from: actionLast + 1, through: 3, by: 1))
        XCTAssertEqual(
            effects.map { $0["from"] as? Int }, effectVersions, "each later mutation, its own entry")
        XCTAssertEqual(effects.map { $0["version"] as? Int }, effectVersions)
        for effect in effects {
            XCTAssertEqual(effect["origin"] as? Int, 1, "the effect is its action's")
            XCTAssertNil(effect["action"])
        }
        XCTAssertEqual(entries.map { $0["cause"] as? String }.last, "user", "\(entries)")
        XCTAssertEqual(entries.last?["from"] as? Int, 4)
        XCTAssertEqual(entries.count, 2 + effects.count)
        let state = try fixture.client.request("GET", "/sessions/\(session)/states/3")
        XCTAssertEqual((state.object["state"] as? [String: Any])?["total"] as? Int, 5, state.text)
        XCTAssertEqual((state.object["state"] as? [String: Any])?["pending"] as? Bool, false, state.text)
        XCTAssertEqual(state.header("ETag"), #""3""#, "the version it shows")
    }

    func testPagesFollowNextAndTheExportHasEveryEntry() throws {
        let fixture = try start()
        defer { fixture.stop() }
        let session = try open(fixture)
        for amount in 1...7 { try act(fixture, session, #"{"type":"add","amount":\#(amount)}"#) }
        try act(fixture, session, #"{"type":"noop"}"#)
        try act(fixture, session, #"{"type":"noop"}"#)
        var numbers: [Int] = []
        var after = 0
        for _ in 0..<10 {
            let page = try fixture.client.request("GET", "/sessions/\(session)/actions?after=\(after)&limit=3")
            XCTAssertEqual(page.status, 200, page.text)
            numbers += (page.object["actions"] as? [[String: Any]] ?? []).compactMap { $0["number"] as? Int }
            guard let next = page.object["next"] as? Int else { break }
            after = next
        }
        XCTAssertEqual(numbers, Array(1...9), "pages by version miss none, the no-ops sharing version 7 included")
        let export = try fixture.client.request("GET", "/sessions/\(session)/actions?format=ndjson")
        XCTAssertEqual(export.status, 200)
        XCTAssertEqual(export.header("Content-Type"), "application/x-ndjson")
        let lines = export.text.split(separator: "\n").map {
            try? JSONSerialization.jsonObject(with: Data($0.utf8)) as? [String: Any]
        }
        XCTAssertEqual(lines.compactMap { $0?["number"] as? Int }, Array(1...9))
        for (query, problem) in [
            ("?limit=0", "limit"), ("?limit=1001", "limit"), ("?after=-1", "after"),
            ("?after=%2B5", "after"), ("?limit=+5", "limit"), ("?format=xml", "format"),
            ("?format=ndjson&limit=1.5", "limit"), ("?format=ndjson&limit=0", "limit"),
        ] {
            let refused = try fixture.client.request("GET", "/sessions/\(session)/actions\(query)")
            XCTAssertEqual(refused.status, 400, query)
            XCTAssertTrue((refused.object["detail"] as? String ?? "").contains(problem), refused.text)
        }
    }

    func testTheExportIsOneEntryALineWhateverTheActionsLayout() throws {
        let fixture = try start()
        defer { fixture.stop() }
        let session = try open(fixture)
        let laidOut = "{\n  \"type\": \"add\",\r\n\t\"amount\": 2\n}\n"
        try act(fixture, session, laidOut)
        let viaAction = try fixture.client.request(
            "POST", "/action", body: "{\"session\": \"\(session)\",\n \"action\": {\n \"type\": \"noop\" }\n}")
        XCTAssertEqual(viaAction.status, 200, viaAction.text)
        let export = try fixture.client.request("GET", "/sessions/\(session)/actions?format=ndjson")
        XCTAssertEqual(export.status, 200, export.text)
        // By bytes: "\r\n" is one Character, which a split on "\n" would not cut.
        let lines = export.text.utf8.split(separator: UInt8(ascii: "\n"), omittingEmptySubsequences: false)
            .map { String(decoding: $0, as: UTF8.self) }
        XCTAssertEqual(lines.count, 3, "two entries, each a line ending with a line feed: \(export.text)")
        XCTAssertEqual(lines.last, "")
        let entries = lines.dropLast().map { try? JSONSerialization.jsonObject(with: Data($0.utf8)) as? [String: Any] }
        XCTAssertEqual(entries.compactMap { $0?["number"] as? Int }, [1, 2], export.text)
        XCTAssertTrue(lines[0].contains(#""action":{"type":"add","amount":2}"#), lines[0])
        XCTAssertTrue(lines[1].contains(#""action":{"type":"noop"}"#), lines[1])
        // A page is JSON, not lines: there the action stays as it was sent.
        let page = try fixture.client.request("GET", "/sessions/\(session)/actions")
        XCTAssertTrue(page.text.contains(#"{\#n  "type": "add",\#r\#n\#t"amount": 2\#n}"#), page.text)
        XCTAssertEqual(try log(fixture, session).compactMap { $0["number"] as? Int }, [1, 2])
    }

    func testStatesAtEveryVersionMatchTheStreamAndTheLogReplaysToTheSameState() throws {
        let fixture = try start()
        defer { fixture.stop() }
        let session = try open(fixture)
        let stream = try fixture.subscribe(session)
        var shown: [Int: String] = [:]
        func readStream(until version: Int) {
            while shown[version] == nil, let event = stream.next(timeout: 10) {
                if event.event == "state", let id = event.id.flatMap(Int.init) { shown[id] = event.data }
            }
        }
        for round in 0..<1_000 {
            switch round % 50 {
            case 10: try act(fixture, session, #"{"type":"addLater","amount":\#(round)}"#)
            case 20: XCTAssertEqual(try fixture.putUser(id: "u\(round)", name: "User \(round)").status, 200)
            case 30: try act(fixture, session, #"{"type":"noop"}"#)
            default: try act(fixture, session, #"{"type":"add","amount":\#(round % 7)}"#)
            }
        }
        let total = (0..<1_000).reduce(0) { $0 + ($1 % 50 == 20 || $1 % 50 == 30 ? 0 : $1 % 50 == 10 ? $1 : $1 % 7) }
        // The effects may still be running, on a loaded machine long after their actions: the
        // session is done once every amount is in and `pending` is off (what is left, `pending`
        // off, changes nothing).
        let version = try XCTUnwrap(try settled(fixture, session, total: total)["version"] as? Int)
        readStream(until: version)
        XCTAssertEqual(shown.count, version + 1, "the stream showed every version from 0")
        for v in 0...version {
            let state = try fixture.client.request("GET", "/sessions/\(session)/states/\(v)")
            XCTAssertEqual(state.status, 200, "version \(v): \(state.text)")
            let expected = try JSONSerialization.jsonObject(with: Data((shown[v] ?? "").utf8)) as? NSDictionary
            XCTAssertEqual(state.object["state"] as? NSDictionary, expected, "version \(v)")
        }
        let entries = try log(fixture, session, through: version)
        XCTAssertEqual(entries.filter { $0["cause"] as? String == "action" }.count, 1_000 - 20, "every action")
        XCTAssertEqual(entries.filter { $0["cause"] as? String == "user" }.count, 20)
        var states: [Int: [String: Any]] = [:]
        for (v, json) in shown {
            states[v] = try JSONSerialization.jsonObject(with: Data(json.utf8)) as? [String: Any]
        }
        checkEveryVersionHasOneMaker(entries, states: states, version: version)
        XCTAssertEqual(
            entries.compactMap { $0["number"] as? Int }.sorted(), Array(1...entries.count), "numbered without gaps")
        let versions = entries.compactMap { $0["version"] as? Int }
        XCTAssertEqual(versions, versions.sorted(), "in the order of their versions")
        // The logged actions, in order, on a fresh session: the same total.
        let replay = try open(fixture)
        for entry in entries where entry["cause"] as? String == "action" {
            let action = try JSONSerialization.data(withJSONObject: try XCTUnwrap(entry["action"]))
            try act(fixture, replay, String(decoding: action, as: UTF8.self))
        }
        let replayed = try settled(fixture, replay, total: total)["state"] as? [String: Any]
        let original = try fixture.client.request("GET", "/sessions/\(session)").object["state"] as? [String: Any]
        // The user is the global one's, not the actions': a fresh session only has the total in common.
        XCTAssertEqual(replayed?["total"] as? Int, original?["total"] as? Int)
        XCTAssertEqual(replayed?["total"] as? Int, total)
    }

    /// The session once its state has `total` and `pending` off, or after 10 s.
    private func settled(_ fixture: ServerFixture, _ session: String, total: Int) throws -> [String: Any] {
        var document = try fixture.client.request("GET", "/sessions/\(session)").object
        for _ in 0..<200 {
            let state = document["state"] as? [String: Any]
            if state?["total"] as? Int == total, state?["pending"] as? Bool == false { break }
            Thread.sleep(forTimeInterval: 0.05)
            document = try fixture.client.request("GET", "/sessions/\(session)").object
        }
        return document
    }

    /// What the log says made each version, against the states the stream showed: each version
    /// from 1 is in the `from...version` of exactly one entry, and that entry made that change.
    /// When an effect runs is the machine's business: its mutations are entries of their own
    /// (cause `effect`, `origin` its action), or, when they came while their action still ran,
    /// versions of the action's entry; a mutation that changed nothing (`pending` set as it was)
    /// makes no version and is in no entry.
    private func checkEveryVersionHasOneMaker(_ entries: [[String: Any]], states: [Int: [String: Any]], version: Int) {
        var maker: [Int: Int] = [:]  // version: index of the entry that made it
        for (index, entry) in entries.enumerated() {
            guard let from = entry["from"] as? Int else { continue }
            let last = entry["version"] as? Int ?? 0
            guard from <= last else { return XCTFail("from after version: \(entry)") }
            for v in from...last {
                if let other = maker[v] { XCTFail("version \(v) in two entries: \(entries[other]) and \(entry)") }
                maker[v] = index
            }
        }
        XCTAssertEqual(maker.keys.sorted(), Array(1..<(version + 1)), "every version made by an entry")
        let actions = Dictionary(
            entries.compactMap { entry in (entry["number"] as? Int).map { ($0, entry) } }, uniquingKeysWith: { $1 })
        // Whose change each version is: the action's, for its own entry or an entry of its effect.
        var made: [Int: [Int]] = [:]  // action's number: versions
        for v in 1..<(version + 1) {
            guard let index = maker[v], let before = states[v - 1], let after = states[v] else { continue }
            let entry = entries[index]
            let changedUser = before["user"] as? String != after["user"] as? String
            let pendingBefore = before["pending"] as? Bool ?? false
            let pendingAfter = after["pending"] as? Bool ?? false
            switch entry["cause"] as? String {
            case "user":
                XCTAssertTrue(changedUser, "version \(v), a user entry's, changes the user: \(entry)")
                XCTAssertEqual(before["total"] as? Int, after["total"] as? Int, "version \(v): \(entry)")
            case "effect":
                let origin = entry["origin"] as? Int ?? 0
                XCTAssertEqual(
                    (actions[origin]?["action"] as? [String: Any])?["type"] as? String, "addLater",
                    "version \(v): an effect's origin is an action with an effect: \(entry)")
                XCTAssertGreaterThan(
                    v, actions[origin]?["version"] as? Int ?? .max, "after its action's own run: \(entry)")
                XCTAssertFalse(changedUser, "version \(v): \(entry)")
                XCTAssertFalse(!pendingBefore && pendingAfter, "version \(v): only an action sets pending: \(entry)")
                made[origin, default: []].append(v)
            default:
                XCTAssertFalse(changedUser, "version \(v): \(entry)")
                XCTAssertTrue(
                    pendingBefore == pendingAfter
                        || (entry["action"] as? [String: Any])?["type"] as? String == "addLater",
                    "version \(v): only an action with an effect sets pending: \(entry)")
                made[entry["number"] as? Int ?? 0, default: []].append(v)
            }
        }
        var effects = 0
        for entry in entries where entry["cause"] as? String == "action" {
            let number = entry["number"] as? Int ?? 0
            let action = entry["action"] as? [String: Any] ?? [:]
            let amount = action["amount"] as? Int ?? 0
            let versions = made[number] ?? []
            let added = versions.map { (states[$0]?["total"] as? Int ?? 0) - (states[$0 - 1]?["total"] as? Int ?? 0) }
            XCTAssertEqual(added.reduce(0, +), amount, "what \(entry) and its effect added, at \(versions)")
            switch action["type"] as? String {
            case "add":
                XCTAssertEqual(versions.count, amount == 0 ? 0 : 1, "an add makes one version, none for 0: \(entry)")
            case "addLater":
                // `pending` on (unless it was on), the amount, `pending` off (unless another effect's
                // turned it off): the amount is one version of the three.
                XCTAssertEqual(added.filter { $0 != 0 }, [amount], "\(entry): its effect at \(versions)")
                XCTAssertLessThanOrEqual(versions.count, 3, "\(entry): \(versions)")
                effects += 1
            default:
                XCTAssertEqual(versions, [], "a noop makes no version: \(entry)")
            }
        }
        XCTAssertEqual(effects, 20, "every effect's amount, once")
    }

    func testAForkStartsFromTheStateAtItsVersionWithItsOwnHistory() throws {
        let fixture = try start()
        defer { fixture.stop() }
        let session = try open(fixture)
        for amount in [1, 2, 3] { try act(fixture, session, #"{"type":"add","amount":\#(amount)}"#) }
        let forked = try fixture.client.request("POST", "/sessions/\(session)/fork", body: #"{"version":2}"#)
        XCTAssertEqual(forked.status, 201, forked.text)
        let fork = try XCTUnwrap(forked.object["session"] as? String)
        XCTAssertNotEqual(fork, session)
        XCTAssertEqual(forked.header("Location"), "/sessions/\(fork)")
        XCTAssertEqual(forked.object["reactor"] as? String, "ledger")
        XCTAssertEqual(forked.object["version"] as? Int, 0)
        XCTAssertEqual((forked.object["state"] as? [String: Any])?["total"] as? Int, 3)
        try act(fixture, fork, #"{"type":"add","amount":10}"#)
        XCTAssertEqual(try log(fixture, fork).count, 1, "its own log starts at the fork")
        XCTAssertEqual(
            (try fixture.client.request("GET", "/sessions/\(session)").object["state"] as? [String: Any])?["total"]
                as? Int, 6, "the original is untouched")
        let current = try fixture.client.request("POST", "/sessions/\(session)/fork")
        XCTAssertEqual(
            (current.object["state"] as? [String: Any])?["total"] as? Int, 6, "no version: the current state")
        let future = try fixture.client.request("POST", "/sessions/\(session)/fork", body: #"{"version":99}"#)
        XCTAssertEqual(
            future.status, 422, "the session is there; the body names a version it does not have: \(future.text)")
        XCTAssertTrue((future.object["detail"] as? String ?? "").contains("version 3"), future.text)
        let unknown = try fixture.client.request("POST", "/sessions/AAAAAAAAAAAAAAAAAAAAAA/fork")
        XCTAssertEqual(unknown.status, 404, unknown.text)
        // Under an Idempotency-Key a repeat gets the first fork back, and makes no second one.
        let keyed = try fixture.client.request(
            "POST", "/sessions/\(session)/fork", body: #"{"version":1}"#,
            headers: ["Idempotency-Key": "fork-once"])
        let again = try fixture.client.request(
            "POST", "/sessions/\(session)/fork", body: #"{"version":1}"#,
            headers: ["Idempotency-Key": "fork-once"])
        XCTAssertEqual(keyed.status, 201, keyed.text)
        XCTAssertEqual(again.status, 201, again.text)
        XCTAssertEqual(again.header("Idempotent-Replayed"), "true")
        XCTAssertEqual(again.object["session"] as? String, keyed.object["session"] as? String)
        let other = try fixture.client.request(
            "POST", "/sessions/\(session)/fork", body: #"{"version":2}"#,
            headers: ["Idempotency-Key": "fork-once"])
        XCTAssertEqual(other.status, 422, "the key named another fork: \(other.text)")
        // A version of 400 digits is named as an integer out of range, cut short with an ellipsis.
        let huge = try fixture.client.request(
            "POST", "/sessions/\(session)/fork", body: #"{"version":\#(String(repeating: "9", count: 400))}"#)
        XCTAssertEqual(huge.status, 422, huge.text)
        let detail = huge.object["detail"] as? String ?? ""
        XCTAssertTrue(detail.contains("within the range of UInt64") && detail.hasSuffix("…"), detail)
        XCTAssertLessThan(detail.count, 200, detail)
    }

    func testAStateOlderThanTheHistoryIsA404NamingTheOldestKept() throws {
        let fixture = try start { $0.historyLength = 4 }
        defer { fixture.stop() }
        let session = try open(fixture)
        for _ in 0..<100 { try act(fixture, session, #"{"type":"add","amount":1}"#) }
        let old = try fixture.client.request("GET", "/sessions/\(session)/states/1")
        XCTAssertEqual(old.status, 404, old.text)
        let oldest = try XCTUnwrap(old.object["oldestVersion"] as? Int, old.text)
        XCTAssertTrue(oldest > 1 && oldest <= 100, old.text)
        XCTAssertTrue((old.object["detail"] as? String ?? "").contains("oldest kept is version \(oldest)"), old.text)
        let kept = try fixture.client.request("GET", "/sessions/\(session)/states/\(oldest)")
        XCTAssertEqual(kept.status, 200, kept.text)
        XCTAssertEqual((kept.object["state"] as? [String: Any])?["total"] as? Int, oldest)
        XCTAssertEqual(try fixture.client.request("GET", "/sessions/\(session)/states/x").status, 400)
        // A whole number past the largest version: the refusal says where versions end.
        let past = try fixture.client.request("GET", "/sessions/\(session)/states/18446744073709551616")
        XCTAssertEqual(past.status, 400)
        XCTAssertTrue((past.object["detail"] as? String ?? "").contains("to 18446744073709551615"), past.text)
    }

    /// An action past 16 KiB of JSON (fields its reactor never reads) is kept as its type and the
    /// size left out: what one entry costs the store, a page and an export is bounded.
    func testAnActionPastTheEntryLimitIsLoggedAsItsTypeAndItsSize() throws {
        let fixture = try start()
        defer { fixture.stop() }
        let session = try open(fixture)
        let large = #"{"type":"add","amount":2,"junk":"\#(String(repeating: "j", count: 20_000))"}"#
        try act(fixture, session, large)
        let small = #"{"type":"add","amount":1,"note":"\#(String(repeating: "n", count: 1_000))"}"#
        try act(fixture, session, small)
        let entries = try log(fixture, session, count: 2)
        XCTAssertEqual(entries.count, 2)
        let first = try XCTUnwrap(entries.first?["action"] as? [String: Any])
        XCTAssertEqual(first["type"] as? String, "add")
        XCTAssertEqual(first["omittedBytes"] as? Int, large.utf8.count)
        XCTAssertEqual(first.count, 2, "the type and the size alone: \(first)")
        XCTAssertEqual(
            (entries.last?["action"] as? [String: Any])?["note"] as? String, String(repeating: "n", count: 1_000))
        let export = try fixture.client.request("GET", "/sessions/\(session)/actions?format=ndjson")
        XCTAssertEqual(export.status, 200, export.text)
        XCTAssertLessThan(export.body.count, 4_000, "no entry past the limit")
    }

    /// A node reads four logs at once, and a read keeps its place until its answer is sent whole:
    /// four exports their clients do not read (larger than a socket's buffers) make a fifth read
    /// a 503 with Retry-After, served again once those clients are gone.
    func testFourUnreadExportsMakeAFifthLogReadWait() throws {
        try XCTSkipUnless(type(of: self) == ActionLogTests.self, "the limit is the node's, whatever its store")
        let fixture = try start()
        defer { fixture.stop() }
        let session = try open(fixture)
        let padded = #"{"type":"add","amount":1,"note":"\#(String(repeating: "n", count: 15_000))"}"#
        for _ in 0..<600 { try act(fixture, session, padded) }
        var unread: [TestSocket] = []
        for _ in 0..<4 {
            let socket = try TestSocket(port: fixture.port, receiveBuffer: 4_096)
            try socket.write("GET /sessions/\(session)/actions?format=ndjson HTTP/1.1\r\nHost: x\r\n\r\n")
            unread.append(socket)
        }
        // Each has its answer's head: each took its place (a read races them otherwise).
        for socket in unread {
            XCTAssertTrue(String(decoding: try socket.receive(capacity: 12), as: UTF8.self).hasPrefix("HTTP/1.1 200"))
        }
        var busy: TestResponse?
        for _ in 0..<200 where busy == nil {
            let answer = try fixture.client.request("GET", "/sessions/\(session)/actions?limit=1")
            if answer.status == 503 { busy = answer } else { Thread.sleep(forTimeInterval: 0.02) }
        }
        let refused = try XCTUnwrap(busy, "a fifth read while four answers are unread")
        XCTAssertEqual(refused.header("Retry-After"), "1")
        XCTAssertTrue((refused.object["detail"] as? String ?? "").contains("action logs at once"), refused.text)
        let metrics = try fixture.client.request("GET", "/metrics").text
        XCTAssertTrue(metrics.contains(#"reactord_limited_total{limit="action_log_reads"}"#), "counted as a limit")
        for socket in unread { socket.reset() }
        unread = []  // closed: with SO_LINGER 0, a reset
        var served = false
        for _ in 0..<250 where !served {
            served = try fixture.client.request("GET", "/sessions/\(session)/actions?limit=1").status == 200
            if !served { Thread.sleep(forTimeInterval: 0.02) }
        }
        XCTAssertTrue(served, "the places are given back when their connections go")
    }

    /// With no history kept only the current version is known: an older one is a 404 naming it,
    /// never the current state under the older version's number.
    func testWithoutHistoryOnlyTheCurrentVersionIsAnswered() throws {
        let fixture = try start { $0.historyLength = 0 }
        defer { fixture.stop() }
        let session = try open(fixture)
        for _ in 0..<3 { try act(fixture, session, #"{"type":"add","amount":1}"#) }
        for version in 0..<3 {
            let old = try fixture.client.request("GET", "/sessions/\(session)/states/\(version)")
            XCTAssertEqual(old.status, 404, "version \(version): \(old.text)")
            XCTAssertEqual(old.object["oldestVersion"] as? Int, 3, old.text)
        }
        let current = try fixture.client.request("GET", "/sessions/\(session)/states/3")
        XCTAssertEqual(current.status, 200, current.text)
        XCTAssertEqual((current.object["state"] as? [String: Any])?["total"] as? Int, 3)
    }

    /// What the decoders allow the log keeps as the action it is: a body after a byte order mark,
    /// POST /action's `action` member written with escapes (it logged the whole body), and a retry
    /// of either under its key through the other route is the same request, replayed.
    func testAnActionAfterAByteOrderMarkOrUnderAnEscapedKeyIsLoggedAsTheAction() throws {
        let fixture = try start()
        defer { fixture.stop() }
        let session = try open(fixture)
        let bom = "\u{FEFF}"
        try act(fixture, session, bom + #"{"type":"add","amount":1}"#, headers: ["Idempotency-Key": "bom-path"])
        for (body, key) in [
            (bom + #"{"session":"\#(session)","action":{"type":"add","amount":2}}"#, "bom-wrapped"),
            (#"{"session":"\#(session)","\u0061ction":{"type":"add","amount":3}}"#, "escaped"),
        ] {
            let response = try fixture.client.request("POST", "/action", body: body, headers: ["Idempotency-Key": key])
            XCTAssertEqual(response.status, 200, response.text)
        }
        let page = try fixture.client.request("GET", "/sessions/\(session)/actions")
        XCTAssertEqual(page.status, 200)
        let entries = try XCTUnwrap(page.object["actions"] as? [[String: Any]], page.text)
        XCTAssertEqual(
            entries.map { $0["action"] as? NSDictionary },
            [1, 2, 3].map { ["type": "add", "amount": $0] as NSDictionary }, page.text)
        let export = try fixture.client.request("GET", "/sessions/\(session)/actions?format=ndjson")
        for line in export.text.split(separator: "\n") {
            XCTAssertNoThrow(try JSONSerialization.jsonObject(with: Data(line.utf8)), String(line))
        }
        let replayed = try fixture.client.request(
            "POST", "/action", body: #"{"session":"\#(session)","action":{"type":"add","amount":1}}"#,
            headers: ["Idempotency-Key": "bom-path"])
        XCTAssertEqual(replayed.status, 200, replayed.text)
        XCTAssertEqual(replayed.header("Idempotent-Replayed"), "true")
        let again = try fixture.client.request(
            "POST", "/sessions/\(session)/actions", body: #"{"type":"add","amount":3}"#,
            headers: ["Idempotency-Key": "escaped"])
        XCTAssertEqual(again.header("Idempotent-Replayed"), "true", again.text)
    }

    func testRedactedFieldsNeverReachTheLog() throws {
        let fixture = try start()
        defer { fixture.stop() }
        let session = try open(fixture)
        try act(fixture, session, #"{"type":"login","name":"ann","password":"hunter2","nested":{"password":["x"]}}"#)
        // as json.dumps may spell it
        try act(fixture, session, #"{"type":"login","name":"bo","pass\u0077ord":"hunter3"}"#)
        let export = try fixture.client.request("GET", "/sessions/\(session)/actions?format=ndjson")
        XCTAssertFalse(export.text.contains("hunter2") || export.text.contains("hunter3"), export.text)
        let entry = try XCTUnwrap(try log(fixture, session).first)
        XCTAssertEqual(
            entry["action"] as? NSDictionary,
            ["type": "login", "name": "ann", "password": "[redacted]", "nested": ["password": "[redacted]"]]
                as NSDictionary)
    }

    func testWithTheLogOffNothingIsLogged() throws {
        let fixture = try start { $0.actionLogLength = 0 }
        defer { fixture.stop() }
        let session = try open(fixture)
        try act(fixture, session, #"{"type":"add","amount":1}"#)
        let refused = try fixture.client.request("GET", "/sessions/\(session)/actions")
        XCTAssertEqual(refused.status, 404)
        XCTAssertTrue((refused.object["detail"] as? String ?? "").contains("--action-log 0"), refused.text)
        XCTAssertEqual(
            try fixture.client.request("GET", "/sessions/\(session)/states/1").status, 200,
            "states come from the history, which stays")
    }

    func testTheLogKeepsItsNewestEntries() throws {
        let fixture = try start { $0.actionLogLength = 10 }
        defer { fixture.stop() }
        let session = try open(fixture)
        for _ in 0..<200 { try act(fixture, session, #"{"type":"add","amount":1}"#) }
        let numbers = try wholeLog(fixture, session).compactMap { $0["number"] as? Int }
        XCTAssertEqual(numbers.last, 200)
        // A durable store trims in steps of 64: between 10 and 74 are kept.
        XCTAssertTrue(numbers.count >= 10 && numbers.count <= 74, "\(numbers.count) kept")
        XCTAssertEqual(numbers, Array((200 - numbers.count + 1)...200))
    }

    /// An entry past `--action-log-age` is never shown, the session's newest included (which a
    /// durable store keeps for its numbering); the next entry's number goes on after it.
    func testEntriesPastTheirAgeAreNotShown() throws {
        let fixture = try start { $0.actionLogAge = .milliseconds(1_500) }
        defer { fixture.stop() }
        let session = try open(fixture)
        try act(fixture, session, #"{"type":"add","amount":1}"#)
        try act(fixture, session, #"{"type":"add","amount":2}"#)
        XCTAssertEqual(try log(fixture, session).count, 2)
        Thread.sleep(forTimeInterval: 1.7)
        XCTAssertEqual(try log(fixture, session).count, 0, "entries older than --action-log-age")
        let export = try fixture.client.request("GET", "/sessions/\(session)/actions?format=ndjson")
        XCTAssertEqual(export.status, 200)
        XCTAssertEqual(export.text, "", "the export shows none either")
        try act(fixture, session, #"{"type":"add","amount":3}"#)
        XCTAssertEqual(try log(fixture, session).compactMap { $0["number"] as? Int }, [3])
    }

    func testOnlyAdminsListSessions() throws {
        let fixture = try start()
        defer { fixture.stop() }
        var opened: [String] = []
        for _ in 0..<5 { opened.append(try open(fixture)) }
        XCTAssertEqual(try fixture.client.request("GET", "/sessions").status, 401)
        XCTAssertEqual(
            try fixture.client.request("GET", "/sessions", headers: ["Authorization": "Bearer nope"]).status, 403)
        var listed: [String] = []
        var after = ""
        for _ in 0..<10 {
            let page = try fixture.client.request(
                "GET", "/sessions?limit=2&after=\(after)",
                headers: ["Authorization": "Bearer \(ServerFixture.token)"])
            XCTAssertEqual(page.status, 200, page.text)
            let sessions = page.object["sessions"] as? [[String: Any]] ?? []
            listed += sessions.compactMap { $0["session"] as? String }
            XCTAssertTrue(sessions.allSatisfy { $0["reactor"] as? String == "ledger" })
            guard let next = page.object["next"] as? String else { break }
            after = next
        }
        XCTAssertEqual(listed, opened.sorted { $0.utf8.lexicographicallyPrecedes($1.utf8) })
    }

    /// A durable store's: the log and past states are read back after a restart, numbered on.
    func checkTheLogOutlivesARestart() throws {
        var fixture = try ServerFixture { $0.store = try! self.store() }
        let created = try fixture.client.request("POST", "/sessions", body: #"{"reactor":"counter"}"#)
        let session = try XCTUnwrap(created.object["session"] as? String)
        for _ in 0..<3 { XCTAssertEqual(try fixture.send(session, #"{"type":"increase"}"#).status, 200) }
        fixture.stop()
        fixture = try ServerFixture { $0.store = try! self.store() }
        defer { fixture.stop() }
        XCTAssertEqual(try fixture.send(session, #"{"type":"increase"}"#).status, 200)
        let entries =
            try fixture.client.request("GET", "/sessions/\(session)/actions").object["actions"] as? [[String: Any]]
        XCTAssertEqual(
            entries?.compactMap { $0["number"] as? Int }, [1, 2, 3, 4], "numbering goes on after the restart")
        let first = try fixture.client.request("GET", "/sessions/\(session)/states/0")
        XCTAssertEqual((first.object["state"] as? [String: Any])?["count"] as? Int, 0, first.text)
    }
}

/// The same on a SQLite file, and what only a durable store shows: the log outlives a restart.
final class ActionLogSQLiteTests: ActionLogTests {
    private var path: String?

    override func store() throws -> StoreLocation {
        if path == nil { path = try temporaryFile("log.sqlite") }
        return .sqlite(path: path!, sync: .normal)
    }

    func testTheLogAndPastStatesOutliveARestart() throws { try checkTheLogOutlivesARestart() }
}

/// A reactor with an effect that changes the state after its action's answer, the global user
/// merged in, and a field the log must not keep.
private final class LedgerReactor: Reactor {
    enum Action: Decodable, RedactedInActionLog {
        case add(Int)
        case addLater(Int)
        /// A change is sent, from another thread, while its own run still goes on.
        case addDuring(Int)
        case noop
        case login(String)

        static var redactedFields: Set<String> { ["password"] }

        private enum CodingKeys: String, CodingKey { case type, amount, name }

        init(from decoder: any Decoder) throws {
            let container = try decoder.container(keyedBy: CodingKeys.self)
            switch try container.decode(String.self, forKey: .type) {
            case "add": self = .add(try container.decode(Int.self, forKey: .amount))
            case "addLater": self = .addLater(try container.decode(Int.self, forKey: .amount))
            case "addDuring": self = .addDuring(try container.decode(Int.self, forKey: .amount))
            case "noop": self = .noop
            case "login": self = .login(try container.decode(String.self, forKey: .name))
            default:
                throw DecodingError.dataCorruptedError(forKey: .type, in: container, debugDescription: "unknown type")
            }
        }
    }

    enum Mutation {
        case add(Int)
        case setPending(Bool)
        case setUser(String?)
    }

    struct State: Codable {
        var total = 0
        var pending = false
        var user: String?
    }

    let initialState = State()
    private let currentUser: CurrentValueSubject<User?, Never>
    /// Changes from elsewhere (another thread), merged as the user is.
    private let others = PassthroughSubject<Mutation, Never>()

    init(currentUser: CurrentValueSubject<User?, Never>) { self.currentUser = currentUser }

    func mutate(action: Action) -> AnyPublisher<Mutation, Never> {
        switch action {
        case let .add(amount): return .just(.add(amount))
        case let .addLater(amount):
            return .concat(
                .just(.setPending(true)),
                .run { send in
                    try? await Task.sleep(nanoseconds: 2_000_000)
                    await send(.add(amount))
                    await send(.setPending(false))
                })
        case let .addDuring(amount):
            // Sent after its own mutation, while this run still holds the reactor: the change
            // waits for the run to end.
            nonisolated(unsafe) let others = others
            let sendFromAnotherThread = Deferred { () -> Empty<Mutation, Never> in
                let sent = DispatchSemaphore(value: 0)
                Thread.detachNewThread {
                    others.send(.add(amount))
                    sent.signal()
                }
                XCTAssertEqual(sent.wait(timeout: .now() + 10), .success, "the other thread sent its change")
                return Empty()
            }
            return .concat(.just(.setPending(true)), sendFromAnotherThread.eraseToAnyPublisher())
        case .noop, .login: return .empty
        }
    }

    func transform(mutation: AnyPublisher<Mutation, Never>) -> AnyPublisher<Mutation, Never> {
        .merge(
            mutation, currentUser.dropFirst().map { Mutation.setUser($0?.name) }.eraseToAnyPublisher(),
            others.eraseToAnyPublisher())
    }

    func reduce(state: State, mutation: Mutation) -> State {
        var state = state
        switch mutation {
        case let .add(amount): state.total += amount
        case let .setPending(pending): state.pending = pending
        case let .setUser(name): state.user = name
        }
        return state
    }
}

/// The same on a real PostgreSQL (cluster mode, one node): the test run starts the server itself.
final class ActionLogPostgresTests: ActionLogTests {
    private var url: String?

    override func store() throws -> StoreLocation {
        if url == nil {
            let server = try PostgresServer.shared()
            url = try server.createDatabase("action_log")
        }
        return .postgres(url: url!)
    }

    func testTheLogAndPastStatesOutliveARestart() throws { try checkTheLogOutlivesARestart() }
}
