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
    /// Read and written only under the gate.
    private(set) var latest: State
    /// Guarded by the gate's lock.
    private var conduits: ContiguousArray<StateConduit<State>> = []
    private var detached = false

    init(_ initial: State, gate: SerialGate) {
        latest = initial
        self.gate = gate
    }

    /// Under the gate.
    func send(_ state: State) {
        latest = state
        gate.lock()
        let current = conduits
        gate.unlock()
        var index = 0
        while index < current.count {
            current[index].offer(state)
            index += 1
        }
    }

    func receive<S: Subscriber>(subscriber: S) where S.Input == State, S.Failure == Never {
        subscriber.receive(subscription: StateConduitOf(relay: self, downstream: subscriber))
    }

    /// Under the gate: starts delivering to `conduit`, beginning with the latest state.
    func attach(_ conduit: StateConduit<State>) {
        let attached = gate.withLock { () -> Bool in
            guard !detached else { return false }
            conduits.append(conduit)
            return true
        }
        if attached { conduit.offer(latest) }
    }

    func remove(_ conduit: StateConduit<State>) {
        gate.withLock { conduits.removeAll { $0 === conduit } }
    }

    /// Drops every subscriber, without completing them (the reactor went away; ReactorKit
    /// doesn't complete its state stream either).
    func detachAll() {
        let dropped = gate.withLock { () -> ContiguousArray<StateConduit<State>> in
            detached = true
            defer { conduits = [] }
            return conduits
        }
        for conduit in dropped { conduit.release() }
    }
}

/// What a subscriber's demand calls for.
enum RequestOutcome { case nothing, attach, replay }

/// One subscriber of a `StateRelay`.
class StateConduit<State>: Subscription {
    func offer(_ state: State) {}
    func request(_ demand: Subscribers.Demand) {}
    func cancel() {}
    func release() {}
}

private final class StateConduitOf<State, Downstream: Subscriber>: StateConduit<State>, GateWork
where Downstream.Input == State, Downstream.Failure == Never {
    private let relay: StateRelay<State>
    // Guarded by the relay's gate lock.
    private var downstream: Box<Downstream>?
    private var demand = Subscribers.Demand.none
    private var attached = false
    private var missedLatest = false

    init(relay: StateRelay<State>, downstream: Downstream) {
        self.relay = relay
        self.downstream = Box(downstream)
    }

    /// Under the gate.
    override func offer(_ state: State) {
        let gate = relay.gate
        gate.lock()
        guard let downstream else {
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
        let more = downstream.value.receive(state)
        if more > 0 {
            gate.lock()
            demand += more
            gate.unlock()
        }
    }

    override func request(_ demand: Subscribers.Demand) {
        let next = relay.gate.withLock { () -> RequestOutcome in
            guard downstream != nil else { return .nothing }
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
            offer(relay.latest)
        }
    }

    override func cancel() {
        relay.gate.withLock { downstream = nil }
        relay.remove(self)
    }

    override func release() {
        relay.gate.withLock { downstream = nil }
    }
}
