import ReactorCore
import XCTest

final class GlobalStateTests: XCTestCase {
    /// Semantics 4.
    func testReactorStartsWithTheCurrentUser() {
        let user = CurrentValueSubject<String?, Never>("jay")
        let reactor = CounterReactor(currentUser: user)
        XCTAssertEqual(reactor.currentState.user, "jay")
        var states: [String?] = []
        let cancellable = reactor.state.sink { states.append($0.user) }
        XCTAssertEqual(states, ["jay"])
        cancellable.cancel()
    }

    func testUserChangeReachesEveryLiveReactor() {
        let user = CurrentValueSubject<String?, Never>("jay")
        let reactors = (0..<50).map { _ in CounterReactor(currentUser: user) }
        for reactor in reactors { XCTAssertEqual(reactor.currentState.user, "jay") }
        reactors[3].action.send(.increase)
        user.send("kim")
        for reactor in reactors { XCTAssertEqual(reactor.currentState.user, "kim") }
        XCTAssertEqual(reactors[3].currentState.count, 1)
    }

    func testMergedStreamThatCompletesDoesNotEndTheStateStream() {
        let user = CurrentValueSubject<String?, Never>("jay")
        let reactor = CounterReactor(currentUser: user)
        var counts: [Int] = []
        var finished = false
        let cancellable = reactor.state.sink(
            receiveCompletion: { _ in finished = true },
            receiveValue: { counts.append($0.count) })
        user.send(completion: .finished)
        reactor.action.send(.increase)
        reactor.action.send(.increase)
        XCTAssertFalse(finished)
        XCTAssertEqual(counts.last, 2)
        XCTAssertEqual(reactor.currentState.user, "jay")
        cancellable.cancel()
    }

    func testMutationStreamThatFailsUpstreamDoesNotEndTheStateStream() {
        enum Boom: Error { case boom }
        final class Failing: Reactor {
            enum Action { case increase }
            enum Mutation { case increase, set(Int) }
            typealias State = Int
            let initialState = 0
            let numbers = PassthroughSubject<Int, Boom>()
            func mutate(action: Action) -> AnyPublisher<Mutation, Never> { .just(.increase) }
            func reduce(state: Int, mutation: Mutation) -> Int {
                switch mutation {
                case .increase: return state + 1
                case let .set(value): return value
                }
            }
            func transform(mutation: AnyPublisher<Mutation, Never>) -> AnyPublisher<Mutation, Never> {
                // A failing global stream must be caught to merge (its Failure is Never);
                // catching it ends that stream only.
                .merge(
                    mutation, numbers.map(Mutation.set).catch { _ in Empty<Mutation, Never>() }.eraseToAnyPublisher())
            }
        }
        let reactor = Failing()
        var finished = false
        let cancellable = reactor.state.sink(receiveCompletion: { _ in finished = true }, receiveValue: { _ in })
        reactor.numbers.send(10)
        reactor.numbers.send(completion: .failure(.boom))
        reactor.action.send(.increase)
        XCTAssertEqual(reactor.currentState, 11)
        XCTAssertFalse(finished)
        cancellable.cancel()
    }

    func testWholeMutationStreamCompletingKeepsTheState() {
        final class Once: Reactor {
            typealias Action = Int
            typealias State = Int
            let initialState = 0
            func reduce(state: Int, mutation: Int) -> Int { state + mutation }
            func transform(mutation: AnyPublisher<Int, Never>) -> AnyPublisher<Int, Never> {
                mutation.prefix(1).eraseToAnyPublisher()
            }
        }
        let reactor = Once()
        var finished = false
        var states: [Int] = []
        let cancellable = reactor.state.sink(
            receiveCompletion: { _ in finished = true },
            receiveValue: { states.append($0) })
        reactor.action.send(5)
        reactor.action.send(7)
        XCTAssertEqual(states, [0, 5])
        XCTAssertFalse(finished)
        var replayed: [Int] = []
        let again = reactor.state.sink { replayed.append($0) }
        XCTAssertEqual(replayed, [5])
        cancellable.cancel()
        again.cancel()
    }
}
