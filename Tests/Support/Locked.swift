import Foundation

/// A value a test shares with the threads it starts.
public final class Locked<Value>: @unchecked Sendable {
    private let lock = NSLock()
    private var stored: Value

    public init(_ value: Value) { stored = value }

    /// A copy; change it through `update`, in one locked step.
    public var value: Value { lock.withLock { stored } }

    @discardableResult
    public func update<T>(_ body: (inout Value) -> T) -> T { lock.withLock { body(&stored) } }
}
