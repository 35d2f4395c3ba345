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
    @exclusivity(unchecked) private var queue: [QueuedWork] = []

    /// How many items the holder's own thread queued that have not run yet (see `QueuedWork`).
    /// Only the holder touches it.
    @exclusivity(unchecked) private var ownQueued = 0

    /// Work queued for the holder; `isForeign` when another thread queued it (an effect's
    /// value, a merged stream's, an action waiting its turn), not the holder's own run.
    private struct QueuedWork {
        let run: () -> Void
        let isForeign: Bool
    }

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
        drainAndLeave(context, ownRunPending: false, ownRunDone: {})
    }

    /// `exit`; with `ownRunPending`, it calls `ownRunDone`, still holding the gate, once the
    /// holder's own run is over (nothing it queued itself is left): before the next work another
    /// thread queued, or before letting go. So a caller sees the state its own work left, without
    /// what other threads delivered after it. (What they queued before an item of its own, which
    /// must wait its turn behind theirs, runs first, and is in that state.)
    @inline(__always)
    private func drainAndLeave(_ context: ThreadContext, ownRunPending: Bool, ownRunDone: () -> Void) {
        var ownRunPending = ownRunPending
        while true {
            mutex.lock()
            if ownRunPending && (queue.isEmpty || closed) {
                // Unlocked: what it does may queue more work, which then runs before letting go.
                mutex.unlock()
                ownRunPending = false
                ownRunDone()
                continue
            }
            if queue.isEmpty || closed {
                let dropped = queue
                queue = []
                ownQueued = 0
                busy = false
                if waiters > 0 { condition?.signal() }
                mutex.unlock()
                context.pop(self)
                _ = dropped  // released outside the lock
                return
            }
            var batch: [QueuedWork] = []
            swap(&batch, &queue)
            mutex.unlock()
            for work in batch {
                if work.isForeign {
                    if ownRunPending && ownQueued == 0 {
                        ownRunPending = false
                        ownRunDone()
                    }
                } else {
                    ownQueued -= 1
                }
                work.run()
            }
        }
    }

    /// Queues work for the holder, or, when the gate turned out free, runs it here.
    func submit(_ work: @escaping () -> Void) {
        mutex.lock()
        if closed {
            mutex.unlock()
            return
        }
        let context = ThreadContext.current
        if busy {
            // The holder's own (a stage flushing what it buffered), or another thread's.
            let isOwn = context.holds(self)
            queue.append(QueuedWork(run: work, isForeign: !isOwn))
            if isOwn { ownQueued += 1 }
            mutex.unlock()
            return
        }
        busy = true
        mutex.unlock()
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
    private func appendLocked<W: GateWork>(_ work: W, _ item: W.Item, _ context: ThreadContext, isForeign: Bool) {
        work.queuedInGate += 1
        let cause = context.cause
        let run = { [self] in
            mutex.lock()
            work.queuedInGate -= 1
            mutex.unlock()
            ChangeCause.with(cause) { work.perform(item) }
        }
        queue.append(QueuedWork(run: run, isForeign: isForeign))
    }

    /// From the holder: run `item` now, unless it must wait its turn (it is emitting and
    /// `deferWhileEmitting`, or earlier items of the same work are queued).
    @inline(__always)
    private func performHeld<W: GateWork>(_ work: W, _ item: W.Item, defer deferring: Bool, _ context: ThreadContext) {
        mutex.lock()
        if deferring || work.queuedInGate > 0 {
            if !closed {
                appendLocked(work, item, context, isForeign: false)
                ownQueued += 1
            }
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
            appendLocked(work, item, context, isForeign: true)
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
        dispatchWaiting(work, item, queueWhenHeld: queueWhenHeld, reportingOwnRun: false, ownRunDone: {})
    }

    /// `dispatchWaiting`, calling `ownRunDone` once in every case: as `drainAndLeave` does when
    /// this thread ran the work, at once when it was queued or the gate is closed.
    @inline(__always)
    func dispatchWaiting<W: GateWork>(_ work: W, _ item: W.Item, queueWhenHeld: Bool, ownRunDone: () -> Void) {
        dispatchWaiting(work, item, queueWhenHeld: queueWhenHeld, reportingOwnRun: true, ownRunDone: ownRunDone)
    }

    @inline(__always)
    private func dispatchWaiting<W: GateWork>(
        _ work: W, _ item: W.Item, queueWhenHeld: Bool, reportingOwnRun: Bool, ownRunDone: () -> Void
    ) {
        let context = ThreadContext.current
        if context.holds(self) {
            performHeld(work, item, defer: queueWhenHeld, context)
        } else if tryEnter(context) {
            work.perform(item)
            return drainAndLeave(context, ownRunPending: reportingOwnRun, ownRunDone: ownRunDone)
        } else if context.holdsAnyGate {
            performOrQueue(work, item, context)
        } else if enter(context) {
            work.perform(item)
            return drainAndLeave(context, ownRunPending: reportingOwnRun, ownRunDone: ownRunDone)
        }
        if reportingOwnRun { ownRunDone() }
    }
}
