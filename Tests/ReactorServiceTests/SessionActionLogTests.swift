import ReactorStore
import XCTest

@testable import ReactorService

/// Which entry the action log gives each version, whatever the order its changes come in.
final class SessionActionLogTests: XCTestCase {
    private let source = ActionSource(json: ArraySlice(#"{"type":"addLater"}"#.utf8), subject: nil, idempotencyKey: nil)

    private func makeLog() -> SessionActionLog {
        SessionActionLog(
            settings: ActionLogSettings(length: 100, age: 3_600, keepsEntries: true),
            session: SessionKey(high: 0x1234_5678_9ABC_DEF0, low: 1), lastNumber: 0)
    }

    private func spans(_ log: SessionActionLog) -> [String] {
        log.entries.map { entry in
            "\(entry.number) \(entry.cause.rawValue)\(entry.origin.map { " of \($0)" } ?? "") "
                + "\(entry.firstVersion.map { "\($0)..." } ?? "")\(entry.version)"
        }
    }

    func testAnActionsEffectThatCameDuringItsRunIsInItsVersions() {
        let log = makeLog()
        let cause = log.begin()
        log.record(first: 1, last: 1, cause: cause)
        log.record(first: 2, last: 2, cause: cause)
        log.end(source, version: 2, redacting: [])
        XCTAssertEqual(spans(log), ["1 action 1...2"])
    }

    /// An earlier action's effect (or the user) changed the state between the action's own change
    /// and its effect's: the action's entry stops before that version, its effect has its own.
    func testAVersionInBetweenEndsTheActionsVersions() {
        let log = makeLog()
        let first = log.begin()
        log.end(source, version: 0, redacting: [])
        let second = log.begin()
        log.record(first: 1, last: 1, cause: second)
        log.record(first: 2, last: 2, cause: first)
        log.record(first: 3, last: 3, cause: SessionActionLog.userCause)
        log.record(first: 4, last: 5, cause: second)
        log.end(source, version: 5, redacting: [])
        XCTAssertEqual(
            spans(log), ["1 action 0", "2 action 1...1", "3 effect of 1 2...2", "4 user 3...3", "5 effect of 2 4...5"])
    }

    func testAnEntryBeforeTheActionsFirstChangeLeavesItsVersionsWhole() {
        let log = makeLog()
        let first = log.begin()
        log.end(source, version: 0, redacting: [])
        let second = log.begin()
        log.record(first: 1, last: 1, cause: first)
        log.record(first: 2, last: 2, cause: second)
        log.record(first: 3, last: 3, cause: second)
        log.end(source, version: 3, redacting: [])
        XCTAssertEqual(spans(log), ["1 action 0", "2 action 2...3", "3 effect of 1 1...1"])
    }
}
