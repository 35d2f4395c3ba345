#if canImport(Glibc)
import Glibc
#elseif canImport(Musl)
import Musl
#elseif canImport(Darwin)
import Darwin
#endif

/// A pthread mutex (optionally recursive), stored inside the object itself (a
/// `ManagedBuffer` tail) so it costs one allocation and one cache line, not two, and
/// never moves. Never held while calling out of the library. Shared with the server's
/// modules as SPI (`@_spi(Lock) import ReactorCore`), not part of the reactor API.
@_spi(Lock) public final class Lock: ManagedBuffer<Lock.Header, pthread_mutex_t> {
    /// The lock's bookkeeping, stored before the mutex.
    public struct Header {
        /// Made on first wait, under the lock: an uncontended reactor never pays for it.
        var condition: UnsafeMutablePointer<pthread_cond_t>?
    }

    /// A new lock; `recursive` lets the thread that holds it take it again.
    public static func make(recursive: Bool = false) -> Lock {
        let made = unsafeDowncast(Lock.create(minimumCapacity: 1) { _ in Header() }, to: Lock.self)
        made.withUnsafeMutablePointerToElements { mutex in
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
        return made
    }

    deinit {
        withUnsafeMutablePointers { header, mutex in
            pthread_mutex_destroy(mutex)
            if let condition = header.pointee.condition {
                pthread_cond_destroy(condition)
                condition.deallocate()
            }
        }
    }

    /// Takes the lock, waiting for it.
    @inline(__always) public func lock() {
        withUnsafeMutablePointerToElements { _ = pthread_mutex_lock($0) }
    }

    /// Releases the lock; call from the thread that holds it.
    @inline(__always) public func unlock() {
        withUnsafeMutablePointerToElements { _ = pthread_mutex_unlock($0) }
    }

    /// Runs `body` with the lock held and returns its result.
    @inline(__always) public func withLock<T>(_ body: () throws -> T) rethrows -> T {
        lock()
        defer { unlock() }
        return try body()
    }

    /// Waits on the condition; call with the lock held.
    func wait() {
        withUnsafeMutablePointers { header, mutex in
            if header.pointee.condition == nil {
                let made = UnsafeMutablePointer<pthread_cond_t>.allocate(capacity: 1)
                pthread_cond_init(made, nil)
                header.pointee.condition = made
            }
            _ = pthread_cond_wait(header.pointee.condition!, mutex)
        }
    }

    /// Wakes one waiter; call with the lock held.
    func signal() {
        if let condition = header.condition { pthread_cond_signal(condition) }
    }

    /// Wakes every waiter; call with the lock held.
    func broadcast() {
        if let condition = header.condition { pthread_cond_broadcast(condition) }
    }
}
