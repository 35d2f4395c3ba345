#if canImport(Glibc)
import Glibc
#elseif canImport(Musl)
import Musl
#elseif canImport(Darwin)
import Darwin
#endif

/// A pthread condition variable, waited on with a `Mutex` or a `Locked` value's lock. Timed
/// waits run on the monotonic clock where the platform lets a condition choose its clock
/// (Linux), so a change of the wall clock does not lengthen or cut them.
package final class Condition: @unchecked Sendable {  // why: the pthread condition is the synchronisation
    @usableFromInline
    let condition: UnsafeMutablePointer<pthread_cond_t>

    package init() {
        condition = .allocate(capacity: 1)
        #if os(Linux)
        var attributes = pthread_condattr_t()
        pthread_condattr_init(&attributes)
        pthread_condattr_setclock(&attributes, CLOCK_MONOTONIC)
        pthread_cond_init(condition, &attributes)
        pthread_condattr_destroy(&attributes)
        #else
        pthread_cond_init(condition, nil)
        #endif
    }

    deinit {
        pthread_cond_destroy(condition)
        condition.deallocate()
    }

    /// A point in time on the condition's clock, for waits that must end by it.
    package struct Deadline: Sendable {
        @usableFromInline
        var time: timespec

        /// `seconds` from now.
        package static func after(seconds: Double) -> Deadline {
            var now = timespec()
            #if os(Linux)
            clock_gettime(CLOCK_MONOTONIC, &now)
            #else
            clock_gettime(CLOCK_REALTIME, &now)
            #endif
            let whole = seconds.rounded(.down)
            let nanoseconds = Int(now.tv_nsec) + Int((seconds - whole) * 1e9)
            now.tv_sec += Int(whole) + nanoseconds / 1_000_000_000
            now.tv_nsec = nanoseconds % 1_000_000_000
            return Deadline(time: now)
        }
    }

    /// Waits for a signal: call with `mutex` held; returns with it held again. May wake without
    /// a signal, so wait in a loop on what is awaited.
    package func wait(on mutex: Mutex) {
        mutex.storage.withUnsafeMutablePointerToElements { _ = pthread_cond_wait(condition, $0) }
    }

    /// `wait(on:)` until `deadline` at the latest; false when the time ran out.
    package func wait(on mutex: Mutex, until deadline: Deadline) -> Bool {
        wait(on: mutex.storage, until: deadline)
    }

    /// `wait(on:)` for at most `seconds`; false when the time ran out.
    package func wait(on mutex: Mutex, seconds: Double) -> Bool {
        wait(on: mutex.storage, until: .after(seconds: seconds))
    }

    /// Wakes one waiter.
    package func signal() { pthread_cond_signal(condition) }

    /// Wakes every waiter.
    package func broadcast() { pthread_cond_broadcast(condition) }

    func wait<Value>(on storage: LockStorage<Value>) {
        storage.withUnsafeMutablePointerToElements { _ = pthread_cond_wait(condition, $0) }
    }

    func wait<Value>(on storage: LockStorage<Value>, until deadline: Deadline) -> Bool {
        var time = deadline.time
        return storage.withUnsafeMutablePointerToElements { pthread_cond_timedwait(condition, $0, &time) } != ETIMEDOUT
    }
}

extension Locked {
    /// Takes the lock, waits on `condition` (the lock released meanwhile) until `ready` holds
    /// for the value, or `deadline` has passed, then runs `body` with the lock held. `body`
    /// sees whether the value is ready (false: the time ran out first). The waits happen
    /// between accesses to the value, never inside one.
    package func withLock<Result>(
        waitingOn condition: Condition, until ready: (Value) -> Bool, deadline: Condition.Deadline? = nil,
        _ body: (inout Value, _ ready: Bool) throws -> Result
    ) rethrows -> Result {
        storage.lock()
        defer { storage.unlock() }
        var isReady = storage.withUnsafeMutablePointerToHeader { ready($0.pointee) }
        while !isReady {
            if let deadline {
                if !condition.wait(on: storage, until: deadline) {
                    isReady = storage.withUnsafeMutablePointerToHeader { ready($0.pointee) }
                    break
                }
            } else {
                condition.wait(on: storage)
            }
            isReady = storage.withUnsafeMutablePointerToHeader { ready($0.pointee) }
        }
        return try storage.withUnsafeMutablePointerToHeader { try body(&$0.pointee, isReady) }
    }
}
