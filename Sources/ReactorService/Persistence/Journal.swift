import ConcurrencyPrimitives
import MicroHTTP
import ReactorStore

#if canImport(FoundationEssentials)
import FoundationEssentials
#else
import Foundation
#endif

/// A session with changes the store has not got yet (its hub, in practice).
protocol Journaled: AnyObject, Sendable {
    /// What changed since the last take, or nil when nothing is to be written. Called on the
    /// journal's thread; the change is in flight until `didCommit` or `commitFailed`.
    func takeChange() -> SessionWrite?
    /// The change taken is durable: its events may now reach subscribers.
    func didCommit()
    /// The change taken is lost with its batch, for `reason`.
    func commitFailed(_ reason: StoreError)
}

/// Group commit: one thread writes, in one transaction, every change that arrived while the
/// previous transaction ran, then lets each change's events reach subscribers and answers the
/// requests that waited for it. Under load a transaction carries many requests, so the cost
/// of making them durable is shared; an idle journal commits a lone change at once.
final class Journal: Sendable {
    typealias Completion = @Sendable (StoreError?) -> Void

    /// The most sessions one transaction writes. A user change writes every session in memory:
    /// in one transaction SQLite's WAL grew by about a page a session (hundreds of MB at 100,000
    /// sessions), past the bound its checkpoints keep between transactions.
    static let sessionsPerTransaction = 128

    let engine: any StoreEngine
    private let historyLength: Int
    private let actionLogLength: Int
    private struct Queue {
        var dirty: [any Journaled] = []
        var changes: [StoreChange] = []
        /// Each with the session its change is about, when it wrote one (a delete), and whether it
        /// waits for everything queued before it (`whenCommitted`) or for its own changes (`write`).
        var completions: [Waiter] = []
        var stopping = false
        var stopped = false

        var isEmpty: Bool { dirty.isEmpty && changes.isEmpty && completions.isEmpty }
    }
    private let queue = Locked(Queue())
    /// When the write in progress started (`ProcessClock`); nil between writes.
    private let writeStarted = Locked<Double?>(nil)

    /// Seconds the write in progress has taken so far; nil between writes.
    var writeInProgressFor: Double? { writeStarted.current.map { ProcessClock.now - $0 } }
    /// Signalled, under `queue`'s lock, when work arrives, a stop is asked for, or the thread ends.
    private let changed = Condition()
    private let failures: StoreFailureLog

    init(engine: any StoreEngine, historyLength: Int, actionLogLength: Int = 0, failures: StoreFailureLog) {
        self.engine = engine
        self.historyLength = historyLength
        self.actionLogLength = actionLogLength
        self.failures = failures
        do throws(PlatformThreadError) {
            try PlatformThread.detached { [self] in run() }
        } catch {
            preconditionFailure("cannot start the reactord.journal thread: error \(error.code)")
        }
    }

    /// `entry` has a change to write in the next transaction. Call once per change burst
    /// (the entry remembers it is queued until its `takeChange`).
    func markDirty(_ entry: any Journaled) {
        queue.withLock { queue in
            queue.dirty.append(entry)
            changed.signal()
        }
    }

    /// Writes `changes` after the sessions' pending changes (in the transaction of the last of
    /// them, or the only one), then calls `completion` with nil once they are durable, or with
    /// the reason they are not.
    func write(_ changes: [StoreChange], then completion: @escaping Completion) {
        submit(changes, completion)
    }

    /// Calls `completion` once everything queued before this call is durable (nil) or lost.
    func whenCommitted(_ completion: @escaping Completion) {
        submit([], completion)
    }

    /// Writes what is queued, answers its waiters and ends the thread; later calls are
    /// answered at once with `unavailable`.
    func stop() {
        queue.withLock { queue in
            queue.stopping = true
            changed.broadcast()
        }
        queue.withLock(waitingOn: changed, until: \.stopped) { _, _ in }
    }

    private func submit(_ submitted: [StoreChange], _ completion: @escaping Completion) {
        var session: String?
        for case let .delete(id, _, _) in submitted { session = id }
        let stopped = queue.withLock { queue in
            if queue.stopped { return true }
            queue.changes += submitted
            queue.completions.append(Waiter(session: session, waitsForAll: submitted.isEmpty, completion: completion))
            changed.signal()
            return false
        }
        if stopped { completion(.stopping) }
    }

    private func run() {
        while true {
            let taken: Queue? = queue.withLock(waitingOn: changed, until: { !$0.isEmpty || $0.stopping }) { queue, _ in
                if queue.isEmpty {
                    queue.stopped = true
                    changed.broadcast()
                    return nil
                }
                defer {
                    queue.dirty = []
                    queue.changes = []
                    queue.completions = []
                }
                return queue
            }
            guard let taken else { return }
            commit(taken.dirty, taken.changes, taken.completions)
        }
    }

    private func commit(
        _ entries: [any Journaled], _ explicit: [StoreChange],
        _ waiting: [Waiter]
    ) {
        // A second reactor of a session already in the batch (in a cluster: one let go as its
        // lease lapsed, one claimed since) is committed in a transaction after it: the store
        // refuses per session, and one's refusal must not be the other's.
        var rounds: [[(entry: any Journaled, write: SessionWrite)]] = [[]]
        var roundOf: [String: Int] = [:]
        rounds[0].reserveCapacity(entries.count)
        for entry in entries {
            guard let write = entry.takeChange() else { continue }
            var round = 0
            if entries.count > 1 {
                round = roundOf[write.id].map { $0 + 1 } ?? 0
                roundOf[write.id] = round
            }
            if round == rounds.count { rounds.append([]) }
            rounds[round].append((entry, write))
        }
        // Each round in transactions of at most `sessionsPerTransaction` sessions, the first
        // round's last carrying the explicit changes after the sessions' own writes. (A later
        // round's write of a session deleted there is refused by the store: its row is gone.)
        var transactions: [(round: Int, writes: ArraySlice<(entry: any Journaled, write: SessionWrite)>)] = []
        for (index, round) in rounds.enumerated() {
            var start = 0
            repeat {
                let end = min(start + Self.sessionsPerTransaction, round.count)
                transactions.append((index, round[start..<end]))
                start = end
            } while start < round.count
        }
        let carrying = transactions.lastIndex { $0.round == 0 } ?? 0
        var outcomes: [Outcome] = []
        outcomes.reserveCapacity(transactions.count)
        for (index, transaction) in transactions.enumerated() {
            // After a failure the rest is not tried: a stalled store would cost each its timeout,
            // and a batch fails as a whole, as one transaction did.
            if let failed = outcomes.last?.failure {
                outcomes.append(Outcome(failure: failed))
                continue
            }
            outcomes.append(commit(transaction.writes.map { .session($0.write) } + (index == carrying ? explicit : [])))
        }
        let failure = outcomes.lazy.compactMap(\.failure).first
        let refusedInFirstRound = outcomes[...carrying].reduce(into: Set<String>()) { $0.formUnion($1.refused) }
        // Every stream and request this batch wakes is resumed together at its end.
        EventStream.batchingResumes {
            for (transaction, outcome) in zip(transactions, outcomes) {
                for (entry, write) in transaction.writes {
                    if let failure = outcome.failure(of: write.id) {
                        entry.commitFailed(failure)
                    } else {
                        entry.didCommit()
                    }
                }
            }
            // Answered after every transaction: a `write` by the one that carried its changes (and
            // every one before it), a `whenCommitted` by all that was queued before it.
            let firstRound = Outcome(refused: refusedInFirstRound)
            for waiter in waiting {
                let failed = waiter.waitsForAll ? failure : outcomes[carrying].failure
                waiter.completion(failed ?? firstRound.failure(of: waiter.session))
            }
        }
    }

    private struct Waiter {
        let session: String?
        let waitsForAll: Bool
        let completion: Completion
    }

    /// One transaction's outcome: its failure, or the sessions whose changes the store refused.
    private struct Outcome {
        var failure: StoreError?
        var refused: Set<String> = []

        func failure(of session: String?) -> StoreError? {
            failure ?? (session.map(refused.contains) == true ? Self.notHeld : nil)
        }

        static let notHeld = StoreError.notHeld(
            "this node no longer holds this session (another node, or a later claim, does)")
    }

    private func commit(_ batch: [StoreChange]) -> Outcome {
        var outcome = Outcome()
        if batch.isEmpty { return outcome }
        writeStarted.withLock { $0 = ProcessClock.now }
        do throws(StoreError) {
            outcome.refused = try engine.commit(batch, historyLength: historyLength, actionLogLength: actionLogLength)
        } catch {
            outcome.failure = error
        }
        writeStarted.withLock { $0 = nil }
        if let failure = outcome.failure { failures.failed(failure, "to commit") } else { failures.succeeded() }
        return outcome
    }
}

extension StoreError {
    /// What the store answers once the server stops: nothing more is read or written.
    static var stopping: StoreError { .unavailable("the server is shutting down") }
}
