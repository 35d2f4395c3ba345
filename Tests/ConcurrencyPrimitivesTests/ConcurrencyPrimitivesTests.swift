import ConcurrencyPrimitives
import XCTest

/// The package's mutex, lock box, condition and threads, on threads of their own (run under
/// ThreadSanitizer too: scripts/test).
final class ConcurrencyPrimitivesTests: XCTestCase {
    func testLockedCountsEveryIncrementFromManyThreads() throws {
        let counter = Locked(0)
        let done = Locked(0)
        let finished = Condition()
        let threads = 4
        let increments = 10_000
        for _ in 0..<threads {
            try PlatformThread.detached {
                for _ in 0..<increments { counter.withLock { $0 += 1 } }
                done.withLock { $0 += 1 }
                finished.broadcast()
            }
        }
        let all = done.withLock(
            waitingOn: finished, until: { $0 == threads },
            deadline: .after(seconds: 30)
        ) { _, ready in ready }
        XCTAssertTrue(all)
        XCTAssertEqual(counter.current, threads * increments)
    }

    /// A class that is not Sendable, made inside the box: only `withLock` reaches it.
    private final class Tally {
        var count = 0
    }

    /// At most `capacity` places taken: one more is refused until one is given back; many
    /// threads taking and giving back leave none taken.
    func testPlacesAreRefusedPastTheCapacityUntilOneIsGivenBack() throws {
        let places = Places(capacity: 2)
        XCTAssertTrue(places.take())
        XCTAssertTrue(places.take())
        XCTAssertFalse(places.take())
        places.giveBack()
        XCTAssertTrue(places.take())
        XCTAssertFalse(places.take())
        places.giveBack(2)
        XCTAssertEqual(places.taken, 0)
        let done = Locked(0)
        let finished = Condition()
        for _ in 0..<4 {
            try PlatformThread.detached {
                for _ in 0..<1_000 where places.take() { places.giveBack() }
                done.withLock { $0 += 1 }
                finished.broadcast()
            }
        }
        let all = done.withLock(waitingOn: finished, until: { $0 == 4 }, deadline: .after(seconds: 30)) { _, ready in
            ready
        }
        XCTAssertTrue(all)
        XCTAssertEqual(places.taken, 0)
    }

    func testGuardedHoldsANonSendableObjectForManyThreads() throws {
        let tally = Guarded(Tally())
        let threads = 4
        let increments = 10_000
        var started: [PlatformThread] = []
        for _ in 0..<threads {
            started.append(
                try PlatformThread.joinable {
                    for _ in 0..<increments { tally.withLock { $0.count += 1 } }
                })
        }
        for thread in started { thread.join() }
        XCTAssertEqual(tally.withLock { $0.count }, threads * increments)
    }

    /// Objects made outside the box go in whole (`moving`), from many threads, and are then its own.
    func testGuardedTakesObjectsMovedInFromManyThreads() throws {
        let tallies = Guarded([Tally]())
        let threads = 4
        let moves = 1_000
        var started: [PlatformThread] = []
        for _ in 0..<threads {
            started.append(
                try PlatformThread.joinable {
                    for _ in 0..<moves {
                        let made = Tally()
                        made.count = 1
                        tallies.withLock(moving: made) { tallies, made in tallies.append(made) }
                    }
                })
        }
        for thread in started { thread.join() }
        XCTAssertEqual(tallies.withLock { $0.reduce(0) { $0 + $1.count } }, threads * moves)
    }

    func testMutexOrdersAJoinedThreadsWrites() throws {
        let mutex = Mutex()
        let log = Locked<[Int]>([])
        mutex.lock()
        let thread = try PlatformThread.joinable {
            mutex.withLock { log.withLock { $0.append(2) } }
        }
        log.withLock { $0.append(1) }
        mutex.unlock()
        thread.join()
        XCTAssertEqual(log.current, [1, 2])
    }

    func testRecursiveMutexIsTakenAgainByItsHolderAndFreedByTheLastUnlock() throws {
        let mutex = Mutex(recursive: true)
        let log = Locked<[Int]>([])
        mutex.lock()
        mutex.withLock { mutex.withLock { log.withLock { $0.append(1) } } }  // would deadlock if not recursive
        mutex.lock()
        let thread = try PlatformThread.joinable {
            mutex.withLock { log.withLock { $0.append(3) } }
        }
        mutex.unlock()  // still held once: the thread waits
        log.withLock { $0.append(2) }
        mutex.unlock()
        thread.join()
        XCTAssertEqual(log.current, [1, 2, 3])
    }

    func testTimedWaitEndsWhenTheTimeRunsOut() {
        let mutex = Mutex()
        let condition = Condition()
        let start = ContinuousClock.now
        let signalled = mutex.withLock { condition.wait(on: mutex, seconds: 0.05) }
        XCTAssertFalse(signalled)
        XCTAssertGreaterThanOrEqual(ContinuousClock.now - start, .milliseconds(45))
    }

    func testWaitForAValueEndsAtTheSignalThatMakesItReady() throws {
        let flag = Locked(false)
        let changed = Condition()
        try PlatformThread.detached {
            flag.withLock { $0 = true }
            changed.signal()
        }
        let ready = flag.withLock(waitingOn: changed, until: { $0 }, deadline: .after(seconds: 30)) { value, ready in
            value && ready
        }
        XCTAssertTrue(ready)
    }

    func testWaitForAValueReportsTheDeadline() {
        let flag = Locked(false)
        let ready = flag.withLock(waitingOn: Condition(), until: { $0 }, deadline: .after(seconds: 0.02)) { _, ready in
            ready
        }
        XCTAssertFalse(ready)
    }
}
