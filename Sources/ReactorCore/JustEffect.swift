/// What `.just(value)` returns: OpenCombine's `Just` to any subscriber, except a reactor's
/// own effect subscriber, which takes the value and the end at once. That is the effect of
/// most actions, and a subscription object for it would cost an allocation and two runtime
/// metadata lookups per action.
@usableFromInline
struct JustEffect<Output>: Publisher {
    @usableFromInline typealias Failure = Never

    @usableFromInline let output: Output

    @inlinable init(_ output: Output) { self.output = output }

    @usableFromInline
    func receive<S: Subscriber>(subscriber: S) where S.Input == Output, S.Failure == Never {
        if let target = subscriber as? ImmediateEffectTarget {
            withUnsafePointer(to: output) { target.receiveAtOnce(UnsafeRawPointer($0)) }
        } else {
            Just(output).receive(subscriber: subscriber)
        }
    }
}

/// An effect subscriber seen without its generic type (a cast to a generic class would cost
/// a metadata lookup). Only `EffectSubscriber<Output>` is one, and `JustEffect` meets it only
/// as a subscriber of its own `Output`, so `value` points to that type.
class ImmediateEffectTarget {
    /// One value and then the end, as `Just` delivers them through a subscription.
    func receiveAtOnce(_ value: UnsafeRawPointer) {}
}
