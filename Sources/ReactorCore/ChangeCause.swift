/// Which request a change of state comes from, as an opaque number its sender chooses (0: none).
///
/// A thread sets it around a call that may change reactors (`action.send`, a change of the
/// global user); every mutation that call leads to carries it to `reduce` and the state
/// subscribers, even when it runs on another thread: an effect keeps the cause of the action
/// that started it for its later values, and work a gate queues for its holder keeps the cause
/// of the thread that queued it. A state subscriber reads `current` while it receives a state.
/// States that an operator after the gate delivers on another thread (`receive(on:)`,
/// `debounce` in `transform(state:)`) come with no cause.
package enum ChangeCause {
    /// The calling thread's cause.
    package static var current: UInt64 { ThreadContext.current.cause }

    /// Runs `body` with `cause` as the calling thread's cause.
    @inline(__always)
    package static func with<T>(_ cause: UInt64, _ body: () throws -> T) rethrows -> T {
        let context = ThreadContext.current
        let saved = context.cause
        context.cause = cause
        defer { context.cause = saved }
        return try body()
    }
}
