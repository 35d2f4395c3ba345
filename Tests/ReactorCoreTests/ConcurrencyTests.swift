import Foundation
import ReactorCore
import XCTest

/// Semantics 6: one gate per reactor; safe from any thread. Run under
/// `swift test --sanitize=thread` too.
final class ConcurrencyTests: XCTestCase {
    func testEightThreadsTimesTenThousandIncrements() {
        for _ in 0..<3 {
            let reactor = CounterReactor(currentUser: CurrentValueSubject(nil))
            var delivered: [Int] = []
            let cancellable = reactor.state.sink { delivered.append($0.count) }  // under the gate
            DispatchQueue.concurrentPerform(iterations: 8) { _ in
                for _ in 0..<10_000 { reactor.action.send(.increase) }
            }
            XCTAssertEqual(reactor.currentState.count, 80_000)
            // Every state was delivered once, in order: reduce never ran concurrently.
            XCTAssertEqual(delivered.count, 80_001)
            XCTAssertEqual(delivered, Array(0...80_000))
            cancellable.cancel()
        }
    }

    func testSendFromAnotherThreadReturnsAfterItsState() {
        let reactor = CounterReactor(currentUser: CurrentValueSubject(nil))
        DispatchQueue.concurrentPerform(iterations: 4) { _ in
            for _ in 0..<2_000 {
                let before = reactor.currentState.count
                reactor.action.send(.increase)
                XCTAssertGreaterThan(reactor.currentState.count, before)
            }
        }
        XCTAssertEqual(reactor.currentState.count, 8_000)
    }

    /// currentUser.send on thread B while thread A processes actions of the same reactor.
    func testGlobalSendWhileActionsAreProcessed() {
        let user = CurrentValueSubject<String?, Never>("u0")
        let reactors = (0..<4).map { _ in CounterReactor(currentUser: user) }
        let users = reactors.map { _ in Locked<[String?]>([]) }
        let cancellables = reactors.enumerated().map { index, reactor in
            reactor.state.sink { state in users[index].update { $0.append(state.user) } }
        }
        let group = DispatchGroup()
        for reactor in reactors {
            DispatchQueue.global().async(group: group) {
                for _ in 0..<5_000 { reactor.action.send(.increase) }
            }
        }
        DispatchQueue.global().async(group: group) {
            for i in 1...500 { user.send("u\(i)") }
        }
        group.wait()
        for (index, reactor) in reactors.enumerated() {
            XCTAssertEqual(reactor.currentState.count, 5_000)
            XCTAssertEqual(reactor.currentState.user, "u500")
            // The users each reactor saw are in the order they were sent, none lost.
            var distinct: [String?] = []
            for user in users[index].value where distinct.last != user { distinct.append(user) }
            XCTAssertEqual(distinct, (0...500).map { "u\($0)" })
        }
        _ = cancellables
    }

    /// A subscriber of one reactor sending to another while that one's subscriber sends
    /// back: the nested sends are queued, not waited for, so this never deadlocks.
    func testCrossReactorSendsFromSubscribersDoNotDeadlock() {
        let a = CounterReactor(currentUser: CurrentValueSubject(nil))
        let b = CounterReactor(currentUser: CurrentValueSubject(nil))
        let ca = a.state.sink { if $0.count % 10 == 5 { b.action.send(.doSomeAction) } }
        let cb = b.state.sink { if $0.count % 10 == 5 { a.action.send(.doSomeAction) } }
        let group = DispatchGroup()
        DispatchQueue.global().async(group: group) { for _ in 0..<3_000 { a.action.send(.increase) } }
        DispatchQueue.global().async(group: group) { for _ in 0..<3_000 { b.action.send(.increase) } }
        XCTAssertEqual(group.wait(timeout: .now() + 30), .success)
        XCTAssertEqual(a.currentState.count, 3_000)
        XCTAssertEqual(b.currentState.count, 3_000)
        ca.cancel()
        cb.cancel()
    }

    func testConcurrentSubscribersEachSeeOrderedStates() {
        let reactor = CounterReactor(currentUser: CurrentValueSubject(nil))
        let failures = Locked(0)
        let group = DispatchGroup()
        DispatchQueue.global().async(group: group) {
            for _ in 0..<5_000 { reactor.action.send(.increase) }
        }
        DispatchQueue.global().async(group: group) {
            for _ in 0..<200 {
                // Locked: a delivery under way on the sending thread may end after cancel() returns.
                let seen = Locked<[Int]>([])
                let cancellable = reactor.state.sink { state in seen.update { $0.append(state.count) } }
                cancellable.cancel()
                let states = seen.value
                if states.isEmpty || states != states.sorted() { failures.update { $0 += 1 } }
            }
        }
        group.wait()
        XCTAssertEqual(failures.value, 0)
    }
}
