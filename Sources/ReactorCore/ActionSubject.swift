internal import ConcurrencyPrimitives

/// The subject a reactor's actions are sent to: `reactor.action.send(.increase)`.
///
/// Like ReactorKit's `ActionSubject`, it never ends: completions sent to it, or from a
/// publisher bound to it with `publisher.subscribe(reactor.action)`, are ignored.
///
/// Thread safety: `send` may be called from any thread. For a reactor's own subject it
/// returns once the action and everything it caused synchronously (mutations, `reduce`,
/// the new `currentState`, delivery to state subscribers) is done; called from inside
/// that reactor's pipeline (a state subscriber, `mutate`, `reduce`) it queues the action
/// to run after the current one instead.
public final class ActionSubject<Element>: Subject {
    /// The actions it delivers.
    public typealias Output = Element
    /// It never fails.
    public typealias Failure = Never

    /// Guards the subscriber list here and each subscriber's state: the reactor's gate's lock,
    /// or one of its own for a free-standing subject.
    let lock: Mutex
    @exclusivity(unchecked) private var conduits = ConduitList<ActionConduit>()
    /// The reactor's gate; nil for a free-standing subject (or a stub's).
    let gate: SerialGate?
    /// See `GateWork`; guarded by the gate's lock.
    @exclusivity(unchecked) var queuedInGate = 0

    /// A free-standing subject, delivering on the sender's thread (like `PassthroughSubject`).
    public init() {
        gate = nil
        lock = Mutex()
    }

    init(gate: SerialGate) {
        self.gate = gate
        lock = gate.mutex
    }

    /// Delivers an action to every subscriber; see the type's note on what it waits for.
    public func send(_ value: Element) {
        if let gate {
            gate.dispatchWaiting(self, value, queueWhenHeld: true)
        } else {
            perform(value)
        }
    }

    /// `send`, calling `ownRunDone` once the action and what it caused on this thread are done,
    /// still under the reactor's gate, before anything other threads queued meanwhile runs (an
    /// effect's later value, a change of a merged stream): so `currentState` there is the
    /// action's own result. Called at once when the action is only queued.
    package func send(_ value: Element, ownRunDone: () -> Void) {
        if let gate {
            gate.dispatchWaiting(self, value, queueWhenHeld: true, ownRunDone: ownRunDone)
        } else {
            perform(value)
            ownRunDone()
        }
    }

    /// Ignored: an action stream never ends.
    public func send(completion: Subscribers.Completion<Never>) {}

    /// Requests everything from an upstream publisher bound with `subscribe(_:)`.
    public func send(subscription: Subscription) {
        subscription.request(.unlimited)
    }

    /// Adds a subscriber; it receives the actions sent from now on, as it demands them.
    public func receive<S: Subscriber>(subscriber: S) where S.Input == Element, S.Failure == Never {
        let conduit = ActionConduitOf(subject: self, downstream: subscriber)
        lock.withLock { conduits.append(conduit) }
        subscriber.receive(subscription: conduit)
    }

    func remove(_ conduit: ActionConduit) {
        lock.withLock { conduits.remove(conduit) }
    }

    /// Drops every subscriber (the reactor went away).
    func detachAll() {
        let dropped = lock.withLock { () -> ConduitList<ActionConduit> in
            defer { conduits = ConduitList() }
            return conduits
        }
        for conduit in dropped { conduit.cancel() }
    }
}

extension ActionSubject: GateWork {
    func perform(_ value: Element) {
        lock.lock()
        let current = conduits
        lock.unlock()
        withUnsafePointer(to: value) { pointer in
            for conduit in current { conduit.offer(UnsafeRawPointer(pointer)) }
        }
    }
}

/// One subscriber of an `ActionSubject`. Not generic, and handed the action by pointer:
/// in unspecialised code every use of an array of a generic class costs a metadata lookup.
class ActionConduit: Subscription {
    /// `value` points to an `Element`.
    func offer(_ value: UnsafeRawPointer) {}
    func request(_ demand: Subscribers.Demand) {}
    func cancel() {}
}

private final class ActionConduitOf<Element, Downstream: Subscriber>: ActionConduit
where Downstream.Input == Element, Downstream.Failure == Never {
    /// The subject's lock.
    private let lock: Mutex
    /// Held strongly until cancelled, as Combine's subjects' conduits hold theirs (a weak
    /// reference would cost every reactor a side table); `cancel` (or the subject's
    /// `detachAll`) breaks the cycle.
    @exclusivity(unchecked) private var subject: ActionSubject<Element>?
    @exclusivity(unchecked) private var downstream: Box<Downstream>?
    @exclusivity(unchecked) private var demand = Subscribers.Demand.none

    init(subject: ActionSubject<Element>, downstream: Downstream) {
        lock = subject.lock
        self.subject = subject
        self.downstream = Box(downstream)
    }

    override func offer(_ pointer: UnsafeRawPointer) {
        lock.lock()
        guard let downstream, demand > 0 else {
            lock.unlock()
            return
        }
        if demand != .unlimited { demand -= 1 }
        lock.unlock()
        let more = downstream.value.receive(pointer.assumingMemoryBound(to: Element.self).pointee)
        if more > 0 {
            lock.lock()
            demand += more
            lock.unlock()
        }
    }

    override func request(_ demand: Subscribers.Demand) {
        lock.lock()
        self.demand += demand
        lock.unlock()
    }

    override func cancel() {
        lock.lock()
        // Let go of after unlocking: the lock is the reactor's gate lock, and the subscriber's
        // deinit is anyone's code (it may well cancel a subscription to the same reactor).
        let released = downstream
        downstream = nil
        let subject = self.subject
        self.subject = nil
        lock.unlock()
        subject?.remove(self)
        withExtendedLifetime(released) {}
    }
}
