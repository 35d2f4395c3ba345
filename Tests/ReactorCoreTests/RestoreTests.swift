import XCTest

@testable import ReactorCore

/// `Reactor.restore(_:)`: a reactor brought back from a store starts from the stored state,
/// runs no effect for it, and still merges the global stream.
final class RestoreTests: XCTestCase {
    func testARestoredReactorStartsFromTheGivenState() {
        let user = CurrentValueSubject<String?, Never>("kim")
        let reactor = CounterReactor(currentUser: user)
        var stored = CounterReactor.State()
        stored.count = 41
        stored.alertMessage = "stored"
        XCTAssertTrue(reactor.restore(stored))

        var counts: [Int] = []
        var pulses: [String?] = []
        let states = reactor.state.sink { counts.append($0.count) }
        let alerts = reactor.pulse(\.$alertMessage).sink { pulses.append($0) }
        XCTAssertEqual(reactor.currentState.count, 41)
        XCTAssertEqual(reactor.currentState.alertMessage, "stored")
        XCTAssertEqual(reactor.currentState.user, "kim", "the global stream is merged as for a new reactor")
        reactor.action.send(.increase)
        XCTAssertEqual(reactor.currentState.count, 42)
        XCTAssertEqual(counts.first, 41)
        XCTAssertEqual(counts.last, 42)
        XCTAssertEqual(pulses, ["stored"], "the stored value is the current pulse, emitted once to a subscriber")
        states.cancel()
        alerts.cancel()
    }

    func testRestoreAfterFirstUseChangesNothing() {
        let reactor = CounterReactor(currentUser: CurrentValueSubject(nil))
        reactor.action.send(.increase)
        var stored = CounterReactor.State()
        stored.count = 100
        XCTAssertFalse(reactor.restore(stored))
        XCTAssertEqual(reactor.currentState.count, 1)
    }
}
