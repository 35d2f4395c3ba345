#if canImport(FoundationEssentials)
import FoundationEssentials
#else
import Foundation
#endif
import MicroHTTP
import ReactorStore

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
final class Journal: @unchecked Sendable {
    typealias Completion = @Sendable (StoreError?) -> Void

    let engine: any StoreEngine
    private let historyLength: Int
    private let actionLogLength: Int
    private let condition = ConditionLock()
    // Guarded by `condition`.
    private var dirty: [any Journaled] = []
    private var changes: [StoreChange] = []
    /// Each with the session its change is about, when it wrote one (a delete).
    private var completions: [(session: String?, completion: Completion)] = []
    private var stopping = false
    private var stopped = false
    private let failures: StoreFailureLog

    init(engine: any StoreEngine, historyLength: Int, actionLogLength: Int = 0, failures: StoreFailureLog) {
        self.engine = engine
        self.historyLength = historyLength
        self.actionLogLength = actionLogLength
        self.failures = failures
        startThread(name: "reactord.journal") { [self] in run() }
    }

    /// `entry` has a change to write in the next transaction. Call once per change burst
    /// (the entry remembers it is queued until its `takeChange`).
    func markDirty(_ entry: any Journaled) {
        condition.withLock {
            dirty.append(entry)
            condition.signal()
        }
    }

    /// Writes `changes` after the sessions' pending changes, all in the same transaction, then
    /// calls `completion` with nil once they are durable, or with the reason they are not.
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
        condition.withLock {
            stopping = true
            condition.broadcast()
            while !stopped { condition.wait() }
        }
    }

    private func submit(_ submitted: [StoreChange], _ completion: @escaping Completion) {
        var session: String?
        for case let .delete(id, _, _) in submitted { session = id }
        condition.lock()
        if stopped {
            condition.unlock()
            completion(.unavailable("the server is shutting down"))
            return
        }
        changes += submitted
        completions.append((session, completion))
        condition.signal()
        condition.unlock()
    }

    private func run() {
        while true {
            condition.lock()
            while dirty.isEmpty && changes.isEmpty && completions.isEmpty && !stopping { condition.wait() }
            if dirty.isEmpty && changes.isEmpty && completions.isEmpty {
                stopped = true
                condition.broadcast()
                condition.unlock()
                return
            }
            let entries = dirty, explicit = changes, waiting = completions
            dirty = []
            changes = []
            completions = []
            condition.unlock()
            commit(entries, explicit, waiting)
        }
    }

    private func commit(_ entries: [any Journaled], _ explicit: [StoreChange],
                        _ waiting: [(session: String?, completion: Completion)]) {
        var batch: [StoreChange] = []
        var written: [(entry: any Journaled, session: String)] = []
        batch.reserveCapacity(entries.count + explicit.count)
        for entry in entries {
            guard let change = entry.takeChange() else { continue }
            batch.append(.session(change))
            written.append((entry, change.id))
        }
        // After the sessions' own writes: a delete is never undone by the same transaction.
        batch += explicit
        var failure: StoreError?
        var refused: Set<String> = []
        if !batch.isEmpty {
            do throws(StoreError) {
                refused = try engine.commit(batch, historyLength: historyLength, actionLogLength: actionLogLength)
            } catch {
                failure = error
            }
            if let failure { failures.failed(failure, "to commit") } else { failures.succeeded() }
        }
        let notHeld = StoreError.notHeld("another node holds this session now")
        func outcome(_ session: String?) -> StoreError? {
            failure ?? (session.map(refused.contains) == true ? notHeld : nil)
        }
        // Every stream and request this batch wakes is resumed together at its end.
        EventStream.batchingResumes {
            for (entry, session) in written {
                if let failure = outcome(session) { entry.commitFailed(failure) } else { entry.didCommit() }
            }
            for (session, completion) in waiting { completion(outcome(session)) }
        }
    }
}
