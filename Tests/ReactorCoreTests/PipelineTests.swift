import ReactorCore
import XCTest

final class PipelineTests: XCTestCase {
    /// Semantics 2: ReactorKit's documented pulse cases.
    func testPulseDocumentedCases() {
        let reactor = CounterReactor(currentUser: CurrentValueSubject(nil))
        var received: [String?] = []
        let cancellable = reactor.pulse(\.$alertMessage).sink { received.append($0) }
        reactor.action.send(.alert("Hello"))  // Hello
        reactor.action.send(.alert("Hello"))  // Hello again: equal value, new assignment
        reactor.action.send(.doSomeAction)  // nothing
        reactor.action.send(.alert("Hello"))  // Hello
        reactor.action.send(.alert("tokijh"))  // tokijh
        reactor.action.send(.doSomeAction)  // nothing
        XCTAssertEqual(received, ["Hello", "Hello", "Hello", "tokijh"])
        cancellable.cancel()
    }

    func testPulseIgnoresOtherMutations() {
        let reactor = CounterReactor(currentUser: CurrentValueSubject(nil))
        var received: [String?] = []
        let cancellable = reactor.pulse(\.$alertMessage).sink { received.append($0) }
        reactor.action.send(.alert("a"))
        reactor.action.send(.increase)
        reactor.action.send(.increase)
        reactor.currentUser.send("kim")
        XCTAssertEqual(received, ["a"])
        // A later subscriber gets the last assigned value, as in ReactorKit.
        var late: [String?] = []
        let lateCancellable = reactor.pulse(\.$alertMessage).sink { late.append($0) }
        XCTAssertEqual(late, ["a"])
        cancellable.cancel()
        lateCancellable.cancel()
    }

    /// Semantics 3: every stage, in ReactorKit's order.
    func testPipelineOrder() {
        let reactor = StageReactor()
        var states: [[String]] = []
        let cancellable = reactor.state.sink { states.append($0) }
        reactor.action.send(["action"])
        XCTAssertEqual(
            states,
            [
                ["transformedState"],
                ["action", "transformedAction", "mutation", "transformedMutation", "reduce", "transformedState"],
            ])
        XCTAssertEqual(reactor.currentState, states.last)
        cancellable.cancel()
    }

    /// A transform(state:) that watches its argument and hands it back unchanged: both its
    /// own subscriber and `reactor.state` see every state (the unchanged stream is not
    /// subscribed through a sink, so the argument must still be fed).
    func testTransformStateThatWatchesItsArgument() {
        final class WatchingReactor: Reactor {
            typealias Action = Int
            typealias Mutation = Int
            typealias State = Int
            let initialState = 0
            var watched: [Int] = []
            var watching: AnyCancellable?
            func reduce(state: Int, mutation: Int) -> Int { state + mutation }
            func transform(state: AnyPublisher<Int, Never>) -> AnyPublisher<Int, Never> {
                watching = state.sink { [unowned self] in watched.append($0) }
                return state
            }
        }
        let reactor = WatchingReactor()
        var states: [Int] = []
        let cancellable = reactor.state.sink { states.append($0) }
        reactor.action.send(1)
        reactor.action.send(2)
        XCTAssertEqual(states, [0, 1, 3])
        XCTAssertEqual(reactor.watched, [0, 1, 3])
        XCTAssertEqual(reactor.currentState, 3)
        cancellable.cancel()
    }

    /// transform(state:) keeps its argument and hands it back; a view subscribes to the kept
    /// stream after `reactor.state`: as in ReactorKit, it comes after the main chain, which
    /// has set currentState by then.
    func testAWatcherOfTheKeptArgumentThatSubscribesLaterComesAfterTheStateStream() {
        final class KeepingReactor: Reactor {
            typealias Action = Int
            typealias Mutation = Int
            typealias State = Int
            let initialState = 0
            var reduced: AnyPublisher<Int, Never>?
            func reduce(state: Int, mutation: Int) -> Int { state + mutation }
            func transform(state: AnyPublisher<Int, Never>) -> AnyPublisher<Int, Never> {
                reduced = state
                return state
            }
        }
        let reactor = KeepingReactor()
        var log: [String] = []
        let main = reactor.state.sink { log.append("state \($0)") }
        let view = reactor.reduced!.sink { [unowned reactor] in
            log.append("reduced \($0) current \(reactor.currentState)")
        }
        log = []
        reactor.action.send(1)
        XCTAssertEqual(log, ["state 1", "reduced 1 current 1"])
        main.cancel()
        view.cancel()
    }

    func testActionBuildsTheStateStream() {
        let reactor = StageReactor()
        reactor.action.send(["action"])
        XCTAssertEqual(
            reactor.currentState,
            ["action", "transformedAction", "mutation", "transformedMutation", "reduce", "transformedState"])
    }

    /// Semantics 3: a new subscriber gets the current state at once (replay(1)).
    func testStateReplaysCurrentState() {
        let reactor = CounterReactor(currentUser: CurrentValueSubject(nil))
        var first: [Int] = []
        let a = reactor.state.sink { first.append($0.count) }
        reactor.action.send(.increase)
        reactor.action.send(.increase)
        a.cancel()
        reactor.action.send(.increase)
        XCTAssertEqual(first, [0, 1, 2])
        var latest: [Int] = []
        let b = reactor.state.sink { latest.append($0.count) }
        XCTAssertEqual(latest, [3])
        reactor.action.send(.increase)
        XCTAssertEqual(latest, [3, 4])
        b.cancel()
    }

    func testSendReturnsAfterStateIsDelivered() {
        let reactor = CounterReactor(currentUser: CurrentValueSubject(nil))
        var delivered = 0
        let cancellable = reactor.state.sink { delivered = $0.count }
        for expected in 1...100 {
            reactor.action.send(.increase)
            XCTAssertEqual(reactor.currentState.count, expected)
            XCTAssertEqual(delivered, expected)
        }
        cancellable.cancel()
    }

    func testLimitedDemandGetsLatestWhenItAsks() {
        let reactor = CounterReactor(currentUser: CurrentValueSubject(nil))
        final class Limited: Subscriber {
            var values: [Int] = []
            var subscription: Subscription?
            func receive(subscription: Subscription) {
                self.subscription = subscription
                subscription.request(.max(1))
            }
            func receive(_ input: CounterReactor.State) -> Subscribers.Demand {
                values.append(input.count)
                return .none
            }
            func receive(completion: Subscribers.Completion<Never>) {}
        }
        let subscriber = Limited()
        reactor.state.subscribe(subscriber)
        XCTAssertEqual(subscriber.values, [0])
        reactor.action.send(.increase)
        reactor.action.send(.increase)
        XCTAssertEqual(subscriber.values, [0])
        subscriber.subscription?.request(.max(1))
        XCTAssertEqual(subscriber.values, [0, 2])
        subscriber.subscription?.cancel()
    }

    func testDefaultsMutateIsActionWhenMutationIsAction() {
        final class Echo: Reactor {
            typealias Action = Int
            typealias State = Int
            let initialState = 0
            func reduce(state: Int, mutation: Int) -> Int { state + mutation }
        }
        let reactor = Echo()
        reactor.action.send(5)
        reactor.action.send(7)
        XCTAssertEqual(reactor.currentState, 12)
    }

    func testDefaultsDoNothing() {
        final class Idle: Reactor {
            enum Action { case tap }
            enum Mutation { case never }
            typealias State = Int
            let initialState = 42
        }
        let reactor = Idle()
        reactor.action.send(.tap)
        XCTAssertEqual(reactor.currentState, 42)
    }

    func testActionSubjectIgnoresCompletion() {
        final class Counter: Reactor {
            typealias Action = Void
            typealias State = Int
            let initialState = 0
            func reduce(state: Int, mutation: Void) -> Int { state + 1 }
        }
        let reactor = Counter()
        let source1 = ActionSubject<Void>()
        let source2 = PassthroughSubject<Void, Never>()
        var states: [Int] = []
        let bag = [
            source1.subscribe(reactor.action),
            source2.subscribe(reactor.action),
            reactor.state.sink { states.append($0) },
        ]
        source1.send(())
        source1.send(completion: .finished)
        source2.send(())
        source2.send(completion: .finished)
        source1.send(())
        reactor.action.send(())
        XCTAssertEqual(states, [0, 1, 2, 3, 4])
        _ = bag
    }

    func testActionIsStable() {
        let reactor = CounterReactor(currentUser: CurrentValueSubject(nil))
        XCTAssertTrue(reactor.action === reactor.action)
    }

    func testGenericSubclassSharesItsPipeline() {
        class Parent<T>: Reactor {
            enum Action { case foo }
            typealias Mutation = Void
            typealias State = Int
            let initialState = 0
            func mutate(action: Action) -> AnyPublisher<Void, Never> { .just(()) }
            func reduce(state: Int, mutation: Void) -> Int { state + 1 }
        }
        final class Child: Parent<String> {}
        let reactor = Child()
        let asParent: Parent<String> = reactor
        XCTAssertTrue(reactor.action === asParent.action)
        reactor.action.send(.foo)
        asParent.action.send(.foo)
        XCTAssertEqual(reactor.currentState, 2)
        XCTAssertEqual(asParent.currentState, 2)
    }
}
