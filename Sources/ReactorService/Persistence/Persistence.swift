import ConcurrencyPrimitives
import Dispatch
import Logging
import ReactorCore
import ReactorStore

#if canImport(FoundationEssentials)
import FoundationEssentials
#else
import Foundation
#endif

/// Why a session cannot be served.
enum SessionLookupError: Error {
    /// Never issued, or deleted or expired: 404.
    case unknown
    /// Stored, but it cannot come back (its kind is gone, its state no longer decodes, its
    /// row is damaged): 409 for this session alone, until a DELETE removes it.
    case unrestorable(String, owner: StoredOwner)
    /// The store failed while reading it: 503 (507 when full; see `Problems.store`).
    case store(StoreError)
    /// Cluster mode: another live node holds it; requests go to `address`.
    case heldElsewhere(address: String)
    /// Every place in memory holds a busy session: 503 to retry.
    case memoryFull
    /// A DELETE of it waits for its commit, which may yet fail and leave it: 503 to retry.
    case beingDeleted
    /// Not in memory: finding it reads the store, which a lookup that may not wait (on
    /// libmicrohttpd's thread) leaves to be done again on another (`RouteTable.offThread`).
    case needsStore

    /// Gone, or going: a request under a key used before gets what the key kept, if anything.
    var isGoneOrGoing: Bool {
        switch self {
        case .unknown, .beingDeleted: return true
        default: return false
        }
    }

    /// `unrestorable`, worded for the client.
    static func cannotRestore(_ reason: String, owner: StoredOwner) -> SessionLookupError {
        .unrestorable("this session is stored but cannot be restored: \(reason)", owner: owner)
    }

    /// The store could not read the session: damaged data is this session's for good (409),
    /// anything else the store's (503, 507).
    static func reading(_ error: StoreError) -> SessionLookupError {
        if case .damaged = error { return cannotRestore(error.detail, owner: .unreadable) }
        return .store(error)
    }
}

/// Whose a stored session is, as far as its row can be read.
enum StoredOwner: Sendable, Equatable {
    /// The subject that made it; nil for a session made without authentication.
    case read(String?)
    /// Its row is damaged: whose it is cannot be told.
    case unreadable
}

/// The service's side of a durable store: the journal that writes every change, and the
/// way back from the store for sessions not in memory (lazily, on their first request).
///
/// One live reactor per session: restores are serialised and check the session table
/// first, and a session being deleted is remembered (a tombstone) until its delete is
/// committed, so a request racing the delete cannot bring it back from the store.
final class Persistence: Sendable {
    let engine: any StoreEngine
    let journal: Journal
    private let historyLength: Int
    /// The restore lock: held by a load from its table check to its adoption.
    private let restoring = Locked(Restoring())
    private struct Restoring {
        /// Sessions being deleted, until their delete is committed.
        var tombstones: Set<SessionKey> = []
        /// Those of `tombstones` a DELETE removes (the others expired, and are gone for good).
        var deleting: Set<SessionKey> = []
        /// Sessions whose failure to restore has been logged.
        var reported: Set<SessionKey> = []
    }

    /// Where every failure of the store is logged (the cluster's lease renewals too): one
    /// outage, one warning every 10 s.
    let failures: StoreFailureLog
    /// Whether the store answers, for `/readyz` (and a cluster node's `/healthz`).
    let probe: StoreProbe

    init(engine: any StoreEngine, historyLength: Int, actionLogLength: Int = 0, logger: Logger) {
        self.engine = engine
        self.historyLength = historyLength
        failures = StoreFailureLog(logger: logger)
        let journal = Journal(
            engine: engine, historyLength: historyLength, actionLogLength: actionLogLength,
            failures: failures)
        self.journal = journal
        probe = StoreProbe(engine: engine) { journal.writeInProgressFor }
    }

    /// The session `key` from the store, loaded into `context.sessions`; the loaded one if
    /// another request brought it back first. `onlyAtThisAddress`: in a cluster, only when the
    /// store names this node's address as its holder's (see `ClusterStore.claim`).
    func restore(
        _ key: SessionKey, into context: ServiceContext,
        onlyAtThisAddress: Bool = false
    ) -> Result<any Session, SessionLookupError> {
        var expired = false
        var loaded = false
        let started = ProcessClock.now
        let result = restoring.withLock { state in
            restoreLocked(
                key, into: context, onlyAtThisAddress: onlyAtThisAddress, expired: &expired, loaded: &loaded,
                state: &state)
        }
        if expired {
            writeDeletes(
                of: [key], idleBefore: WallClock.now - context.configuration.sessionTTL.inSeconds, from: context)
        }
        // Timed once per load, as `reactord_session_loads_total` counts: not for the requests
        // that waited for it and found the session loaded.
        if loaded { context.metrics.loadSeconds.record(ProcessClock.now - started) }
        return result
    }

    private func restoreLocked(
        _ key: SessionKey, into context: ServiceContext, onlyAtThisAddress: Bool,
        expired: inout Bool, loaded: inout Bool, state: inout Restoring
    ) -> Result<any Session, SessionLookupError> {
        let id = key.string
        if let loaded = context.sessions.session(id) { return .success(loaded) }
        // Checked again here: a restore that waited for this lock while the server began to stop
        // would put a session in the table after the stop emptied it, never to be released.
        guard !context.isStopping else { return .failure(.store(.stopping)) }
        if state.tombstones.contains(key) { return .failure(state.deleting.contains(key) ? .beingDeleted : .unknown) }
        let stored: StoredSession?
        do throws(StoreError) {
            if let shared = context.cluster?.store {
                switch try shared.claim(id, historyLength: historyLength, onlyAtThisAddress: onlyAtThisAddress) {
                case let .taken(session):
                    stored = session
                    context.cluster?.metrics.takeovers.increment()
                case let .heldElsewhere(address): return .failure(.heldElsewhere(address: address))
                case .missing: stored = nil
                }
            } else {
                stored = try engine.session(id, historyLength: historyLength)
            }
        } catch {
            if case .damaged = error {
                // Not a failure of the store that a retry could outlast: this session's data is bad.
                context.cluster?.store.release([id])
                return .failure(
                    unrestorable(
                        key, context, error.detail, logged: error.description, owner: .unreadable, state: &state))
            }
            failures.failed(error, "to read a session")
            return .failure(.store(error))
        }
        guard let stored else { return .failure(.unknown) }
        let ttl = context.configuration.sessionTTL.inSeconds
        if ttl > 0 && WallClock.now - stored.lastActive > ttl {
            state.tombstones.insert(key)  // it expired while the server was down: deleted once unlocked
            expired = true
            return .failure(.unknown)
        }
        guard let factory = context.registry.factory(for: stored.kind) else {
            context.cluster?.store.release([id])
            return .failure(
                unrestorable(
                    key, context, "its reactor kind '\(stored.kind)' is not served by this server",
                    owner: .read(stored.owner), state: &state))
        }
        guard context.reservePlace(restoring: true) else {
            context.cluster?.store.release([id])
            return .failure(.memoryFull)
        }
        let hub = context.makeHub(id: id, kind: stored.kind, restoring: stored)
        do {
            // The store keeps the owner, not the token: the factory gets the subject alone.
            let session = try factory(key, hub, stored.owner.map { Principal(subject: $0) }, stored.stateJSON)
            context.adopt(session, restored: true)
            loaded = true
            return .success(session)
        } catch {
            context.sessions.cancelReservation()
            hub.end(reason: nil)
            context.cluster?.store.release([id])
            return .failure(
                unrestorable(
                    key, context, "its stored state no longer decodes as the reactor's State: \(error)",
                    owner: .read(stored.owner), state: &state))
        }
    }

    /// Empties the session table as the server stops, once a restore under way has put its
    /// session there (the later ones see the stop and refuse): every session is then released.
    func removeAllForStop(from context: ServiceContext) -> [any Session] {
        restoring.withLock { _ in context.sessions.removeAll() }
    }

    /// Cluster mode: gives back the leases of `unloaded` sessions, in one statement, unless one was
    /// loaded again meanwhile (then its new lease stays). Under the restore lock, which a load holds
    /// from its table check to its adoption; `restoring`: the caller holds it already.
    /// `afterCommit`: once what the journal holds is written, their last activities with it
    /// (`StoreChange.activity`, queued as they left): released before, a session is another
    /// node's to expire by the older time it has stored. (A hand-over is not: its next holder
    /// counts its activity on, and every moment it stays held here is one a request loads it back.)
    func releaseLeases(of unloaded: [any Session], in context: ServiceContext, restoring: Bool, afterCommit: Bool) {
        guard let store = context.cluster?.store else { return }
        let release: @Sendable () -> Void = {
            store.release(unloaded.map(\.id).filter { context.sessions.session($0) == nil })
        }
        if afterCommit {
            journal.whenCommitted { [self] _ in
                DispatchQueue.global().async { self.restoring.withLock { _ in release() } }
            }
        } else if restoring {
            release()
        } else {
            self.restoring.withLock { _ in release() }
        }
    }

    /// Takes `session` out of memory for a DELETE and tombstones it, in one step under the restore
    /// lock: a load between the two would bring it back from its row, which the delete has not
    /// removed yet, and take actions a restart would lose. False when another path took it out
    /// first. `delete` follows, and its commit lifts the tombstone.
    func beginDelete(_ session: any Session, from context: ServiceContext) -> Bool {
        restoring.withLock { state in
            guard context.sessions.unload(session) else { return false }
            state.tombstones.insert(session.key)
            state.deleting.insert(session.key)
            return true
        }
    }

    /// Tombstones a stored session that cannot be restored (see `SessionLookupError.unrestorable`)
    /// for a DELETE, as `beginDelete` does a loaded one; nil then, and `delete(stored:)` follows.
    /// Else why not: another DELETE of it runs, or it was loaded meanwhile (`beingDeleted`, to
    /// retry), or it expired (`unknown`).
    func beginDelete(stored key: SessionKey, from context: ServiceContext) -> SessionLookupError? {
        restoring.withLock { state in
            if state.tombstones.contains(key) { return state.deleting.contains(key) ? .beingDeleted : .unknown }
            guard context.sessions.session(key.string) == nil else { return .beingDeleted }
            state.tombstones.insert(key)
            state.deleting.insert(key)
            return nil
        }
    }

    /// Deletes `session` (taken out by `beginDelete`) from the store; once that is
    /// committed, ends it with `event: end` and `reason`. When the delete fails the session
    /// stays stored, and is unloaded to come back on its next use. `answer`: the request's answer
    /// kept under its idempotency key, written in the same transaction.
    func delete(
        _ session: any Session, reason: String, answer: StoredAnswer? = nil, from context: ServiceContext,
        then completion: @escaping @Sendable (StoreError?) -> Void = { _ in }
    ) {
        delete(stored: session.key, reason: reason, answer: answer, from: context) { failure in
            context.end(session, reason: failure == nil ? reason : nil)
            completion(failure)
        }
    }

    /// Deletes the stored session `key`, tombstoned by a `beginDelete`, and lifts its tombstone
    /// once that is committed or has failed.
    func delete(
        stored key: SessionKey, reason: String, answer: StoredAnswer? = nil, from context: ServiceContext,
        then completion: @escaping @Sendable (StoreError?) -> Void
    ) {
        journal.write([.delete(id: key.string, reason: reason)] + (answer.map { [.answer($0)] } ?? [])) {
            [self] failure in
            restoring.withLock { state in
                state.tombstones.remove(key)
                state.deleting.remove(key)
                if failure == nil { state.reported.remove(key) }
            }
            if failure == nil { context.sessions.forgetStored() }
            completion(failure)
        }
    }

    /// Deletes the stored sessions that expired while not loaded (the sweeper's second half), by
    /// an indexed query, `batch` at a time: each batch is a transaction of its own, waited for, so
    /// requests' commits go between batches and none waits for more than one. At most `budget`
    /// seconds a sweep; the next sweep goes on.
    func deleteExpiredStored(from context: ServiceContext, batch: Int = 100, budget: Double = 1) {
        let ttl = context.configuration.sessionTTL.inSeconds
        guard ttl > 0 else { return }
        let started = ProcessClock.now
        while ProcessClock.now - started < budget {
            guard let ids = try? engine.sessions(lastActiveBefore: WallClock.now - ttl, limit: batch) else { return }
            var unloaded: [any Session] = []
            let expired: [SessionKey] = restoring.withLock { state in
                ids.compactMap { id in
                    guard let key = SessionKey(id) else { return nil }
                    if let loaded = context.sessions.session(id) {
                        // Loaded only to read its history: its stored time is its own, and it expired.
                        let expiredHere =
                            loaded.hub.isUnusedSinceLoad
                            && context.sessions.unload(loaded, ifIdleSince: ProcessClock.now)
                        if expiredHere {
                            unloaded.append(loaded)
                        } else {
                            // Its own activity decides, not its stored time (which may lag): written now,
                            // so that it leaves this query's answer instead of filling it sweep after sweep.
                            loaded.hub.refreshStoredActivity()
                            return nil
                        }
                    }
                    return state.tombstones.insert(key).inserted ? key : nil
                }
            }
            context.didUnload(unloaded, counter: context.metrics.idleUnloads, persistence: self)
            guard !expired.isEmpty else { return }
            let written = DispatchGroup()
            writeDeletes(of: expired, idleBefore: WallClock.now - ttl, from: context, group: written)
            written.wait()
            if ids.count < batch { return }
        }
    }

    /// Deletes stored sessions already tombstoned, outside the restore lock: a journal that has
    /// stopped answers at once, and the answer takes the lock. `group` is left once all are done.
    /// `idleBefore`: the expiry's cutoff, which the store checks again (a session used since stays).
    private func writeDeletes(
        of keys: [SessionKey], idleBefore: Double, from context: ServiceContext,
        group: DispatchGroup? = nil
    ) {
        for key in keys {
            group?.enter()
            journal.write([.delete(id: key.string, reason: "expired", idleBefore: idleBefore)]) { [self] failure in
                restoring.withLock { _ = $0.tombstones.remove(key) }
                if failure == nil { context.sessions.forgetStored() }
                group?.leave()
            }
        }
    }

    /// `logged`: the reason as the log gets it, when it says more than a client may read.
    private func unrestorable(
        _ key: SessionKey, _ context: ServiceContext, _ reason: String,
        logged: String? = nil, owner: StoredOwner, state: inout Restoring
    ) -> SessionLookupError {
        // Logged once per session and run: a client retrying must not flood the log.
        if state.reported.insert(key).inserted {
            context.logger.error(
                "a stored session cannot be restored",
                metadata: [
                    "session": "\(key.string)", "reason": "\(logged ?? reason)",
                ])
        }
        return .cannotRestore(reason, owner: owner)
    }
}
