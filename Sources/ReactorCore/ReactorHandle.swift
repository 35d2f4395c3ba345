/// How the pipeline reaches its reactor: weakly, so the pipeline never keeps the reactor
/// alive. Every call answers false once the reactor is gone, and the pipeline then tears
/// itself down: nothing is reduced after the reactor is released.
///
/// Typed by the reactor's associated types rather than the reactor class, so a reactor
/// reached through a superclass type and through its own type shares one pipeline.
/// (Results come back through `inout` rather than as optionals: an optional of a generic
/// type costs a runtime metadata lookup on every call.)
class ReactorHandle<Action, Mutation, State> {
    /// Calls `mutate` and subscribes `subscriber` to the effect it returns.
    func mutate(_ action: Action, into subscriber: EffectSubscriber<Mutation>) -> Bool { false }
    func reduce(_ state: inout State, _ mutation: Mutation) -> Bool { false }
    func isOwned(by object: AnyObject) -> Bool { false }
    var isAlive: Bool { false }
}

final class TypedReactorHandle<R: Reactor>: ReactorHandle<R.Action, R.Mutation, R.State> {
    private weak var reactor: R?

    init(_ reactor: R) { self.reactor = reactor }

    override func mutate(_ action: R.Action, into subscriber: EffectSubscriber<R.Mutation>) -> Bool {
        guard let reactor else { return false }
        subscriber.subscribe(to: reactor.mutate(action: action))
        return true
    }

    override func reduce(_ state: inout R.State, _ mutation: R.Mutation) -> Bool {
        guard let reactor else { return false }
        state = reactor.reduce(state: state, mutation: mutation)
        return true
    }

    override func isOwned(by object: AnyObject) -> Bool { reactor === object }

    override var isAlive: Bool { reactor != nil }
}
