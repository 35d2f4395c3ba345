#if canImport(Glibc)
import Glibc
#elseif canImport(Musl)
import Musl
#elseif canImport(Darwin)
import Darwin
#endif

/// A pthread mutex (optionally recursive) inside the object itself (a `ManagedBuffer` tail):
/// one allocation of 64 bytes. Every session has two locks, and Foundation's `NSLock` and
/// `NSRecursiveLock` on Linux are an `NSObject` plus separately allocated pthread state.
final class InlineMutex: ManagedBuffer<Void, pthread_mutex_t> {
    static func make(recursive: Bool = false) -> InlineMutex {
        let made = unsafeDowncast(InlineMutex.create(minimumCapacity: 1) { _ in () }, to: InlineMutex.self)
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
        _ = withUnsafeMutablePointerToElements { pthread_mutex_destroy($0) }
    }

    @inline(__always) func lock() {
        withUnsafeMutablePointerToElements { _ = pthread_mutex_lock($0) }
    }

    @inline(__always) func unlock() {
        withUnsafeMutablePointerToElements { _ = pthread_mutex_unlock($0) }
    }
}
