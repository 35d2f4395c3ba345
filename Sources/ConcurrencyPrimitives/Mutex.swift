/// A pthread mutex, callable from any thread (libmicrohttpd's, a store's writer, a task's)
/// without Foundation, whose ICU data alone is 34 MB of a static binary. Copies share the same
/// mutex. Guard state with `Locked` where the state can move into it; use this where the lock
/// orders something else (a write(2), a C handle's calls).
package struct Mutex: @unchecked Sendable {  // why: the pthread mutex is the synchronisation
    @usableFromInline
    let storage: LockStorage<Void>

    /// `recursive`: the thread that holds the mutex may take it again, for a lock that guards
    /// calls which can come back on the same thread (a subscriber delivering from inside a
    /// delivery); it then releases it as often as it took it.
    @inlinable
    package init(recursive: Bool = false) { storage = .make((), recursive: recursive) }

    /// Takes the lock, waiting for it.
    @inlinable
    package func lock() { storage.lock() }

    /// Releases the lock; call from the thread that holds it.
    @inlinable
    package func unlock() { storage.unlock() }

    /// Runs `body` with the lock held and returns its result.
    @inlinable
    package func withLock<Result>(_ body: () throws -> Result) rethrows -> Result {
        storage.lock()
        defer { storage.unlock() }
        return try body()
    }
}
