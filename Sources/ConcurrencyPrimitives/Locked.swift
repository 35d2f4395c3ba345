/// A value behind a mutex: reached only inside `withLock`, so it is `Sendable` exactly when
/// the value is (a class holding a `Locked<[String: Int]>` and `let`s needs no `@unchecked`).
/// Copies share the same value and mutex.
package struct Locked<Value> {
    @usableFromInline
    let storage: LockStorage<Value>

    @inlinable
    package init(_ value: Value) { storage = .make(value) }

    /// Runs `body` with the lock held, on the value in place.
    @inlinable
    package func withLock<Result>(_ body: (inout Value) throws -> Result) rethrows -> Result {
        storage.lock()
        defer { storage.unlock() }
        return try storage.withUnsafeMutablePointerToHeader { try body(&$0.pointee) }
    }

    /// A copy of the value, read under the lock.
    @inlinable
    package var current: Value { withLock { $0 } }
}

// why: the value is reached only with the mutex held; Sendable only when the value is.
extension Locked: @unchecked Sendable where Value: Sendable {}
