/// A value behind a mutex that is `Sendable` whatever the value, in the way of the standard
/// library's `Synchronization.Mutex` (which needs macOS 15): the value goes in as `sending`, and is
/// reached only inside `withLock`, whose body gets it as `inout sending`. So the compiler rejects a
/// body that stores in it what the caller can still reach (a parameter, a captured object); what
/// goes in must be made inside the body, be `Sendable`, or be handed over whole with
/// `withLock(moving:)`. Results must be `Sendable`: `Mutex`'s `sending` result would let a body
/// return a part of the value, which Swift 6.3 does not reject (swiftlang/swift#81274). Use it for
/// state that holds non-`Sendable` objects of its own (a class that only its holder reaches);
/// `Locked` for `Sendable` values. Copies share the same value and mutex.
// why: the value moves in and out only as `sending`, and is reached only under the mutex.
package struct Guarded<Value>: @unchecked Sendable {
    @usableFromInline
    let storage: LockStorage<Value>

    @inlinable
    package init(_ value: sending Value) { storage = .make(value) }

    /// Runs `body` with the lock held, on the value in place.
    @inlinable
    package func withLock<Result: Sendable>(_ body: (inout sending Value) throws -> Result) rethrows -> Result {
        storage.lock()
        defer { storage.unlock() }
        // The region checks end here (a pointer made from an address is in no region): the value
        // is the storage's alone, and the mutex is held.
        let address = storage.withUnsafeMutablePointerToHeader { UInt(bitPattern: $0) }
        let value = UnsafeMutablePointer<Value>(bitPattern: address).unsafelyUnwrapped
        return try body(&value.pointee)  // `self` keeps the storage alive meanwhile
    }

    /// Runs `body` with the lock held, on the value in place, handing it `moved` as its own: what
    /// `body` may put into the value from outside (a captured one would still be the caller's).
    @inlinable
    package func withLock<Moved, Result: Sendable>(
        moving moved: sending Moved, _ body: (inout sending Value, sending Moved) throws -> Result
    ) rethrows -> Result {
        storage.lock()
        defer { storage.unlock() }
        let address = storage.withUnsafeMutablePointerToHeader { UInt(bitPattern: $0) }
        let value = UnsafeMutablePointer<Value>(bitPattern: address).unsafelyUnwrapped
        return try body(&value.pointee, moved)
    }
}
