import Foundation
import XCTest

@testable import ReactorCore

/// Effects whose values are known at once take the short way to `reduce` (issue 26, item 1):
/// every kind still arrives whole and in order, one effect subscriber serves them all, and
/// whatever comes from elsewhere takes the general way.
final class SynchronousEffectTests: XCTestCase {
    final class KindsReactor: Reactor {
        enum Action { case just, empty, combineJust, combineEmpty, sequence, concat, merge, later(Int) }
        typealias Mutation = Int
        struct State { var log: [Int] = [] }

        let initialState = State()

        func mutate(action: Action) -> AnyPublisher<Int, Never> {
            switch action {
            case .just: return .just(1)
            case .empty: return .empty
            case .combineJust: return Just(2).eraseToAnyPublisher()
            case .combineEmpty: return Empty().eraseToAnyPublisher()
            case .sequence: return [3, 4].publisher.eraseToAnyPublisher()
            case .concat:
                return .concat(.just(5), .empty, [6, 7].publisher.eraseToAnyPublisher(), Just(8).eraseToAnyPublisher())
            case .merge: return .merge(.just(9), .empty, .just(10))
            case let .later(value): return Later(value: value).eraseToAnyPublisher()
            }
        }

        func reduce(state: State, mutation: Int) -> State {
            var state = state
            state.log.append(mutation)
            return state
        }
    }

    /// Hands a `.just` the subscriber it was given later, from another thread: the effect's
    /// value arrives after its `mutate` returned.
    struct Later: Publisher {
        typealias Output = Int
        typealias Failure = Never
        let value: Int

        func receive<S: Subscriber>(subscriber: S) where S.Input == Int, S.Failure == Never {
            let value = self.value
            DispatchQueue.global().asyncAfter(deadline: .now() + 0.02) {
                AnyPublisher<Int, Never>.just(value).receive(subscriber: subscriber)
            }
        }
    }

    func testEveryKindOfSynchronousEffectArrivesInOrder() {
        let reactor = KindsReactor()
        let round: [KindsReactor.Action] = [.just, .empty, .combineJust, .combineEmpty, .sequence, .concat, .merge]
        for _ in 0..<3 {
            for action in round { reactor.action.send(action) }
        }
        let once = [1, 2, 3, 4, 5, 6, 7, 8, 9, 10]
        XCTAssertEqual(reactor.currentState.log, once + once + once)
    }

    func testOneEffectSubscriberServesEverySynchronousAction() {
        let reactor = KindsReactor()
        reactor.action.send(.just)
        let before = EffectSubscriberCount.total
        for _ in 0..<1_000 { reactor.action.send(.just) }
        for _ in 0..<100 { reactor.action.send(.empty) }
        for _ in 0..<100 { reactor.action.send(.combineJust) }
        // Other tests may run meanwhile and make their own: a margin, far below one per action.
        XCTAssertLessThan(EffectSubscriberCount.total - before, 50)
        XCTAssertEqual(reactor.currentState.log.count, 1 + 1_000 + 100)
    }

    /// A `.just` that arrives after its `mutate` returned, on another thread, is reduced once,
    /// under the gate, while the synchronous actions sent meanwhile go on with their own
    /// subscriber (the first one is still held by the late effect, so it is not reused).
    func testAJustHandedOverLaterFromAnotherThreadArrivesOnce() {
        let reactor = KindsReactor()
        let arrived = expectation(description: "the late value")
        let cancellable = reactor.state.sink { state in
            if state.log.contains(100) { arrived.fulfill() }
        }
        reactor.action.send(.later(100))
        for _ in 0..<50 { reactor.action.send(.just) }
        wait(for: [arrived], timeout: 5)
        reactor.action.send(.later(200))
        let log = reactor.currentState.log
        XCTAssertEqual(log.filter { $0 == 100 }.count, 1)
        XCTAssertEqual(log.filter { $0 == 1 }.count, 50)
        cancellable.cancel()
    }
}
