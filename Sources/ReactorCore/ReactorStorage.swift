/// What the registry needs of a reactor's storage, whatever its types.
class AnyReactorStorage {
    /// The reactor's identity, the registry's key.
    let key: ObjectIdentifier
    /// Position in the registry's sweep list; guarded by the registry's lock.
    var sweepIndex = -1

    init(key: ObjectIdentifier) { self.key = key }

    func isOwned(by object: AnyObject) -> Bool { false }
    var isReactorAlive: Bool { false }
    var hasRunningEffects: Bool { false }
    func teardown() {}
}

/// Everything a reactor has per instance (ReactorKit keeps it in associated objects):
/// its gate, action subject, state relays, current state, pipeline and stub.
///
/// The storage holds the reactor weakly; the registry holds the storage until the reactor
/// is found gone (by the pipeline itself or by the release watcher), then `teardown`
/// closes the gate, cancels the pipeline (and with it running effects) and lets go.
final class ReactorStorage<Action, Mutation, State>: MutationStageOwner<Action, Mutation> {
    let gate = SerialGate()
    let handle: ReactorHandle<Action, Mutation, State>
    let action: ActionSubject<Action>
    let output: StateRelay<State>
    let initialState: State

    // Guarded by the gate's lock.
    @exclusivity(unchecked) private var started = false
    @exclusivity(unchecked) private var tornDown = false
    /// Whether transform(state:) is the identity and nothing else watches its argument, so
    /// `reduceAndEmit` publishes itself. (Beside the other flags: they share a word.)
    @exclusivity(unchecked) private var statesPassThrough = false
    /// The pipeline's two ends, cancelled by `teardown`. (Fields, not an array of
    /// `Cancellable`s: that array was one more allocation per reactor.)
    @exclusivity(unchecked) private var reduceSink: GatedSink<Action, Mutation, State>?
    @exclusivity(unchecked) private var stateSink: GatedSink<Action, Mutation, State>?
    @exclusivity(unchecked) private var stubCore: StubCore<Action, State>?
    @exclusivity(unchecked) private weak var effects: EffectTracking?
    /// The reduced states, before transform(state:). Written once while building, under the
    /// gate; read under the gate. Nil when states pass straight through.
    @exclusivity(unchecked) private var source: StateRelay<State>?

    /// `initial`: the state to start from, `reactor.initialState` when nil.
    init<R: Reactor>(_ reactor: R, startingFrom initial: State?)
    where R.Action == Action, R.Mutation == Mutation, R.State == State {
        handle = TypedReactorHandle(reactor)
        action = ActionSubject(gate: gate)
        let initial = initial ?? reactor.initialState
        initialState = initial
        output = StateRelay(initial, replaying: false, gate: gate)
        super.init(key: ObjectIdentifier(reactor))
    }

    override func isOwned(by object: AnyObject) -> Bool { handle.isOwned(by: object) }
    override var isReactorAlive: Bool { handle.isAlive }
    override var hasRunningEffects: Bool {
        gate.withLock { effects }?.hasRunningEffects ?? false
    }

    var currentState: State { output.currentLatest }

    // MARK: Stub

    var stub: StubCore<Action, State> {
        gate.withLock {
            if let stubCore { return stubCore }
            let made = StubCore<Action, State>(initialState: initialState)
            stubCore = made
            return made
        }
    }

    /// The stub when it is enabled.
    var enabledStub: StubCore<Action, State>? {
        gate.lock()
        let core = stubCore
        gate.unlock()
        if let core, core.isEnabled { return core }
        return nil
    }

    // MARK: Building the pipeline

    /// Builds the pipeline on first use, under the gate, in ReactorKit's order.
    func startIfNeeded<R: Reactor>(_ reactor: R)
    where R.Action == Action, R.Mutation == Mutation, R.State == State {
        gate.lock()
        let needed = !started
        started = true
        gate.unlock()
        guard needed else { return }
        let context = ThreadContext.current
        if gate.tryEnter(context) || (!context.holdsAnyGate && gate.enter(context)) {
            build(reactor)
            gate.exit(context)
        } else {
            gate.submit { [self] in build(reactor) }
        }
    }

    private func build<R: Reactor>(_ reactor: R)
    where R.Action == Action, R.Mutation == Mutation, R.State == State {
        var source = StateRelay(initialState, replaying: true, gate: gate)
        let stage = MutationFlatMap<Action, Mutation>(
            upstream: reactor.transform(action: action.eraseToAnyPublisher()), gate: gate, owner: self)
        let mutations = reactor.transform(mutation: stage.eraseToAnyPublisher())
        let reduceSink = ReduceSink(self)
        // The state end first, so it sees initialState; then the mutation end, whose
        // merged streams (a current user) may deliver at once.
        let transformed = Self.transformedStates(reactor, source)
        if transformed == nil && isKnownUniquelyReferenced(&source) {
            // The default transform(state:) handed its argument back and kept nothing of it:
            // reduced states go straight to `publish`, without a relay, a sink and a conduit
            // between. (A transform that kept its argument takes the path below, so whoever
            // watches it sees each state in the same order as ever.)
            gate.withLock {
                self.reduceSink = reduceSink
                statesPassThrough = true
            }
            publish(initialState)
        } else {
            let states = transformed ?? source.eraseToAnyPublisher()
            let stateSink = StateSink(self)
            gate.withLock {
                self.source = source
                self.reduceSink = reduceSink
                self.stateSink = stateSink
            }
            states.subscribe(stateSink)
        }
        mutations.subscribe(reduceSink)
    }

    /// What transform(state:) makes of the reduced states; nil when it hands them back as
    /// they are. (Its own function, so that nothing of the call outlives it.)
    private static func transformedStates<R: Reactor>(_ reactor: R, _ reduced: StateRelay<State>)
        -> AnyPublisher<State, Never>? where R.State == State
    {
        let erased = reduced.eraseToAnyPublisher()
        let states = reactor.transform(state: erased)
        return isSamePublisher(states, erased) ? nil : states
    }

    // MARK: The mutation stage's calls

    override func mutate(_ action: Action, into subscriber: EffectSubscriber<Mutation>) -> Bool {
        handle.mutate(action, into: subscriber)
    }

    override func reactorGone() { teardown() }

    override func effectsRunning(_ tracker: EffectTracking) {
        gate.withLock { effects = tracker }
        ReactorRegistry.shared.watchEffects(self)
    }

    // MARK: Under the gate

    func reduceAndEmit(_ mutation: Mutation) {
        // The `scan` accumulator: the latest reduced state, which is the output's when
        // states pass straight through.
        guard let reduced = statesPassThrough ? output : source else { return }
        var state = reduced.latest
        // Emitting from here on: a value `reduce` itself causes (a send to a merged subject)
        // waits for this state to be delivered, so reduce never runs inside itself.
        let wasEmitting = gate.isEmitting
        gate.isEmitting = true
        defer { gate.isEmitting = wasEmitting }
        guard handle.reduce(&state, mutation) else {
            teardown()
            return
        }
        if statesPassThrough {
            output.send(state)
        } else {
            reduced.send(state)
        }
    }

    /// Sets `currentState` and delivers to `reactor.state` subscribers.
    func publish(_ state: State) {
        let wasEmitting = gate.isEmitting
        gate.isEmitting = true
        output.send(state)
        gate.isEmitting = wasEmitting
    }

    // MARK: Release

    override func teardown() {
        let sinks = gate.withLock { () -> (GatedSink<Action, Mutation, State>?, GatedSink<Action, Mutation, State>?)? in
            guard !tornDown else { return nil }
            tornDown = true
            defer {
                reduceSink = nil
                stateSink = nil
            }
            return (reduceSink, stateSink)
        }
        guard let sinks else { return }
        gate.close()
        sinks.0?.cancel()
        sinks.1?.cancel()
        action.detachAll()
        gate.withLock { source }?.detachAll()
        output.detachAll()
        ReactorRegistry.shared.remove(self)
    }
}

/// Whether two type-erased publishers are one and the same (the same box inside): equal
/// bytes of the one reference `AnyPublisher` holds.
private func isSamePublisher<Output, Failure>(
    _ a: AnyPublisher<Output, Failure>,
    _ b: AnyPublisher<Output, Failure>
) -> Bool {
    withUnsafeBytes(of: a) { a in withUnsafeBytes(of: b) { b in a.elementsEqual(b) } }
}
