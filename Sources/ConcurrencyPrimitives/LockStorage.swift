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
    @inlinable
    static func make(_ value: Value) -> LockStorage {
        let made = unsafeDowncast(create(minimumCapacity: 1) { _ in value }, to: LockStorage.self)
        made.withUnsafeMutablePointerToElements { _ = pthread_mutex_init($0, nil) }
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
