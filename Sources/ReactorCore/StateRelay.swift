/// A hot publisher of a reactor's states that replays the latest one to each new
/// subscriber (ReactorKit's `replay(1)`). Used twice per reactor: before
/// `transform(state:)` (starting with `initialState`) and after it (`reactor.state`).
///
/// `send` runs under the reactor's gate; a subscriber's first demand is also served under
/// the gate, so a new subscriber gets the latest state first and then every later one,
/// in order, never concurrently.
final class StateRelay<State>: Publisher {
    typealias Output = State
    typealias Failure = Never

    let gate: SerialGate
    /// Written under the gate and its lock; read under the gate, or anywhere under the lock
    /// (`currentLatest`).
    @exclusivity(unchecked) private(set) var latest: State
    /// Guarded by the gate's lock.
    @exclusivity(unchecked) private var conduits = ConduitList<StateConduit>()
    @exclusivity(unchecked) private var detached = false

    /// Whether `latest` is a state that was sent (or the starting one) and is replayed.
    @exclusivity(unchecked) private var hasLatest: Bool

    /// `replaying`: whether `initial` is replayed before anything is sent (true for the
    /// stream that starts with initialState; false after transform(state:), which may
    /// not have emitted anything yet).
    init(_ initial: State, replaying: Bool, gate: SerialGate) {
        latest = initial
        hasLatest = replaying
        self.gate = gate
    }

    /// Under the gate.
    func send(_ state: State) {
        gate.lock()
        // The state replaced is let go of after unlocking: `latest` may be its only holder, and
        // its deinit is anyone's code (it may cancel a subscription to this very reactor).
        let replaced = latest
        latest = state
        hasLatest = true
        let current = conduits
        gate.unlock()
        withExtendedLifetime(replaced) {}
        withUnsafePointer(to: state) { pointer in
            for conduit in current { conduit.offer(UnsafeRawPointer(pointer)) }
        }
    }

    /// The latest state, from any thread: `reactor.currentState`.
    var currentLatest: State { gate.withLock { latest } }

    func receive<S: Subscriber>(subscriber: S) where S.Input == State, S.Failure == Never {
        subscriber.receive(subscription: StateConduitOf(relay: self, downstream: subscriber))
    }

    /// Under the gate: starts delivering to `conduit`, beginning with the latest state.
    func attach(_ conduit: StateConduit) {
        let attached = gate.withLock { () -> Bool in
            guard !detached else { return false }
            conduits.append(conduit)
            return true
        }
        if attached && hasLatest { withUnsafePointer(to: latest) { conduit.offer(UnsafeRawPointer($0)) } }
    }

    /// Under the gate: offers the latest state again (it was missed for lack of demand).
    func replayLatest(to conduit: StateConduit) {
        if hasLatest { withUnsafePointer(to: latest) { conduit.offer(UnsafeRawPointer($0)) } }
    }

    func remove(_ conduit: StateConduit) {
        gate.withLock { conduits.remove(conduit) }
    }

    /// Drops every subscriber, without completing them (the reactor went away; ReactorKit
    /// doesn't complete its state stream either).
    func detachAll() {
        let dropped = gate.withLock { () -> ConduitList<StateConduit> in
            detached = true
            defer { conduits = ConduitList() }
            return conduits
        }
        for conduit in dropped { conduit.release() }
    }
}

/// What a subscriber's demand calls for.
enum RequestOutcome { case nothing, attach, replay }

/// One subscriber of a `StateRelay`. Not generic, and handed the state by pointer: in
/// unspecialised code every use of an array of a generic class costs a metadata lookup.
class StateConduit: Subscription {
    /// Under the gate; `state` points to a `State`.
    func offer(_ state: UnsafeRawPointer) {}
    func request(_ demand: Subscribers.Demand) {}
    func cancel() {}
    func release() {}
}

private final class StateConduitOf<State, Downstream: Subscriber>: StateConduit, GateWork
where Downstream.Input == State, Downstream.Failure == Never {
    private let relay: StateRelay<State>
    // Guarded by the relay's gate lock.
    /// Not optional (an optional of a generic type costs a metadata lookup per use);
    /// `active` says whether it may still be called.
    private let downstream: Downstream
    @exclusivity(unchecked) private var demand = Subscribers.Demand.none
    @exclusivity(unchecked) var queuedInGate = 0
    // The flags last, together: one word, not one each (the object fits malloc's 64-byte chunk).
    @exclusivity(unchecked) private var active = true
    @exclusivity(unchecked) private var attached = false
    @exclusivity(unchecked) private var missedLatest = false

    init(relay: StateRelay<State>, downstream: Downstream) {
        self.relay = relay
        self.downstream = downstream
    }

    /// Under the gate.
    override func offer(_ pointer: UnsafeRawPointer) {
        let gate = relay.gate
        gate.lock()
        guard active else {
            gate.unlock()
            return
        }
        guard demand > 0 else {
            missedLatest = true
            gate.unlock()
            return
        }
        if demand != .unlimited { demand -= 1 }
        missedLatest = false
        gate.unlock()
        let more = downstream.receive(pointer.assumingMemoryBound(to: State.self).pointee)
        if more > 0 {
            gate.lock()
            demand += more
            gate.unlock()
        }
    }

    override func request(_ demand: Subscribers.Demand) {
        let next = relay.gate.withLock { () -> RequestOutcome in
            guard active else { return .nothing }
            self.demand += demand
            if !attached {
                attached = true
                return .attach
            }
            return missedLatest ? .replay : .nothing
        }
        switch next {
        case .nothing: break
        // A new subscriber gets the current state at once: wait for the gate if needed.
        case .attach: relay.gate.dispatchWaiting(self, true, queueWhenHeld: false)
        case .replay: relay.gate.dispatch(self, false, deferWhileEmitting: false)
        }
    }

    /// Under the gate: `attach` first, or replay a state missed for lack of demand.
    func perform(_ attach: Bool) {
        if attach {
            relay.attach(self)
        } else if relay.gate.withLock({ missedLatest }) {
            relay.replayLatest(to: self)
        }
    }

    override func cancel() {
        relay.gate.withLock { active = false }
        relay.remove(self)
    }

    override func release() {
        relay.gate.withLock { active = false }
    }
}
