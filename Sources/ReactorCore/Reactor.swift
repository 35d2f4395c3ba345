/// A reactor: a UI-independent layer that turns actions into state, as in ReactorKit.
///
/// An action goes through the pipeline in ReactorKit's order:
/// `action → transform(action:) → flatMap(mutate) → transform(mutation:) →
/// scan(initialState, reduce) → start with initialState → transform(state:) →
/// currentState → replay(1)`.
///
/// Threading: each reactor has one serial gate. Everything that reaches `reduce` goes
/// through it (actions, mutations emitted later by effects, values of streams merged in
/// `transform(mutation:)`), so `reduce`, `currentState` updates and state subscribers
/// never run concurrently for one reactor, and state subscribers are called synchronously
/// on the thread that did the work. See `ActionSubject.send(_:)` for what `send` waits for.
///
/// Lifetime: the pipeline holds the reactor weakly. Releasing the last reference to a
/// reactor deallocates it; nothing is reduced afterwards, and its running effects are
/// cancelled shortly after (within about 20 ms).
public protocol Reactor: AnyObject {
    /// What the user (or the client) does.
    associatedtype Action
    /// A change of state; defaults to `Action`.
    associatedtype Mutation = Action
    /// The state of the reactor.
    associatedtype State

    /// The state before any mutation.
    var initialState: State { get }

    /// Transforms the action stream; called once, when the pipeline is built. Default:
    /// the identity.
    func transform(action: AnyPublisher<Action, Never>) -> AnyPublisher<Action, Never>

    /// The effect of an action: mutations, now or later. Default: `.empty`, or the action
    /// itself when `Mutation == Action`.
    func mutate(action: Action) -> AnyPublisher<Mutation, Never>

    /// Transforms the mutation stream, e.g. merges a global stream into it; called once.
    /// Default: the identity.
    func transform(mutation: AnyPublisher<Mutation, Never>) -> AnyPublisher<Mutation, Never>

    /// The new state after a mutation. Pure; called under the reactor's gate. Default:
    /// the state unchanged.
    func reduce(state: State, mutation: Mutation) -> State

    /// Transforms the state stream; called once. Default: the identity.
    func transform(state: AnyPublisher<State, Never>) -> AnyPublisher<State, Never>
}

// MARK: - Defaults

extension Reactor {
    /// The identity: the actions as sent.
    public func transform(action: AnyPublisher<Action, Never>) -> AnyPublisher<Action, Never> {
        action
    }

    /// No mutation.
    public func mutate(action: Action) -> AnyPublisher<Mutation, Never> {
        .empty
    }

    /// The identity: the mutations as `mutate(action:)` made them.
    public func transform(mutation: AnyPublisher<Mutation, Never>) -> AnyPublisher<Mutation, Never> {
        mutation
    }

    /// The state unchanged.
    public func reduce(state: State, mutation: Mutation) -> State {
        state
    }

    /// The identity: the states as `reduce(state:mutation:)` made them.
    public func transform(state: AnyPublisher<State, Never>) -> AnyPublisher<State, Never> {
        state
    }
}

extension Reactor where Action == Mutation {
    /// The action itself, as the one mutation.
    public func mutate(action: Action) -> AnyPublisher<Mutation, Never> {
        .just(action)
    }
}

// MARK: - Per-instance members

extension Reactor {
    var storage: ReactorStorage<Action, Mutation, State> {
        ReactorRegistry.shared.storage(for: self)
    }

    /// Where actions go: `reactor.action.send(.increase)`, from any thread. Accessing it
    /// builds the state stream. With the stub enabled, the stub's action subject.
    public var action: ActionSubject<Action> {
        let storage = self.storage
        if let stub = storage.enabledStub { return stub.action }
        storage.startIfNeeded(self)
        return storage.action
    }

    /// The state stream: hot, replays the current state to each new subscriber at once,
    /// then every new state, in order. Never completes. With the stub enabled, the stub's
    /// state.
    public var state: AnyPublisher<State, Never> {
        let storage = self.storage
        if let stub = storage.enabledStub { return stub.state.eraseToAnyPublisher() }
        storage.startIfNeeded(self)
        return storage.output.eraseToAnyPublisher()
    }

    /// The latest state (after `transform(state:)`). After `action.send(a)` returns on a
    /// thread outside the pipeline, it reflects `a`'s synchronous mutations.
    public var currentState: State {
        let storage = self.storage
        if let stub = storage.enabledStub { return stub.state.value }
        storage.startIfNeeded(self)
        return storage.currentState
    }

    /// Starts this reactor from `state` instead of `initialState`: how a store brings a
    /// reactor back after a restart, without replaying its actions (so no effect runs twice).
    /// `state` is reduced from and goes through `transform(state:)`, as `initialState` does.
    /// Only before the reactor's first use (`action`, `state`, `currentState`, `pulse`, `stub`);
    /// returns false, changing nothing, after it.
    @discardableResult
    public func restore(_ state: State) -> Bool {
        ReactorRegistry.shared.storage(for: self, startingFrom: state).made
    }

    /// Ends this reactor's pipeline now, as its release would: its running effects are cancelled
    /// and its subscriptions (a merged global user) let go; nothing reaches `reduce` or the state
    /// subscribers afterwards. For a server ending a session whose reactor an effect may still
    /// hold (a `.run` that captured it), which no release would end.
    package func tearDown() {
        ReactorRegistry.shared.existingStorage(of: self)?.teardown()
    }

    /// Whether an effect `mutate` returned is still running (a `.run` that has not returned, a
    /// publisher that has not finished): a server keeps such a reactor in memory until it ends.
    public var hasRunningEffects: Bool { storage.hasRunningEffects }

    /// The stub for testing views and services without the reactor's logic.
    public var stub: Stub<Self> {
        Stub(core: storage.stub)
    }

    /// When true, `action` records into `stub.actions`, `state` and `currentState` come
    /// from `stub.state`, and `mutate` and `reduce` never run.
    public var isStubEnabled: Bool {
        get { storage.enabledStub != nil }
        set { storage.stub.isEnabled = newValue }
    }
}
