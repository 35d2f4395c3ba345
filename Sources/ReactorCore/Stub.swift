internal import ConcurrencyPrimitives

/// A reactor's stub, for testing what uses a reactor without running its logic
/// (ReactorKit's `Stub`).
///
///     reactor.isStubEnabled = true
///     reactor.stub.state.send(State(count: 3))   // reactor.currentState.count == 3
///     reactor.action.send(.increase)             // recorded; mutate/reduce never run
///     XCTAssertEqual(reactor.stub.actions, [.increase])
public final class Stub<R: Reactor> {
    let core: StubCore<R.Action, R.State>

    init(core: StubCore<R.Action, R.State>) { self.core = core }

    /// Sets the reactor's state (and `currentState`) directly.
    public var state: CurrentValueSubject<R.State, Never> { core.state }

    /// `reactor.action` while the stub is enabled.
    public var action: ActionSubject<R.Action> { core.action }

    /// Every action sent to `action`, in order.
    public var actions: [R.Action] { core.actions }

    /// The same switch as `reactor.isStubEnabled`.
    public var isEnabled: Bool {
        get { core.isEnabled }
        set { core.isEnabled = newValue }
    }
}

/// The stub's shared parts, kept in the reactor's storage.
final class StubCore<Action, State> {
    let state: CurrentValueSubject<State, Never>
    let action = ActionSubject<Action>()
    private let lock = Mutex()
    private var recorded: [Action] = []
    private var enabled = false
    private var recording: AnyCancellable?

    init(initialState: State) {
        state = CurrentValueSubject(initialState)
        recording = action.sink { [weak self] action in
            guard let self else { return }
            self.lock.withLock { self.recorded.append(action) }
        }
    }

    var actions: [Action] { lock.withLock { recorded } }

    var isEnabled: Bool {
        get { lock.withLock { enabled } }
        set { lock.withLock { enabled = newValue } }
    }
}
