/// The `flatMap(mutate)` stage of the pipeline: calls `mutate` for each action, under the
/// gate, and merges the effects it returns. Effects run concurrently (like Rx's
/// `flatMap`); their values enter the gate before going on, so an effect emitting on
/// another thread (a `.run` task) is serialised with everything else.
///
/// It knows which effects are still running, so the release watcher can cancel them
/// promptly when the reactor goes away.
struct MutationFlatMap<Action, Mutation>: Publisher {
    typealias Output = Mutation
    typealias Failure = Never

    let upstream: AnyPublisher<Action, Never>
    let gate: SerialGate
    /// Nil when the reactor is gone.
    let mutate: (Action) -> AnyPublisher<Mutation, Never>?
    let reactorGone: () -> Void
    let effectsRunning: (EffectTracking) -> Void

    func receive<S: Subscriber>(subscriber: S) where S.Input == Mutation, S.Failure == Never {
        let subscription = MutationFlatMapSubscription(self, downstream: subscriber)
        subscriber.receive(subscription: subscription)
        upstream.subscribe(subscription)
    }
}

/// The running-effects question the release watcher asks.
protocol EffectTracking: AnyObject {
    var hasRunningEffects: Bool { get }
}

final class MutationFlatMapSubscription<Action, Mutation, Downstream: Subscriber>
: Subscription, Subscriber, GateWork, EffectTracking
where Downstream.Input == Mutation, Downstream.Failure == Never {
    typealias Input = Action
    typealias Failure = Never

    private let stage: MutationFlatMap<Action, Mutation>
    private let lock = Lock()
    // Guarded by `lock`.
    private var downstream: Downstream?
    private var upstream: Subscription?
    private var effects: [ObjectIdentifier: EffectSubscriber<Action, Mutation, Downstream>] = [:]
    private var demand = Subscribers.Demand.none
    private var buffer: [Mutation] = []
    private var upstreamFinished = false
    private var cancelled = false

    init(_ stage: MutationFlatMap<Action, Mutation>, downstream: Downstream) {
        self.stage = stage
        self.downstream = downstream
    }

    var hasRunningEffects: Bool { lock.withLock { !effects.isEmpty } }

    // MARK: Upstream: actions

    func receive(subscription: Subscription) {
        let accepted = lock.withLock { () -> Bool in
            guard upstream == nil, !cancelled else { return false }
            upstream = subscription
            return true
        }
        if accepted { subscription.request(.unlimited) } else { subscription.cancel() }
    }

    func receive(_ action: Action) -> Subscribers.Demand {
        stage.gate.dispatch(self, .action(action))
        return .none
    }

    func receive(completion: Subscribers.Completion<Never>) {
        let finish = lock.withLock { () -> Bool in
            upstreamFinished = true
            return effects.isEmpty && buffer.isEmpty
        }
        if finish { stage.gate.dispatch(self, .finish) }
    }

    // MARK: Under the gate

    enum Item {
        case action(Action)
        case mutation(Mutation)
        /// Deliver what was buffered for lack of demand.
        case flush
        case finish
    }

    func perform(_ item: Item) {
        switch item {
        case let .action(action): start(action)
        case let .mutation(mutation): deliver(mutation)
        case .flush: flush()
        case .finish: finish()
        }
    }

    private func start(_ action: Action) {
        guard lock.withLock({ !cancelled }) else { return }
        guard let effect = stage.mutate(action) else {
            stage.reactorGone()
            return
        }
        let subscriber = EffectSubscriber(parent: self)
        let id = ObjectIdentifier(subscriber)
        lock.withLock { effects[id] = subscriber }
        effect.subscribe(subscriber)
        // Still running after subscribing: an asynchronous effect worth watching.
        if lock.withLock({ effects[id] != nil }) { stage.effectsRunning(self) }
    }

    private func deliver(_ mutation: Mutation) {
        lock.lock()
        guard let downstream else {
            lock.unlock()
            return
        }
        guard demand > 0, buffer.isEmpty else {
            buffer.append(mutation)
            lock.unlock()
            return
        }
        if demand != .unlimited { demand -= 1 }
        lock.unlock()
        let more = downstream.receive(mutation)
        if more > 0 { lock.withLock { demand += more } }
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
            lock.unlock()
            let more = downstream.receive(mutation)
            if more > 0 { lock.withLock { demand += more } }
        }
        finish()
    }

    private func finish() {
        let target = lock.withLock { () -> Downstream? in
            guard upstreamFinished, effects.isEmpty, buffer.isEmpty else { return nil }
            defer { downstream = nil }
            return downstream
        }
        target?.receive(completion: .finished)
    }

    // MARK: Effects

    func effectEmitted(_ mutation: Mutation) {
        stage.gate.dispatch(self, .mutation(mutation))
    }

    func effectFinished(_ subscriber: EffectSubscriber<Action, Mutation, Downstream>) {
        let finish = lock.withLock { () -> Bool in
            effects[ObjectIdentifier(subscriber)] = nil
            return upstreamFinished && effects.isEmpty
        }
        if finish { stage.gate.dispatch(self, .finish) }
    }

    // MARK: Downstream

    func request(_ more: Subscribers.Demand) {
        let flush = lock.withLock { () -> Bool in
            demand += more
            return !buffer.isEmpty
        }
        if flush { stage.gate.dispatch(self, .flush) }
    }

    func cancel() {
        let (upstream, effects) = lock.withLock { () -> (Subscription?, [EffectSubscriber<Action, Mutation, Downstream>]) in
            cancelled = true
            downstream = nil
            buffer = []
            defer {
                self.upstream = nil
                self.effects = [:]
            }
            return (self.upstream, Array(self.effects.values))
        }
        upstream?.cancel()
        for effect in effects { effect.cancel() }
    }
}

/// Subscribes to one effect returned by `mutate`.
final class EffectSubscriber<Action, Mutation, Downstream: Subscriber>: Subscriber
where Downstream.Input == Mutation, Downstream.Failure == Never {
    typealias Input = Mutation
    typealias Failure = Never

    private let lock = Lock()
    private var parent: MutationFlatMapSubscription<Action, Mutation, Downstream>?
    private var subscription: Subscription?
    private var cancelled = false

    init(parent: MutationFlatMapSubscription<Action, Mutation, Downstream>) {
        self.parent = parent
    }

    func receive(subscription: Subscription) {
        let accepted = lock.withLock { () -> Bool in
            guard !cancelled, self.subscription == nil else { return false }
            self.subscription = subscription
            return true
        }
        if accepted { subscription.request(.unlimited) } else { subscription.cancel() }
    }

    func receive(_ input: Mutation) -> Subscribers.Demand {
        lock.withLock { parent }?.effectEmitted(input)
        return .none
    }

    func receive(completion: Subscribers.Completion<Never>) {
        let parent = lock.withLock { () -> MutationFlatMapSubscription<Action, Mutation, Downstream>? in
            defer {
                self.parent = nil
                subscription = nil
            }
            return self.parent
        }
        parent?.effectFinished(self)
    }

    func cancel() {
        let subscription = lock.withLock { () -> Subscription? in
            cancelled = true
            parent = nil
            defer { self.subscription = nil }
            return self.subscription
        }
        subscription?.cancel()
    }
}
