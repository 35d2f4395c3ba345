#if canImport(Glibc)
import Glibc
#elseif canImport(Musl)
import Musl
#elseif canImport(Darwin)
import Darwin
#endif

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
            justThroughSubscription(output, subscriber)
        }
    }
}

/// What `.empty` returns: OpenCombine's `Empty` to any subscriber, except a reactor's own
/// effect subscriber, which is told the end at once (no subscription object).
@usableFromInline
struct EmptyEffect<Output>: Publisher {
    @usableFromInline typealias Failure = Never

    @inlinable init() {}

    @usableFromInline
    func receive<S: Subscriber>(subscriber: S) where S.Input == Output, S.Failure == Never {
        if let target = subscriber as? ImmediateEffectTarget {
            target.finishAtOnce()
        } else {
            emptyThroughSubscription(subscriber)
        }
    }
}

// The fallbacks in functions of their own: inlined, their generic types' metadata was looked up
// on every call of the fast path too.
@inline(never)
private func justThroughSubscription<S: Subscriber>(_ output: S.Input, _ subscriber: S) where S.Failure == Never {
    Just(output).receive(subscriber: subscriber)
}

@inline(never)
private func emptyThroughSubscription<S: Subscriber>(_ subscriber: S) where S.Failure == Never {
    Empty(completeImmediately: true).receive(subscriber: subscriber)
}

/// An effect subscriber seen without its generic type (a cast to a generic class would cost
/// a metadata lookup). Only `EffectSubscriber<Output>` is one, and `JustEffect` meets it only
/// as a subscriber of its own `Output`, so `value` points to that type.
class ImmediateEffectTarget {
    // An effect subscriber's state that its stage reads on every action, here in the
    // non-generic base (guarded by the stage's lock).
    /// The effect has ended.
    @exclusivity(unchecked) var finished = false
    /// Entered in the stage's list of running effects.
    @exclusivity(unchecked) var tracked = false
    /// The thread running the `mutate` that returned this effect, while it runs.
    @exclusivity(unchecked) var window: pthread_t?
    /// The cause of the action whose `mutate` returned this effect (`ChangeCause`).
    @exclusivity(unchecked) var cause: UInt64 = 0

    /// One value and then the end, as `Just` delivers them through a subscription.
    func receiveAtOnce(_ value: UnsafeRawPointer) {}
    /// The end with no value, as `Empty` delivers it.
    func finishAtOnce() {}
}
