internal import ConcurrencyPrimitives

#if canImport(Glibc)
import Glibc
#elseif canImport(Musl)
import Musl
#elseif canImport(Darwin)
import Darwin
#endif

/// The `flatMap(mutate)` stage of the pipeline: calls `mutate` for each action, under the
/// gate, and merges the effects it returns. Effects run concurrently (like Rx's
/// `flatMap`); their values enter the gate before going on, so an effect emitting on
/// another thread (a `.run` task) is serialised with everything else.
///
/// It knows which effects are still running, so the release watcher can cancel them
/// promptly when the reactor goes away. An effect that finishes while it is being
/// subscribed (`.just`, `.empty`) is never entered in that list: the common case costs
/// no bookkeeping.
struct MutationFlatMap<Action, Mutation>: Publisher {
    typealias Output = Mutation
    typealias Failure = Never

    let upstream: AnyPublisher<Action, Never>
    let gate: SerialGate
    let owner: MutationStageOwner<Action, Mutation>

    func receive<S: Subscriber>(subscriber: S) where S.Input == Mutation, S.Failure == Never {
        let subscription = MutationFlatMapSubscription(self, downstream: subscriber)
        subscriber.receive(subscription: subscription)
        upstream.subscribe(subscription)
    }
}

/// What the stage needs of its reactor's storage: one reference rather than three closures
/// (their contexts, and a weak reference's side table, cost every reactor ~180 bytes).
/// Held strongly, like the pipeline's sinks hold the storage: the cycle ends at teardown.
class MutationStageOwner<Action, Mutation>: AnyReactorStorage {
    /// Calls the reactor's `mutate` and subscribes `subscriber` to the effect it returns;
    /// false when the reactor is gone.
    func mutate(_ action: Action, into subscriber: EffectSubscriber<Mutation>) -> Bool { false }
    /// The reactor went away: the pipeline tears itself down.
    func reactorGone() {}
    /// Effects outlived the call to `mutate`: the release watcher should know of them.
    func effectsRunning(_ tracker: EffectTracking) {}
}

/// The running-effects question the release watcher asks.
protocol EffectTracking: AnyObject {
    var hasRunningEffects: Bool { get }
}

/// What an effect subscriber needs of its stage. Generic over the mutation only: the
/// subscriber's type is part of the runtime metadata key of every effect's subscription
/// (`Just.Inner<Subscriber>`, ...), and short keys are cheaper to look up.
class EffectParent<Mutation> {
    /// Guards the stage's state and that of its effect subscribers: the gate's own lock.
    let lock: Mutex
    let gate: SerialGate

    init(gate: SerialGate) {
        self.gate = gate
        lock = gate.mutex
    }

    func deliver(_ mutation: Mutation) {}
    func deliverAtOnce(_ value: UnsafeRawPointer, from subscriber: EffectSubscriber<Mutation>) -> Bool { false }
    func effectFinished(_ subscriber: EffectSubscriber<Mutation>) {}
}

final class MutationFlatMapSubscription<Action, Mutation, Downstream: Subscriber>: EffectParent<Mutation>, Subscription,
    Subscriber, GateWork, EffectTracking
where Downstream.Input == Mutation, Downstream.Failure == Never {
    typealias Input = Action
    typealias Failure = Never

    private let stage: MutationFlatMap<Action, Mutation>
    // Guarded by `lock`.
    @exclusivity(unchecked) private var downstream: Box<Downstream>?
    @exclusivity(unchecked) private var upstream: Subscription?
    @exclusivity(unchecked) private var running: [ObjectIdentifier: EffectSubscriber<Mutation>] = [:]
    @exclusivity(unchecked) private var demand = Subscribers.Demand.none
    @exclusivity(unchecked) private var buffer: [Mutation] = []
    /// `!buffer.isEmpty`, kept apart: asking the array costs its metadata in unspecialised code.
    @exclusivity(unchecked) private var hasBuffered = false
    @exclusivity(unchecked) private var upstreamFinished = false
    @exclusivity(unchecked) private var cancelled = false
    @exclusivity(unchecked) var queuedInGate = 0
    /// The effect subscriber of the last action, free for the next one.
    /// Typed as the base class: the generic type would cost a metadata lookup per action.
    @exclusivity(unchecked) private var spare: ImmediateEffectTarget?

    init(_ stage: MutationFlatMap<Action, Mutation>, downstream: Downstream) {
        self.stage = stage
        self.downstream = Box(downstream)
        super.init(gate: stage.gate)
    }

    var hasRunningEffects: Bool {
        lock.lock()
        defer { lock.unlock() }
        return !running.isEmpty
    }

    // MARK: Upstream: actions

    func receive(subscription: Subscription) {
        lock.lock()
        let accepted = upstream == nil && !cancelled
        if accepted { upstream = subscription }
        lock.unlock()
        if accepted { subscription.request(.unlimited) } else { subscription.cancel() }
    }

    func receive(_ action: Action) -> Subscribers.Demand {
        stage.gate.dispatch(self, action)
        return .none
    }

    func receive(completion: Subscribers.Completion<Never>) {
        lock.lock()
        upstreamFinished = true
        lock.unlock()
        finishIfDone()
    }

    // MARK: Under the gate

    /// Calls `mutate` and subscribes to the effect it returns.
    ///
    /// The subscriber is reused from the action before when that effect let go of it (a `.just`
    /// or `.empty` never holds it; a finished `Just` or sequence has released it by then): no
    /// allocation per action. While `mutate` runs, the subscriber's window is open for this
    /// thread, and a `.just` handed over inside it goes straight downstream (`deliverAtOnce`).
    func perform(_ action: Action) {
        let thread = pthread_self()
        lock.lock()
        guard !cancelled else {
            lock.unlock()
            return
        }
        var target: ImmediateEffectTarget
        if let reused = spare {
            spare = nil
            target = reused
            target.finished = false
        } else {
            target = EffectSubscriber<Mutation>(parent: self)
        }
        target.window = thread
        target.cause = ThreadContext.current.cause
        lock.unlock()
        guard stage.owner.mutate(action, into: unsafeDowncast(target, to: EffectSubscriber<Mutation>.self)) else {
            lock.withLock { target.window = nil }
            stage.owner.reactorGone()
            return
        }
        lock.lock()
        target.window = nil
        let stillRunning = !target.finished && !self.cancelled
        // Cancelled while `mutate` ran (the reactor was let go): the cancel missed this effect.
        let orphaned = !target.finished && self.cancelled
        if stillRunning {
            running[ObjectIdentifier(target)] = unsafeDowncast(target, to: EffectSubscriber<Mutation>.self)
        }
        target.tracked = stillRunning
        // Kept for the next action only when nothing else holds it (no subscription, no queued
        // value): whoever does may still call it.
        if target.finished && !self.cancelled && isKnownUniquelyReferenced(&target) {
            spare = target
        }
        lock.unlock()
        if stillRunning { stage.owner.effectsRunning(self) }
        if orphaned { unsafeDowncast(target, to: EffectSubscriber<Mutation>.self).cancel() }
    }

    /// The value of a `.just` handed over while its `mutate` runs, on the holder's thread:
    /// passed downstream at once, with the effect's end, under one lock. False when it must
    /// take the general way (another thread, cancelled, no demand, values waiting).
    override func deliverAtOnce(_ value: UnsafeRawPointer, from subscriber: EffectSubscriber<Mutation>) -> Bool {
        let thread = pthread_self()
        lock.lock()
        guard let window = subscriber.window, pthread_equal(window, thread) != 0, !subscriber.isCancelled,
            let downstream, demand > 0, !hasBuffered, !gate.isEmitting
        else {
            lock.unlock()
            return false
        }
        if demand != .unlimited { demand -= 1 }
        // Not tracked yet (its `mutate` is still running): finishing is this flag only.
        subscriber.finished = true
        lock.unlock()
        let more = downstream.value.receive(value.assumingMemoryBound(to: Mutation.self).pointee)
        if more > 0 {
            lock.lock()
            demand += more
            lock.unlock()
        }
        return true
    }

    /// Under the gate: passes a mutation on, or buffers it for lack of demand.
    override func deliver(_ mutation: Mutation) {
        lock.lock()
        guard let downstream, demand > 0, !hasBuffered else {
            if downstream != nil {
                buffer.append(mutation)
                hasBuffered = true
            }
            lock.unlock()
            return
        }
        if demand != .unlimited { demand -= 1 }
        lock.unlock()
        let more = downstream.value.receive(mutation)
        if more > 0 {
            lock.lock()
            demand += more
            lock.unlock()
        }
    }

    private func flush() {
        while true {
            lock.lock()
            guard let downstream, demand > 0, !buffer.isEmpty else {
                lock.unlock()
                break
            }
            if demand != .unlimited { demand -= 1 }
            let mutation = buffer.removeFirst()
            hasBuffered = !buffer.isEmpty
            lock.unlock()
            let more = downstream.value.receive(mutation)
            if more > 0 {
                lock.lock()
                demand += more
                lock.unlock()
            }
        }
        finishIfDone()
    }

    /// Finishes downstream once the actions have ended and every effect has finished.
    func finishIfDone() {
        lock.lock()
        let done = upstreamFinished && running.isEmpty && !hasBuffered && downstream != nil
        lock.unlock()
        guard done else { return }
        stage.gate.submit { [self] in
            lock.lock()
            let target = downstream
            downstream = nil
            lock.unlock()
            target?.value.receive(completion: .finished)
        }
    }

    // MARK: Effects (their state is guarded by `lock`)

    override func effectFinished(_ subscriber: EffectSubscriber<Mutation>) {
        lock.lock()
        subscriber.finished = true
        let tracked = subscriber.tracked
        if tracked { running[ObjectIdentifier(subscriber)] = nil }
        lock.unlock()
        if tracked { finishIfDone() }
    }

    // MARK: Downstream

    func request(_ more: Subscribers.Demand) {
        lock.lock()
        demand += more
        let flush = hasBuffered
        lock.unlock()
        if flush { stage.gate.submit { [self] in self.flush() } }
    }

    func cancel() {
        lock.lock()
        cancelled = true
        // What the stage lets go of is released after unlocking (the lock is the reactor's
        // gate lock, and a deinit may be anyone's code).
        let released = (downstream, buffer)
        downstream = nil
        buffer = []
        hasBuffered = false
        let upstream = self.upstream
        self.upstream = nil
        let effects = Array(running.values)
        running = [:]
        // The spare holds this stage: the cycle ends here.
        let spare = self.spare
        self.spare = nil
        lock.unlock()
        withExtendedLifetime(spare) {}
        upstream?.cancel()
        for effect in effects { effect.cancel() }
        withExtendedLifetime(released) {}
    }
}

/// Subscribes to one effect returned by `mutate`; its state is guarded by its parent's
/// lock (one lock per reactor stage, not one per effect).
final class EffectSubscriber<Mutation>: ImmediateEffectTarget, Subscriber, GateWork {
    typealias Input = Mutation
    typealias Failure = Never

    private let parent: EffectParent<Mutation>
    // Guarded by `parent.lock`.
    @exclusivity(unchecked) private var subscription: Subscription?
    @exclusivity(unchecked) private var cancelled = false
    @exclusivity(unchecked) var queuedInGate = 0

    var isCancelled: Bool { cancelled }

    init(parent: EffectParent<Mutation>) {
        self.parent = parent
        #if DEBUG
        EffectSubscriberCount.made()
        #endif
    }

    /// Subscribes to `effect` from here, where this type's metadata comes with `self`: from
    /// outside it costs a lookup per action.
    func subscribe(to effect: AnyPublisher<Mutation, Never>) {
        // `receive(subscriber:)` rather than `subscribe(_:)`: the latter only adds
        // OpenCombine's debug hooks, at the price of two metadata lookups per effect.
        effect.receive(subscriber: self)
    }

    func receive(subscription: Subscription) {
        parent.lock.lock()
        let accepted = !cancelled && !finished && self.subscription == nil
        if accepted { self.subscription = subscription }
        parent.lock.unlock()
        if accepted { subscription.request(.unlimited) } else { subscription.cancel() }
    }

    func receive(_ input: Mutation) -> Subscribers.Demand {
        parent.gate.dispatch(self, input)
        return .none
    }

    override func receiveAtOnce(_ value: UnsafeRawPointer) {
        if parent.deliverAtOnce(value, from: self) { return }
        parent.gate.dispatch(self, value.assumingMemoryBound(to: Mutation.self).pointee)
        parent.effectFinished(self)
    }

    override func finishAtOnce() {
        parent.effectFinished(self)
    }

    /// Under the gate, with the cause of the action that started the effect.
    func perform(_ mutation: Mutation) {
        parent.lock.lock()
        let live = !cancelled
        parent.lock.unlock()
        if live { ChangeCause.with(cause) { parent.deliver(mutation) } }
    }

    func receive(completion: Subscribers.Completion<Never>) {
        parent.lock.lock()
        let finished = subscription  // released after unlocking, as in `cancel`
        subscription = nil
        parent.lock.unlock()
        parent.effectFinished(self)
        withExtendedLifetime(finished) {}
    }

    func cancel() {
        parent.lock.lock()
        cancelled = true
        let subscription = self.subscription
        self.subscription = nil
        parent.lock.unlock()
        subscription?.cancel()
    }
}

#if DEBUG
/// How many effect subscribers were made: a test's check that synchronous effects reuse one.
enum EffectSubscriberCount {
    private static let lock = Mutex()
    nonisolated(unsafe) private static var count = 0

    static func made() { lock.withLock { count += 1 } }
    static var total: Int { lock.withLock { count } }
}
#endif
