#if canImport(Glibc)
import Glibc
#elseif canImport(Musl)
import Musl
#elseif canImport(Darwin)
import Darwin
#endif

/// A pthread mutex (optionally recursive) with a condition variable. Heap-allocated once
/// so its address never moves; never held while calling out of the library.
final class Lock {
    private let mutex: UnsafeMutablePointer<pthread_mutex_t>
    private var condition: UnsafeMutablePointer<pthread_cond_t>?

    init(recursive: Bool = false) {
        mutex = .allocate(capacity: 1)
        if recursive {
            var attributes = pthread_mutexattr_t()
            pthread_mutexattr_init(&attributes)
            pthread_mutexattr_settype(&attributes, Int32(PTHREAD_MUTEX_RECURSIVE))
            pthread_mutex_init(mutex, &attributes)
            pthread_mutexattr_destroy(&attributes)
        } else {
            pthread_mutex_init(mutex, nil)
        }
    }

    deinit {
        pthread_mutex_destroy(mutex)
        mutex.deallocate()
        if let condition {
            pthread_cond_destroy(condition)
            condition.deallocate()
        }
    }

    @inline(__always) func lock() { pthread_mutex_lock(mutex) }
    @inline(__always) func unlock() { pthread_mutex_unlock(mutex) }

    @inline(__always) func withLock<T>(_ body: () throws -> T) rethrows -> T {
        pthread_mutex_lock(mutex)
        defer { pthread_mutex_unlock(mutex) }
        return try body()
    }

    /// Waits on the condition; call with the lock held. The condition is made on first
    /// use, under the lock, so reactors that are never contended don't pay for it.
    func wait() {
        pthread_cond_wait(conditionVariable(), mutex)
    }

    /// Wakes one waiter; call with the lock held.
    func signal() {
        if let condition { pthread_cond_signal(condition) }
    }

    /// Wakes every waiter; call with the lock held.
    func broadcast() {
        if let condition { pthread_cond_broadcast(condition) }
    }

    private func conditionVariable() -> UnsafeMutablePointer<pthread_cond_t> {
        if let condition { return condition }
        let made = UnsafeMutablePointer<pthread_cond_t>.allocate(capacity: 1)
        pthread_cond_init(made, nil)
        condition = made
        return made
    }
}
