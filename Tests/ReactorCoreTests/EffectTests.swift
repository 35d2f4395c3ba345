import Foundation
import ReactorCore
import XCTest

final class Probe: @unchecked Sendable {
    private let lock = NSLock()
    private var _reduced = 0
    private var _cancelled = false
    var reduced: Int { lock.withLock { _reduced } }
    var cancelled: Bool { lock.withLock { _cancelled } }
    func didReduce() { lock.withLock { _reduced += 1 } }
    func didCancel() { lock.withLock { _cancelled = true } }
}

final class TickReactor: Reactor {
    enum Action { case load, ticks, sleep }
    enum Mutation { case loaded(Int), tick }
    struct State {
        var value = 0
        var ticks = 0
    }
    let initialState = State()
    let probe: Probe

    init(probe: Probe) { self.probe = probe }

    func mutate(action: Action) -> AnyPublisher<Mutation, Never> {
        let probe = self.probe
        switch action {
        case .load:
            return .run { send in
                try? await Task.sleep(nanoseconds: 10_000_000)
                await send(.loaded(42))
            }
        case .ticks:
            return .run { send in
                while !Task.isCancelled {
                    await send(.tick)
                    try? await Task.sleep(nanoseconds: 2_000_000)
                }
                probe.didCancel()
            }
        case .sleep:
            return .run { send in
                do {
                    try await Task.sleep(nanoseconds: 30_000_000_000)
                    await send(.tick)
                } catch {
                    probe.didCancel()
                }
            }
        }
    }

    func reduce(state: State, mutation: Mutation) -> State {
        probe.didReduce()
        var state = state
        switch mutation {
        case let .loaded(value): state.value = value
        case .tick: state.ticks += 1
        }
        return state
    }
}

/// Semantics 7: `.run` effects deliver; releasing the reactor deallocates it, cancels its
/// effects, and nothing is reduced afterwards.
final class EffectTests: XCTestCase {
    func testRunDeliversItsMutations() {
        let reactor = TickReactor(probe: Probe())
        let loaded = expectation(description: "loaded")
        let cancellable = reactor.state.sink { if $0.value == 42 { loaded.fulfill() } }
        reactor.action.send(.load)
        XCTAssertEqual(reactor.currentState.value, 0)  // asynchronous
        wait(for: [loaded], timeout: 5)
        XCTAssertEqual(reactor.currentState.value, 42)
        cancellable.cancel()
    }

    func testReleasedReactorIsDeallocatedWithSubscribers() {
        let probe = Probe()
        var reactor: TickReactor? = TickReactor(probe: probe)
        weak let weakReactor = reactor
        let cancellable = reactor!.state.sink { _ in }
        reactor!.action.send(.load)
        reactor = nil
        XCTAssertNil(weakReactor)
        _ = cancellable
    }

    func testReleaseCancelsRunningEffectsAndNothingIsReducedAfter() {
        let probe = Probe()
        var reactor: TickReactor? = TickReactor(probe: probe)
        weak let weakReactor = reactor
        let subscriberTicks = Locked(0)
        let ticked = expectation(description: "ticked")
        let cancellable = reactor!.state.sink { state in
            subscriberTicks.update { $0 = state.ticks }
            if state.ticks == 3 { ticked.fulfill() }
        }
        reactor!.action.send(.ticks)
        reactor!.action.send(.sleep)
        wait(for: [ticked], timeout: 5)
        reactor = nil
        XCTAssertNil(weakReactor)
        let reducedAtRelease = probe.reduced
        let cancelled = expectation(description: "effects cancelled")
        DispatchQueue.global().async {
            while !probe.cancelled { usleep(1_000) }
            cancelled.fulfill()
        }
        wait(for: [cancelled], timeout: 5)
        usleep(50_000)
        XCTAssertEqual(probe.reduced, reducedAtRelease)
        XCTAssertGreaterThanOrEqual(subscriberTicks.value, 3)
        _ = cancellable
    }

    func testReleasedReactorReducesNoGlobalValue() {
        let probe = Probe()
        let user = CurrentValueSubject<String?, Never>("a")
        final class UserReactor: Reactor {
            typealias Action = Never
            typealias Mutation = String?
            typealias State = String?
            let initialState: String? = nil
            let user: CurrentValueSubject<String?, Never>
            let probe: Probe
            init(user: CurrentValueSubject<String?, Never>, probe: Probe) {
                self.user = user
                self.probe = probe
            }
            func transform(mutation: AnyPublisher<String?, Never>) -> AnyPublisher<String?, Never> {
                .merge(mutation, user.eraseToAnyPublisher())
            }
            func reduce(state: String?, mutation: String?) -> String? {
                probe.didReduce()
                return mutation
            }
        }
        var reactor: UserReactor? = UserReactor(user: user, probe: probe)
        var seen: [String?] = []
        let cancellable = reactor!.state.sink { seen.append($0) }
        XCTAssertEqual(reactor!.currentState, "a")
        weak let weakReactor = reactor
        reactor = nil
        XCTAssertNil(weakReactor)
        let reduced = probe.reduced
        user.send("b")
        user.send("c")
        XCTAssertEqual(probe.reduced, reduced)
        XCTAssertEqual(seen, ["a"])
        cancellable.cancel()
    }

    func testSendAfterCancellationIsDropped() {
        let received = Locked<[Int]>([])
        let gate = DispatchSemaphore(value: 0)
        let done = expectation(description: "task ran on")
        let cancellable = AnyPublisher<Int, Never>.run { send in
            await send(1)
            gate.wait()
            await send(2)  // after cancel: dropped
            done.fulfill()
        }.sink { value in received.update { $0.append(value) } }
        let first = Date()
        while received.value.isEmpty && Date().timeIntervalSince(first) < 5 { usleep(1_000) }
        cancellable.cancel()
        gate.signal()
        wait(for: [done], timeout: 5)
        XCTAssertEqual(received.value, [1])
    }
}

/// A released reactor's whole pipeline is freed once the release watcher has swept it:
/// the action subject going away means the storage, both sinks, the merge and the
/// subscription to the global user (which held them) are gone too.
final class ReleaseTests: XCTestCase {
    private final class SumReactor: Reactor {
        typealias Action = Int
        typealias Mutation = Int
        typealias State = Int
        let initialState = 0
        func reduce(state: Int, mutation: Int) -> Int { state + mutation }
    }

    /// An action subscriber that only its subscription keeps, holding a subscription to the
    /// same reactor's state (a logger, say).
    private final class ActionLogger: Subscriber {
        typealias Input = Int
        typealias Failure = Never
        var stateWatch: AnyCancellable?
        let freed: () -> Void
        init(freed: @escaping () -> Void) { self.freed = freed }
        deinit { freed() }
        func receive(subscription: Subscription) { subscription.request(.unlimited) }
        func receive(_ input: Int) -> Subscribers.Demand { .none }
        func receive(completion: Subscribers.Completion<Never>) {}
    }

    /// The release watcher's teardown lets go of the logger, whose deinit cancels its state
    /// subscription: that must not wait for a lock the teardown holds (the gate's), or the
    /// watcher sweeps nothing again.
    func testTeardownReleasingAnActionSubscriberDoesNotStopTheReleaseWatcher() {
        let freed = DispatchSemaphore(value: 0)
        do {
            let reactor = SumReactor()
            let logger = ActionLogger { freed.signal() }
            logger.stateWatch = reactor.state.sink { _ in }
            reactor.action.subscribe(logger)
            reactor.action.send(1)
        }
        XCTAssertEqual(freed.wait(timeout: .now() + 10), .success, "the logger was never freed")
        weak var weakAction: ActionSubject<Int>?
        do {
            let other = SumReactor()
            weakAction = other.action
            other.action.send(1)
        }
        let start = Date()
        while weakAction != nil && Date().timeIntervalSince(start) < 10 { usleep(10_000) }
        XCTAssertNil(weakAction, "the release watcher sweeps no more")
    }

    /// A state that holds the only subscription of a watcher to the same reactor: replacing it
    /// frees the watcher, whose cancel takes the reactor's gate lock. That must not happen
    /// while the lock is held, or the send never returns.
    func testReplacingAStateThatHoldsASubscriptionToTheSameReactorReturns() {
        final class Watcher { var watch: AnyCancellable? }
        struct Held { var watcher: Watcher? }
        final class HoldingReactor: Reactor {
            typealias Action = Watcher?
            typealias Mutation = Watcher?
            typealias State = Held
            let initialState = Held(watcher: nil)
            func reduce(state: Held, mutation: Watcher?) -> Held { Held(watcher: mutation) }
        }
        let reactor = HoldingReactor()
        var watcher: Watcher? = Watcher()
        watcher?.watch = reactor.state.sink { _ in }
        reactor.action.send(watcher)  // the state now holds the only reference to the watcher
        watcher = nil
        let returned = DispatchSemaphore(value: 0)
        DispatchQueue.global().async {
            reactor.action.send(nil)  // replaces, and so frees, the state holding it
            returned.signal()
        }
        XCTAssertEqual(returned.wait(timeout: .now() + 10), .success, "send never returned")
    }

    func testPipelineIsFreedAfterRelease() {
        let user = CurrentValueSubject<String?, Never>("jay")
        weak var weakReactor: CounterReactor?
        weak var weakAction: ActionSubject<CounterReactor.Action>?
        var states: [Int] = []
        var cancellable: AnyCancellable?
        do {
            let reactor = CounterReactor(currentUser: user)
            weakReactor = reactor
            weakAction = reactor.action
            cancellable = reactor.state.sink { states.append($0.count) }
            reactor.action.send(.increase)
        }
        XCTAssertNil(weakReactor)  // at once
        let start = Date()
        while weakAction != nil && Date().timeIntervalSince(start) < 10 { usleep(10_000) }
        XCTAssertNil(weakAction)  // after the sweep
        user.send("kim")  // reaches nothing
        XCTAssertEqual(states, [0, 1])
        cancellable?.cancel()
    }
}
