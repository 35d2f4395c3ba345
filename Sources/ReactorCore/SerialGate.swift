internal import ConcurrencyPrimitives

/// Work a gate runs for one kind of item (an action, a mutation, a state).
/// A protocol rather than a closure so the common, uncontended path allocates nothing.
protocol GateWork: AnyObject {
    associatedtype Item
    func perform(_ item: Item)
    /// How many of this work's items wait in the gate's queue; guarded by the gate's
    /// lock. While some wait, a new item queues behind them instead of running inline,
    /// so one source's values are never reordered (say a `flatMap` that delivers one
    /// value from another thread, queued, and the next on the holder's thread).
    var queuedInGate: Int { get set }
}

/// The one serial gate of a reactor: everything that reaches `reduce` and the state
/// subscribers passes through it, so they never run concurrently for one reactor.
///
/// - A thread that finds the gate free takes it, runs its work inline, then drains what
///   other threads queued meanwhile before letting go (nothing queued is ever left behind).
/// - A thread that finds it held by another thread queues its work for the holder and
///   returns (`dispatch`), or, for `action.send`, waits for the gate (`dispatchWaiting`),
///   but only if it holds no gate itself: a holder that waited could deadlock.
/// - Work that arrives on the holder's own thread while a state is being reduced or
///   delivered (`isEmitting`) is queued and runs after the current work (ReactorKit #260).
final class SerialGate {
    /// Also the lock of the reactor's small shared state (see `withLock`) and of the pipeline
    /// stages that belong to this reactor alone: sections under it are short and never call out.
    let mutex = Mutex()
    /// What `enter` waits on for a busy gate; made on the first such wait, under `mutex`, so an
    /// uncontended reactor never pays for it.
    @exclusivity(unchecked) private var condition: Condition?
    @exclusivity(unchecked) private var busy = false
    @exclusivity(unchecked) private var closed = false
    /// True while the holder reduces a mutation or delivers a state. Only the holder
    /// touches it. (Beside the other flags: a word they share, not one of its own.)
    @exclusivity(unchecked) var isEmitting = false
    @exclusivity(unchecked) private var waiters = 0
    @exclusivity(unchecked) private var queue: [() -> Void] = []

    /// Small state shared with the gate's owner (current state, subscriber lists): one
    /// mutex per reactor instead of several.
    @inline(__always) func withLock<T>(_ body: () throws -> T) rethrows -> T {
        try mutex.withLock(body)
    }

    @inline(__always) func lock() { mutex.lock() }
    @inline(__always) func unlock() { mutex.unlock() }

    // MARK: Entering and leaving

    /// Takes the gate if it is free. Never blocks.
    func tryEnter(_ context: ThreadContext) -> Bool {
        mutex.lock()
        guard !busy, !closed else {
            mutex.unlock()
            return false
        }
        busy = true
        mutex.unlock()
        context.push(self)
        return true
    }

    /// Waits until the gate is free and takes it. False when the gate was closed.
    func enter(_ context: ThreadContext) -> Bool {
        mutex.lock()
        while busy && !closed {
            waiters += 1
            let condition = self.condition ?? makeCondition()
            condition.wait(on: mutex)
            waiters -= 1
        }
        guard !closed else {
            mutex.unlock()
            return false
        }
        busy = true
        mutex.unlock()
        context.push(self)
        return true
    }

    /// Under `mutex`.
    private func makeCondition() -> Condition {
        let made = Condition()
        condition = made
        return made
    }

    /// Runs what was queued meanwhile, then lets the gate go. Only the holder calls it.
    func exit(_ context: ThreadContext) {
        while true {
            mutex.lock()
            if queue.isEmpty || closed {
                let dropped = queue
                queue = []
                busy = false
                if waiters > 0 { condition?.signal() }
                mutex.unlock()
                context.pop(self)
                _ = dropped  // released outside the lock
                return
            }
            var batch: [() -> Void] = []
            swap(&batch, &queue)
            mutex.unlock()
            for work in batch { work() }
        }
    }

    /// Queues work for the holder, or, when the gate turned out free, runs it here.
    func submit(_ work: @escaping () -> Void) {
        mutex.lock()
        if closed {
            mutex.unlock()
            return
        }
        if busy {
            queue.append(work)
            mutex.unlock()
            return
        }
        busy = true
        mutex.unlock()
        let context = ThreadContext.current
        context.push(self)
        work()
        exit(context)
    }

    /// Closes the gate for good: queued work is dropped, waiters are released, and
    /// nothing runs through it again.
    func close() {
        mutex.lock()
        closed = true
        let dropped = queue
        queue = []
        condition?.broadcast()
        mutex.unlock()
        _ = dropped
    }

    // MARK: Dispatching

    /// Queues `item` for `work` (the caller holds the gate, or found it busy under
    /// `mutex`, which it still holds).
    /// It runs with the cause of the thread that queued it (`ChangeCause`).
    private func appendLocked<W: GateWork>(_ work: W, _ item: W.Item, _ context: ThreadContext) {
        work.queuedInGate += 1
        let cause = context.cause
        queue.append { [self] in
            mutex.lock()
            work.queuedInGate -= 1
            mutex.unlock()
            ChangeCause.with(cause) { work.perform(item) }
        }
    }

    /// From the holder: run `item` now, unless it must wait its turn (it is emitting and
    /// `deferWhileEmitting`, or earlier items of the same work are queued).
    @inline(__always)
    private func performHeld<W: GateWork>(_ work: W, _ item: W.Item, defer deferring: Bool, _ context: ThreadContext) {
        mutex.lock()
        if deferring || work.queuedInGate > 0 {
            if !closed { appendLocked(work, item, context) }
            mutex.unlock()
            return
        }
        mutex.unlock()
        work.perform(item)
    }

    /// From a thread that doesn't hold the gate: take it and run `item`, or queue it for
    /// the holder. Never blocks.
    private func performOrQueue<W: GateWork>(_ work: W, _ item: W.Item, _ context: ThreadContext) {
        mutex.lock()
        if closed {
            mutex.unlock()
            return
        }
        if busy {
            appendLocked(work, item, context)
            mutex.unlock()
            return
        }
        busy = true
        mutex.unlock()
        context.push(self)
        work.perform(item)
        exit(context)
    }

    /// Runs `work` for `item` under the gate without ever blocking: inline when the
    /// calling thread holds the gate (queued instead while emitting, if
    /// `deferWhileEmitting`), inline after taking a free gate, else queued for the holder.
    @inline(__always)
    func dispatch<W: GateWork>(_ work: W, _ item: W.Item, deferWhileEmitting: Bool = true) {
        let context = ThreadContext.current
        if context.holds(self) {
            performHeld(work, item, defer: deferWhileEmitting && isEmitting, context)
        } else {
            performOrQueue(work, item, context)
        }
    }

    /// Like `dispatch`, but a thread that holds no gate waits for a busy gate and runs
    /// the work itself, so the caller returns only after the work (and all it caused
    /// synchronously) is done. `queueWhenHeld`: from the holder's own thread, queue
    /// behind the current work (an action sent from inside the pipeline).
    @inline(__always)
    func dispatchWaiting<W: GateWork>(_ work: W, _ item: W.Item, queueWhenHeld: Bool) {
        let context = ThreadContext.current
        if context.holds(self) {
            performHeld(work, item, defer: queueWhenHeld, context)
        } else if tryEnter(context) {
            work.perform(item)
            exit(context)
        } else if context.holdsAnyGate {
            performOrQueue(work, item, context)
        } else if enter(context) {
            work.perform(item)
            exit(context)
        }
    }
}
