internal import ConcurrencyPrimitives

/// Concatenates any number of publishers: each is subscribed when the one before has
/// finished. Outstanding demand carries over to the next; a failure ends the whole; a
/// long run of publishers that finish synchronously is walked in a loop, not recursion.
struct ConcatPublisher<Output, Failure: Error>: Publisher {
    let upstreams: [AnyPublisher<Output, Failure>]

    init(_ upstreams: [AnyPublisher<Output, Failure>]) { self.upstreams = upstreams }

    func receive<S: Subscriber>(subscriber: S) where S.Input == Output, S.Failure == Failure {
        let subscription = ConcatSubscription(downstream: subscriber, upstreams: upstreams)
        subscriber.receive(subscription: subscription)
        subscription.advance()
    }
}

private final class ConcatSubscription<Downstream: Subscriber>: Subscription {
    typealias Output = Downstream.Input
    typealias Failure = Downstream.Failure

    private let lock = Mutex()
    // Guarded by `lock`.
    private var downstream: Box<Downstream>?
    private var upstreams: [AnyPublisher<Output, Failure>]
    private var next = 0
    private var current: Subscription?
    private var demand = Subscribers.Demand.none
    private var advancing = false
    private var advanceAgain = false

    init(downstream: Downstream, upstreams: [AnyPublisher<Output, Failure>]) {
        self.downstream = Box(downstream)
        self.upstreams = upstreams
    }

    /// Subscribes the next upstream, or finishes when there is none.
    func advance() {
        lock.lock()
        if advancing {
            // Called from inside a subscribe that finished synchronously: the loop below
            // picks it up.
            advanceAgain = true
            lock.unlock()
            return
        }
        advancing = true
        while true {
            advanceAgain = false
            guard let downstream else { break }
            guard next < upstreams.count else {
                self.downstream = nil
                upstreams = []
                lock.unlock()
                downstream.value.receive(completion: .finished)
                lock.lock()
                break
            }
            let publisher = upstreams[next]
            next += 1
            let generation = next
            lock.unlock()
            publisher.receive(subscriber: ConcatInner(parent: self, generation: generation))
            lock.lock()
            if !advanceAgain { break }
        }
        advancing = false
        lock.unlock()
    }

    // MARK: From the current upstream

    func receive(subscription: Subscription, generation: Int) {
        let forward = lock.withLock { () -> Subscribers.Demand? in
            guard downstream != nil, generation == next else { return nil }
            current = subscription
            return demand
        }
        guard let forward else {
            subscription.cancel()
            return
        }
        if forward > 0 { subscription.request(forward) }
    }

    func receive(_ value: Output, generation: Int) -> Subscribers.Demand {
        let target = lock.withLock { () -> Box<Downstream>? in
            guard generation == next, let downstream else { return nil }
            if demand != .unlimited && demand > 0 { demand -= 1 }
            return downstream
        }
        guard let target else { return .none }
        let more = target.value.receive(value)
        if more > 0 { lock.withLock { demand += more } }
        return more
    }

    func receive(completion: Subscribers.Completion<Failure>, generation: Int) {
        let (isCurrent, target) = lock.withLock { () -> (Bool, Box<Downstream>?) in
            guard generation == next, downstream != nil else { return (false, nil) }
            current = nil
            if case .failure = completion {
                defer {
                    downstream = nil
                    upstreams = []
                }
                return (true, downstream)
            }
            return (true, nil)
        }
        guard isCurrent else { return }
        if let target {
            target.value.receive(completion: completion)
        } else {
            advance()
        }
    }

    // MARK: From downstream

    func request(_ more: Subscribers.Demand) {
        let current = lock.withLock { () -> Subscription? in
            guard downstream != nil else { return nil }
            demand += more
            return self.current
        }
        current?.request(more)
    }

    func cancel() {
        let current = lock.withLock { () -> Subscription? in
            downstream = nil
            upstreams = []
            defer { self.current = nil }
            return self.current
        }
        current?.cancel()
    }
}

private final class ConcatInner<Downstream: Subscriber>: Subscriber {
    typealias Input = Downstream.Input
    typealias Failure = Downstream.Failure

    private let parent: ConcatSubscription<Downstream>
    private let generation: Int

    init(parent: ConcatSubscription<Downstream>, generation: Int) {
        self.parent = parent
        self.generation = generation
    }

    func receive(subscription: Subscription) {
        parent.receive(subscription: subscription, generation: generation)
    }

    func receive(_ input: Input) -> Subscribers.Demand {
        parent.receive(input, generation: generation)
    }

    func receive(completion: Subscribers.Completion<Failure>) {
        parent.receive(completion: completion, generation: generation)
    }
}
