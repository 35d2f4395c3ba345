import Foundation
import ReactorCore
import XCTest

/// A subscriber that records everything and asks for demand explicitly.
final class Recorder<Value>: Subscriber, @unchecked Sendable {
    typealias Input = Value
    typealias Failure = Never
    private let lock = NSLock()
    private var _values: [Value] = []
    private var _finished = false
    private var subscription: Subscription?
    private let initial: Subscribers.Demand

    init(demand: Subscribers.Demand = .unlimited) { initial = demand }

    var values: [Value] { lock.withLock { _values } }
    var finished: Bool { lock.withLock { _finished } }

    func receive(subscription: Subscription) {
        lock.withLock { self.subscription = subscription }
        if initial > 0 { subscription.request(initial) }
    }
    func receive(_ input: Value) -> Subscribers.Demand {
        lock.withLock { _values.append(input) }
        return .none
    }
    func receive(completion: Subscribers.Completion<Never>) { lock.withLock { _finished = true } }
    func request(_ demand: Subscribers.Demand) { lock.withLock { subscription }?.request(demand) }
    func cancel() { lock.withLock { subscription }?.cancel() }
}

final class OperatorTests: XCTestCase {
    func testJustAndEmpty() {
        let just = Recorder<Int>()
        AnyPublisher<Int, Never>.just(3).subscribe(just)
        XCTAssertEqual(just.values, [3])
        XCTAssertTrue(just.finished)
        let empty = Recorder<Int>()
        AnyPublisher<Int, Never>.empty.subscribe(empty)
        XCTAssertEqual(empty.values, [])
        XCTAssertTrue(empty.finished)
    }

    func testMergeKeepsArrivalOrderAndFinishesWhenAllFinish() {
        let a = PassthroughSubject<Int, Never>()
        let b = PassthroughSubject<Int, Never>()
        let recorder = Recorder<Int>()
        AnyPublisher.merge(a.eraseToAnyPublisher(), b.eraseToAnyPublisher()).subscribe(recorder)
        a.send(1)
        b.send(2)
        a.send(3)
        a.send(completion: .finished)
        XCTAssertFalse(recorder.finished)
        b.send(4)
        b.send(completion: .finished)
        XCTAssertEqual(recorder.values, [1, 2, 3, 4])
        XCTAssertTrue(recorder.finished)
    }

    func testMergeOfSynchronousPublishers() {
        let recorder = Recorder<Int>()
        AnyPublisher.merge([.just(1), .empty, .just(2), [3, 4].publisher.eraseToAnyPublisher()]).subscribe(recorder)
        XCTAssertEqual(recorder.values, [1, 2, 3, 4])
        XCTAssertTrue(recorder.finished)
        let none = Recorder<Int>()
        AnyPublisher<Int, Never>.merge([]).subscribe(none)
        XCTAssertTrue(none.finished)
    }

    func testMergeHonoursDemand() {
        let recorder = Recorder<Int>(demand: .max(2))
        AnyPublisher.merge([1, 2, 3].publisher.eraseToAnyPublisher(), [10, 20].publisher.eraseToAnyPublisher())
            .subscribe(recorder)
        XCTAssertEqual(recorder.values.count, 2)
        XCTAssertFalse(recorder.finished)
        recorder.request(.max(1))
        XCTAssertEqual(recorder.values.count, 3)
        recorder.request(.unlimited)
        XCTAssertEqual(recorder.values.sorted(), [1, 2, 3, 10, 20])
        XCTAssertTrue(recorder.finished)
    }

    func testMergeCancellationCancelsEveryUpstream() {
        var cancels = 0
        let a = PassthroughSubject<Int, Never>()
        let b = PassthroughSubject<Int, Never>()
        let recorder = Recorder<Int>()
        AnyPublisher.merge(
            a.handleEvents(receiveCancel: { cancels += 1 }).eraseToAnyPublisher(),
            b.handleEvents(receiveCancel: { cancels += 1 }).eraseToAnyPublisher()
        )
        .subscribe(recorder)
        a.send(1)
        recorder.cancel()
        a.send(2)
        b.send(3)
        XCTAssertEqual(cancels, 2)
        XCTAssertEqual(recorder.values, [1])
    }

    func testMergeFromManyThreadsDeliversEverythingSerially() {
        let subjects = (0..<4).map { _ in PassthroughSubject<Int, Never>() }
        let inside = Locked(0)
        let overlapped = Locked(false)
        var total = 0
        let cancellable = AnyPublisher.merge(subjects.map { $0.eraseToAnyPublisher() }).sink { _ in
            inside.update {
                if $0 > 0 { overlapped.update { $0 = true } }
                $0 += 1
            }
            total += 1
            inside.update { $0 -= 1 }
        }
        DispatchQueue.concurrentPerform(iterations: 4) { index in
            for i in 0..<5_000 { subjects[index].send(i) }
        }
        XCTAssertEqual(total, 20_000)
        XCTAssertFalse(overlapped.value)
        cancellable.cancel()
    }

    func testConcatRunsInTurn() {
        let a = PassthroughSubject<Int, Never>()
        let b = PassthroughSubject<Int, Never>()
        let recorder = Recorder<Int>()
        AnyPublisher.concat(.just(0), a.eraseToAnyPublisher(), b.eraseToAnyPublisher(), .just(9)).subscribe(recorder)
        b.send(-1)  // not subscribed yet
        a.send(1)
        a.send(2)
        a.send(completion: .finished)
        b.send(3)
        XCTAssertFalse(recorder.finished)
        b.send(completion: .finished)
        XCTAssertEqual(recorder.values, [0, 1, 2, 3, 9])
        XCTAssertTrue(recorder.finished)
    }

    func testConcatCarriesDemandOver() {
        let recorder = Recorder<Int>(demand: .max(3))
        AnyPublisher.concat([1, 2].publisher.eraseToAnyPublisher(), [3, 4].publisher.eraseToAnyPublisher())
            .subscribe(recorder)
        XCTAssertEqual(recorder.values, [1, 2, 3])
        XCTAssertFalse(recorder.finished)
        recorder.request(.max(5))
        XCTAssertEqual(recorder.values, [1, 2, 3, 4])
        XCTAssertTrue(recorder.finished)
    }

    func testConcatOfManySynchronousPublishersDoesNotRecurse() {
        let recorder = Recorder<Int>()
        AnyPublisher.concat((0..<50_000).map { AnyPublisher<Int, Never>.just($0) }).subscribe(recorder)
        XCTAssertEqual(recorder.values.count, 50_000)
        XCTAssertEqual(recorder.values.last, 49_999)
        XCTAssertTrue(recorder.finished)
    }

    func testConcatCancellation() {
        var cancelled = false
        let a = PassthroughSubject<Int, Never>()
        let recorder = Recorder<Int>()
        AnyPublisher.concat(a.handleEvents(receiveCancel: { cancelled = true }).eraseToAnyPublisher(), .just(5))
            .subscribe(recorder)
        a.send(1)
        recorder.cancel()
        a.send(2)
        a.send(completion: .finished)
        XCTAssertTrue(cancelled)
        XCTAssertEqual(recorder.values, [1])
        XCTAssertFalse(recorder.finished)
    }

    func testRunEmitsThenFinishes() {
        let recorder = Recorder<Int>()
        AnyPublisher<Int, Never>.run { send in
            for i in 1...3 { await send(i) }
        }.subscribe(recorder)
        let start = Date()
        while !recorder.finished && Date().timeIntervalSince(start) < 5 { usleep(1_000) }
        XCTAssertEqual(recorder.values, [1, 2, 3])
        XCTAssertTrue(recorder.finished)
    }

    func testRunHonoursDemand() {
        let recorder = Recorder<Int>(demand: .max(1))
        AnyPublisher<Int, Never>.run { send in
            for i in 1...3 { await send(i) }
        }.subscribe(recorder)
        usleep(100_000)
        XCTAssertEqual(recorder.values, [1])
        XCTAssertFalse(recorder.finished)
        recorder.request(.unlimited)
        XCTAssertEqual(recorder.values, [1, 2, 3])
        XCTAssertTrue(recorder.finished)
    }
}
