/// A sink at one end of a reactor's pipeline: holds its upstream subscription under the
/// reactor's gate, so cancelling races neither a late subscription nor a value.
class GatedSink<Action, Mutation, State> {
    let storage: ReactorStorage<Action, Mutation, State>
    @exclusivity(unchecked) private var subscription: SubscriptionRef?
    @exclusivity(unchecked) private var cancelled = false
    @exclusivity(unchecked) var queuedInGate = 0

    init(_ storage: ReactorStorage<Action, Mutation, State>) { self.storage = storage }

    func receive(subscription: Subscription) {
        let accepted = storage.gate.withLock { () -> Bool in
            guard !cancelled, self.subscription == nil else { return false }
            self.subscription = SubscriptionRef(subscription)
            return true
        }
        if accepted { subscription.request(.unlimited) } else { subscription.cancel() }
    }

    /// Ignored: a merged stream that ends must not end the reactor's state stream.
    func receive(completion: Subscribers.Completion<Never>) {}

    func cancel() {
        let subscription = storage.gate.withLock { () -> SubscriptionRef? in
            cancelled = true
            defer { self.subscription = nil }
            return self.subscription
        }
        subscription?.cancel()
    }
}

/// The end of the mutation stream: `scan(initialState, reduce)`, under the gate.
final class ReduceSink<Action, Mutation, State>: GatedSink<Action, Mutation, State>,
    Subscriber, Cancellable, GateWork
{
    typealias Input = Mutation
    typealias Failure = Never

    func receive(_ mutation: Mutation) -> Subscribers.Demand {
        // A mutation caused while a state is being reduced or delivered (say a state
        // subscriber sends to a merged subject) waits its turn: reduce never re-enters.
        storage.gate.dispatch(self, mutation)
        return .none
    }

    func perform(_ mutation: Mutation) { storage.reduceAndEmit(mutation) }
}

/// The end of the state stream, after `transform(state:)`: sets `currentState`, then
/// delivers to `reactor.state` subscribers (the replayed, hot stream), under the gate.
final class StateSink<Action, Mutation, State>: GatedSink<Action, Mutation, State>,
    Subscriber, Cancellable, GateWork
{
    typealias Input = State
    typealias Failure = Never

    func receive(_ state: State) -> Subscribers.Demand {
        // Synchronous states arrive on the holder's thread and go straight through; an
        // asynchronous transform(state:) delivers from elsewhere and enters the gate.
        storage.gate.dispatch(self, state, deferWhileEmitting: false)
        return .none
    }

    func perform(_ state: State) { storage.publish(state) }
}
