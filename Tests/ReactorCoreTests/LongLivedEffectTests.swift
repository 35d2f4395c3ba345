import Foundation
import ReactorCore
import XCTest

/// ReactorKit's stopwatch: a long-lived effect that reads the reactor's own action stream.
final class StopwatchReactor: Reactor {
    enum Action: Equatable { case start, stop }
    typealias Mutation = Int
    typealias State = Int

    let initialState = 0
    let ticks: AnyPublisher<Void, Never>

    init(ticks: AnyPublisher<Void, Never>) { self.ticks = ticks }

    func mutate(action: Action) -> AnyPublisher<Int, Never> {
        switch action {
        case .start:
            let stop = self.action.filter { $0 == .stop }
            return ticks.map { 1 }.prefix(untilOutputFrom: stop).eraseToAnyPublisher()
        case .stop:
            return .empty
        }
    }

    func reduce(state: Int, mutation: Int) -> Int { state + mutation }
}

final class LongLivedEffectTests: XCTestCase {
    func testStopwatchStopsOnItsOwnAction() {
        let ticks = PassthroughSubject<Void, Never>()
        let reactor = StopwatchReactor(ticks: ticks.eraseToAnyPublisher())
        var states: [Int] = []
        let cancellable = reactor.state.sink { states.append($0) }
        reactor.action.send(.start)
        ticks.send(())
        ticks.send(())
        ticks.send(())
        reactor.action.send(.stop)
        ticks.send(())  // stopped: ignored
        reactor.action.send(.start)
        ticks.send(())
        ticks.send(())
        reactor.action.send(.stop)
        ticks.send(())
        XCTAssertEqual(states, [0, 1, 2, 3, 4, 5])
        cancellable.cancel()
    }

    func testTicksFromAnotherThreadAreSerialised() {
        let ticks = PassthroughSubject<Void, Never>()
        let reactor = StopwatchReactor(ticks: ticks.eraseToAnyPublisher())
        reactor.action.send(.start)
        reactor.action.send(.start)  // two effects, both counting
        DispatchQueue.concurrentPerform(iterations: 4) { _ in
            for _ in 0..<2_500 { ticks.send(()) }
        }
        XCTAssertEqual(reactor.currentState, 20_000)
        reactor.action.send(.stop)
        ticks.send(())
        XCTAssertEqual(reactor.currentState, 20_000)
    }

    func testActionStreamMergedInTransformActionIsSerialised() {
        final class Merging: Reactor {
            typealias Action = Int
            typealias State = Int
            let initialState = 0
            let external = PassthroughSubject<Int, Never>()
            func transform(action: AnyPublisher<Int, Never>) -> AnyPublisher<Int, Never> {
                .merge(action, external.eraseToAnyPublisher())
            }
            func reduce(state: Int, mutation: Int) -> Int { state + mutation }
        }
        let reactor = Merging()
        _ = reactor.currentState  // builds the pipeline: subscribes to `external`
        let group = DispatchGroup()
        DispatchQueue.global().async(group: group) {
            for _ in 0..<5_000 { reactor.external.send(1) }
        }
        DispatchQueue.global().async(group: group) {
            for _ in 0..<5_000 { reactor.action.send(1) }
        }
        group.wait()
        XCTAssertEqual(reactor.currentState, 10_000)
    }

    func testAsynchronousTransformStateStillDeliversInOrder() {
        final class Hopping: Reactor {
            typealias Action = Int
            typealias State = Int
            let initialState = 0
            let queue = DispatchQueue(label: "hop")
            func reduce(state: Int, mutation: Int) -> Int { state + mutation }
            func transform(state: AnyPublisher<Int, Never>) -> AnyPublisher<Int, Never> {
                state.flatMap { value in
                    Future<Int, Never> { promise in self.queue.async { promise(.success(value)) } }
                }.eraseToAnyPublisher()
            }
        }
        let reactor = Hopping()
        let seen = Locked<[Int]>([])
        let done = expectation(description: "last state")
        let cancellable = reactor.state.sink { value in
            seen.update { $0.append(value) }
            if value == 100 { done.fulfill() }
        }
        for _ in 0..<100 { reactor.action.send(1) }
        wait(for: [done], timeout: 5)
        XCTAssertEqual(seen.value, Array(0...100))
        XCTAssertEqual(reactor.currentState, 100)
        cancellable.cancel()
    }

    /// The release watcher frees an idle released reactor's pipeline (here: its
    /// subscription to the global user) even though no value ever reaches it.
    func testReleaseWatcherFreesIdlePipelines() {
        let user = CurrentValueSubject<String?, Never>("jay")
        var reactors: [CounterReactor] = (0..<100).map { _ in CounterReactor(currentUser: user) }
        for reactor in reactors { _ = reactor.currentState }
        let registered = ReactorDiagnostics.registeredReactorCount
        XCTAssertGreaterThanOrEqual(registered, 100)
        reactors.removeAll()
        let start = Date()
        while ReactorDiagnostics.registeredReactorCount > registered - 100,
            Date().timeIntervalSince(start) < 10
        {
            usleep(10_000)
        }
        XCTAssertLessThanOrEqual(ReactorDiagnostics.registeredReactorCount, registered - 100)
    }
}
