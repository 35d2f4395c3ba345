import ReactorCore
import XCTest

/// Semantics 8: the stub.
final class StubTests: XCTestCase {
    func testStubRecordsActionsAndNeverMutates() {
        let user = CurrentValueSubject<String?, Never>("jay")
        let reactor = CounterReactor(currentUser: user)
        reactor.isStubEnabled = true
        XCTAssertTrue(reactor.isStubEnabled)
        XCTAssertTrue(reactor.action === reactor.stub.action)
        reactor.action.send(.increase)
        reactor.action.send(.alert("x"))
        reactor.action.send(.increase)
        XCTAssertEqual(reactor.stub.actions, [.increase, .alert("x"), .increase])
        XCTAssertEqual(reactor.currentState.count, 0)
        XCTAssertNil(reactor.currentState.user)  // transform(mutation:) never ran
    }

    func testStubStateSetsStateAndCurrentState() {
        let reactor = CounterReactor(currentUser: CurrentValueSubject(nil))
        reactor.isStubEnabled = true
        var counts: [Int] = []
        let cancellable = reactor.state.sink { counts.append($0.count) }
        reactor.stub.state.send(CounterReactor.State(count: 3))
        XCTAssertEqual(reactor.currentState.count, 3)
        reactor.stub.state.value = CounterReactor.State(count: -10)
        XCTAssertEqual(reactor.currentState.count, -10)
        XCTAssertEqual(counts, [0, 3, -10])
        cancellable.cancel()
    }

    func testStubPulse() {
        let reactor = CounterReactor(currentUser: CurrentValueSubject(nil))
        reactor.isStubEnabled = true
        var alerts: [String?] = []
        let cancellable = reactor.pulse(\.$alertMessage).sink { alerts.append($0) }
        var state = reactor.currentState
        state.alertMessage = "Hi"
        reactor.stub.state.send(state)
        reactor.stub.state.send(state)  // same count: no new pulse
        state.alertMessage = "Hi"
        reactor.stub.state.send(state)
        XCTAssertEqual(alerts, ["Hi", "Hi"])
        cancellable.cancel()
    }

    func testDisablingTheStubRestoresThePipeline() {
        let reactor = CounterReactor(currentUser: CurrentValueSubject(nil))
        reactor.stub.isEnabled = true
        reactor.action.send(.increase)
        reactor.isStubEnabled = false
        XCTAssertEqual(reactor.currentState.count, 0)
        reactor.action.send(.increase)
        XCTAssertEqual(reactor.currentState.count, 1)
        XCTAssertEqual(reactor.stub.actions, [.increase])
    }
}
