internal import ConcurrencyPrimitives

/// Merges any number of publishers (OpenCombine has no `Merge`).
///
/// - Demand: downstream demand is forwarded to every upstream; what arrives beyond it is
///   buffered and delivered, in arrival order, as demand comes.
/// - Completion: finished once every upstream has finished (after the buffer is
///   delivered); the first failure cancels the others and is passed on.
/// - Cancellation cancels every upstream.
/// - Values from upstreams on different threads are delivered one at a time (a recursive
///   lock, as Combine's own operators do, so a synchronous re-entrant emission works).
struct MergePublisher<Output, Failure: Error>: Publisher {
    let upstreams: [AnyPublisher<Output, Failure>]

    init(_ upstreams: [AnyPublisher<Output, Failure>]) { self.upstreams = upstreams }

    func receive<S: Subscriber>(subscriber: S) where S.Input == Output, S.Failure == Failure {
        let subscription = MergeSubscription(downstream: subscriber, count: upstreams.count)
        subscriber.receive(subscription: subscription)
        subscription.subscribe(upstreams)
    }
}

private final class MergeSubscription<Downstream: Subscriber>: Subscription {
    typealias Output = Downstream.Input
    typealias Failure = Downstream.Failure

    private let lock = Mutex()
    private let deliveryLock = Mutex(recursive: true)
    // Guarded by `lock`.
    /// Not optional (an optional of a generic type costs a metadata lookup per use);
    /// `active` says whether it may still be called.
    private let target: Downstream
    @exclusivity(unchecked) private var active = true
    /// The upstreams' subscriptions by index: the first two in place (a reactor merges two,
    /// its mutations and a global subject), the rest in `others`. (An array of all of them was
    /// one more allocation per reactor.)
    @exclusivity(unchecked) private var first: SubscriptionRef?
    @exclusivity(unchecked) private var second: SubscriptionRef?
    @exclusivity(unchecked) private var others: [SubscriptionRef?]
    @exclusivity(unchecked) private var remaining: Int
    @exclusivity(unchecked) private var demand = Subscribers.Demand.none
    @exclusivity(unchecked) private var buffer: [Output] = []
    @exclusivity(unchecked) private var bufferHead = 0

    init(downstream: Downstream, count: Int) {
        target = downstream
        others = count > 2 ? Array(repeating: nil, count: count - 2) : []
        remaining = count
    }

    func subscribe(_ publishers: [AnyPublisher<Output, Failure>]) {
        if publishers.isEmpty {
            finishIfDone()
            return
        }
        for (index, publisher) in publishers.enumerated() {
            publisher.receive(subscriber: MergeInner(parent: self, index: index))
        }
    }

    // MARK: From upstreams

    func receive(subscription: Subscription, index: Int) {
        let forward = lock.withLock { () -> Subscribers.Demand? in
            guard active else { return nil }
            setUpstream(SubscriptionRef(subscription), at: index)
            return demand
        }
        guard let forward else {
            subscription.cancel()
            return
        }
        if forward > 0 { subscription.request(forward) }
    }

    func receive(_ value: Output) {
        deliveryLock.lock()
        defer { deliveryLock.unlock() }
        lock.lock()
        guard active else {
            lock.unlock()
            return
        }
        guard demand > 0, bufferHead == buffer.count else {
            buffer.append(value)
            lock.unlock()
            return
        }
        if demand != .unlimited { demand -= 1 }
        lock.unlock()
        let more = target.receive(value)
        if more > 0 {
            lock.lock()
            demand += more
            lock.unlock()
        }
    }

    func receive(completion: Subscribers.Completion<Failure>, index: Int) {
        switch completion {
        case .finished:
            lock.withLock {
                setUpstream(nil, at: index)
                remaining -= 1
            }
            finishIfDone()
        case .failure:
            let (wasActive, cancelled) = lock.withLock { () -> (Bool, [SubscriptionRef]) in
                setUpstream(nil, at: index)
                defer { clear() }
                return (active, self.upstreams)
            }
            for upstream in cancelled { upstream.cancel() }
            if wasActive { deliveryLock.withLock { target.receive(completion: completion) } }
        }
    }

    // MARK: From downstream

    func request(_ more: Subscribers.Demand) {
        let upstreams = lock.withLock { () -> [SubscriptionRef] in
            guard active else { return [] }
            demand += more
            return self.upstreams
        }
        drain()
        for upstream in upstreams { upstream.request(more) }
    }

    func cancel() {
        let upstreams = lock.withLock { () -> [SubscriptionRef] in
            defer { clear() }
            return self.upstreams
        }
        for upstream in upstreams { upstream.cancel() }
    }

    // MARK: Private

    /// Delivers buffered values while there is demand, then finishes if all is done.
    private func drain() {
        deliveryLock.lock()
        defer { deliveryLock.unlock() }
        while true {
            lock.lock()
            guard active, demand > 0, bufferHead < buffer.count else {
                lock.unlock()
                break
            }
            if demand != .unlimited { demand -= 1 }
            let value = buffer[bufferHead]
            bufferHead += 1
            if bufferHead == buffer.count {
                buffer.removeAll(keepingCapacity: true)
                bufferHead = 0
            }
            lock.unlock()
            let more = target.receive(value)
            if more > 0 { lock.withLock { demand += more } }
        }
        finishIfDone()
    }

    private func finishIfDone() {
        deliveryLock.lock()
        defer { deliveryLock.unlock() }
        let finish = lock.withLock { () -> Bool in
            guard active, remaining == 0, bufferHead == buffer.count else { return false }
            clear()
            return true
        }
        if finish { target.receive(completion: .finished) }
    }

    /// The upstreams' subscriptions held now. Under `lock`.
    private var upstreams: [SubscriptionRef] {
        [first, second].compactMap { $0 } + others.compactMap { $0 }
    }

    /// Under `lock`.
    private func setUpstream(_ subscription: SubscriptionRef?, at index: Int) {
        switch index {
        case 0: first = subscription
        case 1: second = subscription
        default: others[index - 2] = subscription
        }
    }

    /// Under `lock`.
    private func clear() {
        active = false
        first = nil
        second = nil
        others = []
        buffer = []
        bufferHead = 0
    }
}

/// A struct, held inside its upstream's subscription: a class was one more allocation per
/// upstream.
private struct MergeInner<Downstream: Subscriber>: Subscriber {
    typealias Input = Downstream.Input
    typealias Failure = Downstream.Failure

    private let parent: MergeSubscription<Downstream>
    private let index: Int
    let combineIdentifier = CombineIdentifier()

    init(parent: MergeSubscription<Downstream>, index: Int) {
        self.parent = parent
        self.index = index
    }

    func receive(subscription: Subscription) { parent.receive(subscription: subscription, index: index) }

    func receive(_ input: Input) -> Subscribers.Demand {
        parent.receive(input)
        return .none
    }

    func receive(completion: Subscribers.Completion<Failure>) {
        parent.receive(completion: completion, index: index)
    }
}
