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
    @exclusivity(unchecked) private var upstreams: [Subscription?]
    @exclusivity(unchecked) private var remaining: Int
    @exclusivity(unchecked) private var demand = Subscribers.Demand.none
    @exclusivity(unchecked) private var buffer: [Output] = []
    @exclusivity(unchecked) private var bufferHead = 0

    init(downstream: Downstream, count: Int) {
        target = downstream
        upstreams = Array(repeating: nil, count: count)
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
            upstreams[index] = subscription
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
                upstreams[index] = nil
                remaining -= 1
            }
            finishIfDone()
        case .failure:
            let (wasActive, others) = lock.withLock { () -> (Bool, [Subscription]) in
                upstreams[index] = nil
                let others = upstreams.compactMap { $0 }
                defer { clear() }
                return (active, others)
            }
            for other in others { other.cancel() }
            if wasActive { deliveryLock.withLock { target.receive(completion: completion) } }
        }
    }

    // MARK: From downstream

    func request(_ more: Subscribers.Demand) {
        let upstreams = lock.withLock { () -> [Subscription] in
            guard active else { return [] }
            demand += more
            return self.upstreams.compactMap { $0 }
        }
        drain()
        for upstream in upstreams { upstream.request(more) }
    }

    func cancel() {
        let upstreams = lock.withLock { () -> [Subscription] in
            defer { clear() }
            return self.upstreams.compactMap { $0 }
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

    /// Under `lock`.
    private func clear() {
        active = false
        upstreams = upstreams.map { _ in nil }
        buffer = []
        bufferHead = 0
    }
}

private final class MergeInner<Downstream: Subscriber>: Subscriber {
    typealias Input = Downstream.Input
    typealias Failure = Downstream.Failure

    private let parent: MergeSubscription<Downstream>
    private let index: Int

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
