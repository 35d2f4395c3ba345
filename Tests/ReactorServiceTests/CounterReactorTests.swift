import Examples
import ReactorCore
import XCTest

/// The bundled counter stays up at the edge of its range: a trap in `reduce` would stop the
/// server and every session with it (a stored session can hold any count).
final class CounterReactorTests: XCTestCase {
    func testTheCountStaysAtIntsBounds() {
        let reactor = CounterReactor(currentUser: CurrentValueSubject(nil))
        var state = reactor.initialState
        state.count = .max
        XCTAssertEqual(reactor.reduce(state: state, mutation: .increase).count, .max)
        XCTAssertEqual(reactor.reduce(state: state, mutation: .decrease).count, .max - 1)
        state.count = .min
        XCTAssertEqual(reactor.reduce(state: state, mutation: .decrease).count, .min)
        XCTAssertEqual(reactor.reduce(state: state, mutation: .increase).count, .min + 1)
    }
}
