/// How the pipeline reaches its reactor: weakly, so the pipeline never keeps the reactor
/// alive. Every call answers nil once the reactor is gone, and the pipeline then tears
/// itself down: nothing is reduced after the reactor is released.
///
/// Typed by the reactor's associated types rather than the reactor class, so a reactor
/// reached through a superclass type and through its own type shares one pipeline.
class ReactorHandle<Action, Mutation, State> {
    func mutate(_ action: Action) -> AnyPublisher<Mutation, Never>? { nil }
    func reduce(_ state: State, _ mutation: Mutation) -> State? { nil }
    func isOwned(by object: AnyObject) -> Bool { false }
    var isAlive: Bool { false }
}

final class TypedReactorHandle<R: Reactor>: ReactorHandle<R.Action, R.Mutation, R.State> {
    private weak var reactor: R?

    init(_ reactor: R) { self.reactor = reactor }

    override func mutate(_ action: R.Action) -> AnyPublisher<R.Mutation, Never>? {
        reactor?.mutate(action: action)
    }

    override func reduce(_ state: R.State, _ mutation: R.Mutation) -> R.State? {
        reactor?.reduce(state: state, mutation: mutation)
    }

    override func isOwned(by object: AnyObject) -> Bool { reactor === object }

    override var isAlive: Bool { reactor != nil }
}
