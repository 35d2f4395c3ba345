#if canImport(Glibc)
import Glibc
#elseif canImport(Musl)
import Musl
#elseif canImport(Darwin)
import Darwin
#endif

/// A value and the pthread mutex that guards it, in one allocation (the mutex in a
/// `ManagedBuffer`'s tail, so it never moves): what `Mutex` and `Locked` are made of. Not
/// `Sendable` itself (no `ManagedBuffer` is): `Mutex` and `Locked` say when they are.
@usableFromInline
final class LockStorage<Value>: ManagedBuffer<Value, pthread_mutex_t> {
    /// `recursive`: the thread that holds the mutex may take it again (and must release it as
    /// often as it took it).
    @inlinable
    static func make(_ value: Value, recursive: Bool = false) -> LockStorage {
        let made = unsafeDowncast(create(minimumCapacity: 1) { _ in value }, to: LockStorage.self)
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

    @inlinable
    deinit {
        // The header (the value) is destroyed by ManagedBuffer; the mutex is ours.
        withUnsafeMutablePointerToElements { _ = pthread_mutex_destroy($0) }
    }

    @inlinable
    func lock() {
        withUnsafeMutablePointerToElements { _ = pthread_mutex_lock($0) }
    }

    @inlinable
    func unlock() {
        withUnsafeMutablePointerToElements { _ = pthread_mutex_unlock($0) }
    }
}
