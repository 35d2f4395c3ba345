import ConcurrencyPrimitives
import XCTest

/// The pool of threads for blocking work: a job does not wait behind blocked ones while the
/// pool may grow, idle threads end, and a stopped pool refuses work.
final class WorkerPoolTests: XCTestCase {
    /// `count` jobs that each block until all of them run at once: only with a thread each.
    func testBlockedJobsDoNotHoldUpTheOthers() throws {
        let count = 8
        let running = Locked(0)
        let changed = Condition()
        let threads = Locked(0)
        let pool = try WorkerPool<@Sendable () -> Void>(maxThreads: count) { next in
            threads.withLock { $0 += 1 }
            while let job = next() { job() }
        }
        defer { pool.stop() }
        for _ in 0..<count {
            XCTAssertTrue(
                pool.submit {
                    running.withLock { $0 += 1 }
                    changed.broadcast()
                    // Blocks until every job runs (or 10 s): the blocking work the pool is for.
                    _ = running.withLock(waitingOn: changed, until: { $0 >= count }, deadline: .after(seconds: 10)) {
                        _, ready in ready
                    }
                })
        }
        let all = running.withLock(waitingOn: changed, until: { $0 == count }, deadline: .after(seconds: 10)) {
            _, ready in ready
        }
        XCTAssertTrue(all, "\(running.current) of \(count) jobs ran at once")
        XCTAssertEqual(threads.current, count)
    }

    func testIdleThreadsEndAndAStoppedPoolRefusesWork() throws {
        let live = Locked(0)
        let changed = Condition()
        let pool = try WorkerPool<@Sendable () -> Void>(maxThreads: 4, threads: 2, idleTimeout: 0.2) { next in
            live.withLock { $0 += 1 }
            while let job = next() { job() }
            live.withLock { $0 -= 1 }
            changed.broadcast()
        }
        let ended = live.withLock(waitingOn: changed, until: { $0 == 0 }, deadline: .after(seconds: 10)) { _, ready in
            ready
        }
        XCTAssertTrue(ended, "idle threads end")
        let ran = Locked(false)
        XCTAssertTrue(pool.submit { ran.withLock { $0 = true } })
        let started = live.withLock(waitingOn: changed, until: { _ in ran.current }, deadline: .after(seconds: 10)) {
            _, ready in ready
        }
        XCTAssertTrue(started, "a job after they ended gets a thread")
        pool.stop()
        XCTAssertFalse(pool.submit {})
    }
}
