internal import ConcurrencyPrimitives

/// Emits from inside a `.run` effect: `await send(.setItems(items))`.
/// Values sent after the task was cancelled are dropped.
public struct Send<Value>: Sendable {
    private let deliver: @Sendable (Value) -> Void

    init(_ deliver: @escaping @Sendable (Value) -> Void) { self.deliver = deliver }

    /// Sends `value` to the effect's subscriber (for a reactor: into its serial gate;
    /// it is reduced on this thread if the gate is free, or queued for the thread
    /// holding it). Never waits for the gate.
    public func callAsFunction(_ value: Value) async {
        guard !Task.isCancelled else { return }
        deliver(value)
    }
}

/// The `.run` effect: a task per subscription.
struct RunPublisher<Output>: Publisher {
    typealias Failure = Never

    let priority: TaskPriority?
    let operation: @Sendable (Send<Output>) async -> Void

    func receive<S: Subscriber>(subscriber: S) where S.Input == Output, S.Failure == Never {
        let subscription = RunSubscription(downstream: subscriber)
        subscriber.receive(subscription: subscription)
        subscription.start(priority: priority, operation: operation)
    }
}

/// What a `.run` task calls on its subscription.
private protocol RunTarget<Output>: AnyObject, Sendable {
    associatedtype Output
    func emit(_ value: Output)
    func finish()
}

// why: OpenCombine hands over the subscriber as a plain parameter, and the task calls it outside the lock; in a Guarded: "type 'Box<Downstream>' does not conform to the 'Sendable' protocol".
private final class RunSubscription<Downstream: Subscriber>: Subscription, RunTarget, @unchecked Sendable
where Downstream.Failure == Never {
    typealias Output = Downstream.Input

    private let lock = Mutex()
    /// Serialises calls into the downstream: the operation may send from child tasks.
    private let deliveryLock = Mutex(recursive: true)
    // Guarded by `lock`.
    private var downstream: Box<Downstream>?
    private var demand = Subscribers.Demand.none
    private var buffer: [Output] = []
    private var finished = false
    private var task: Task<Void, Never>?

    init(downstream: Downstream) { self.downstream = Box(downstream) }

    func start(priority: TaskPriority?, operation: @escaping @Sendable (Send<Output>) async -> Void) {
        // The task reaches this subscription as a RunTarget: its closures then capture no
        // Downstream metatype, which the subscriber's type need not let cross threads.
        let target: any RunTarget<Output> = self
        let task = Task(priority: priority) {
            await operation(Send { value in target.emit(value) })
            target.finish()
        }
        let cancelled = lock.withLock { () -> Bool in
            guard downstream != nil else { return true }
            self.task = task
            return false
        }
        if cancelled { task.cancel() }
    }

    func emit(_ value: Output) {
        deliveryLock.lock()
        defer { deliveryLock.unlock() }
        lock.lock()
        guard let downstream else {
            lock.unlock()
            return
        }
        guard demand > 0, buffer.isEmpty else {
            buffer.append(value)
            lock.unlock()
            return
        }
        if demand != .unlimited { demand -= 1 }
        lock.unlock()
        let more = downstream.value.receive(value)
        if more > 0 { lock.withLock { demand += more } }
    }

    func finish() {
        lock.withLock { finished = true }
        drain()
    }

    /// Delivers buffered values while there is demand; completes once the operation has
    /// returned and everything is delivered.
    private func drain() {
        deliveryLock.lock()
        defer { deliveryLock.unlock() }
        while true {
            lock.lock()
            guard let downstream else {
                lock.unlock()
                return
            }
            if demand > 0, !buffer.isEmpty {
                if demand != .unlimited { demand -= 1 }
                let value = buffer.removeFirst()
                lock.unlock()
                let more = downstream.value.receive(value)
                if more > 0 { lock.withLock { demand += more } }
                continue
            }
            let complete = finished && buffer.isEmpty
            if complete {
                self.downstream = nil
                task = nil
            }
            lock.unlock()
            if complete { downstream.value.receive(completion: .finished) }
            return
        }
    }

    func request(_ more: Subscribers.Demand) {
        lock.withLock { demand += more }
        drain()
    }

    func cancel() {
        let task = lock.withLock { () -> Task<Void, Never>? in
            downstream = nil
            buffer = []
            defer { self.task = nil }
            return self.task
        }
        task?.cancel()
    }
}
