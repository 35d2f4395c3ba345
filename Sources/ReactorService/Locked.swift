import ReactorCore

/// A value behind a lock: the one place the service's small shared states are guarded.
final class Locked<Value>: @unchecked Sendable {
    private let lock = Lock.make()
    private var value: Value

    init(_ value: Value) { self.value = value }

    func withLock<Result>(_ body: (inout Value) throws -> Result) rethrows -> Result {
        lock.lock()
        defer { lock.unlock() }
        return try body(&value)
    }

    var current: Value { withLock { $0 } }
}
