import ReactorCore
import XCTest

/// Semantics 5 (ReactorKit #260): an action sent from inside the pipeline is queued and
/// runs after the current one, in order, never re-entered.
final class ReentrancyTests: XCTestCase {
    func testActionFromStateSubscriberRunsAfterCurrentOne() {
        let reactor = LogReactor()
        var sentB = false
        let cancellable = reactor.state.sink { state in
            if !sentB && state.log.contains("enter A") {
                sentB = true
                reactor.action.send(.b)
                // Queued, not run inside this delivery.
                XCTAssertEqual(reactor.currentState.log, ["enter A"])
            }
        }
        reactor.action.send(.a)
        XCTAssertEqual(reactor.currentState.log, ["enter A", "exit A", "enter B", "exit B"])
        cancellable.cancel()
    }

    func testActionFromReduceDoesNotRecurse() {
        let reactor = LogReactor()
        reactor.onEnterA = { $0.action.send(.b) }
        reactor.action.send(.a)
        XCTAssertEqual(reactor.currentState.log, ["enter A", "exit A", "enter B", "exit B"])
    }

    func testSeveralQueuedActionsKeepTheirOrder() {
        final class Recorder: Reactor {
            typealias Action = Int
            typealias State = [Int]
            let initialState: [Int] = []
            func reduce(state: [Int], mutation: Int) -> [Int] { state + [mutation] }
        }
        let reactor = Recorder()
        var fired = false
        let cancellable = reactor.state.sink { state in
            if state == [0], !fired {
                fired = true
                for i in 1...5 { reactor.action.send(i) }
            }
        }
        reactor.action.send(0)
        XCTAssertEqual(reactor.currentState, [0, 1, 2, 3, 4, 5])
        cancellable.cancel()
    }

    func testActionFromMutateIsQueued() {
        final class Chain: Reactor {
            enum Action { case start, follow }
            typealias Mutation = String
            typealias State = [String]
            let initialState: [String] = []
            func mutate(action: Action) -> AnyPublisher<String, Never> {
                switch action {
                case .start:
                    self.action.send(.follow)
                    return .concat(.just("start 1"), .just("start 2"))
                case .follow:
                    return .just("follow")
                }
            }
            func reduce(state: [String], mutation: String) -> [String] { state + [mutation] }
        }
        let reactor = Chain()
        reactor.action.send(.start)
        XCTAssertEqual(reactor.currentState, ["start 1", "start 2", "follow"])
    }

    func testGlobalSendFromStateSubscriberIsQueued() {
        let user = CurrentValueSubject<String?, Never>(nil)
        let reactor = CounterReactor(currentUser: user)
        var seen: [(Int, String?)] = []
        let cancellable = reactor.state.sink { state in
            seen.append((state.count, state.user))
            if state.count == 1 && state.user == nil { user.send("kim") }
        }
        reactor.action.send(.increase)
        XCTAssertEqual(seen.map(\.0), [0, 1, 1])
        XCTAssertEqual(seen.map(\.1), [nil, nil, "kim"])
        cancellable.cancel()
    }

    func testAMergedStreamSentToFromReduceWaitsForTheCurrentReduce() {
        final class Tagger: Reactor {
            enum Action { case go }
            enum Mutation { case go, tag(String) }
            struct State { var log: [String] = [], tag = "none" }
            let initialState = State()
            let bus = PassthroughSubject<String, Never>()
            var depth = 0, deepest = 0
            func mutate(action: Action) -> AnyPublisher<Mutation, Never> { .just(.go) }
            func transform(mutation: AnyPublisher<Mutation, Never>) -> AnyPublisher<Mutation, Never> {
                .merge(mutation, bus.map(Mutation.tag).eraseToAnyPublisher())
            }
            func reduce(state: State, mutation: Mutation) -> State {
                depth += 1
                deepest = max(deepest, depth)
                defer { depth -= 1 }
                var state = state
                switch mutation {
                case .go:
                    bus.send("from reduce")
                    state.log.append("go")
                case let .tag(tag):
                    state.tag = tag
                    state.log.append("tag")
                }
                return state
            }
        }
        let reactor = Tagger()
        var seen: [[String]] = []
        let cancellable = reactor.state.sink { seen.append($0.log) }
        reactor.action.send(.go)
        XCTAssertEqual(reactor.deepest, 1, "reduce ran inside itself")
        XCTAssertEqual(reactor.currentState.tag, "from reduce", "the merged value was lost")
        XCTAssertEqual(seen, [[], ["go"], ["go", "tag"]])
        cancellable.cancel()
    }
}
