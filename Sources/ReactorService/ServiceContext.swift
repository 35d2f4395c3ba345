import ConcurrencyPrimitives
import Logging
import MicroHTTP
import ReactorCore
import ReactorStore

// `currentUser`: OpenCombine marks nothing Sendable; its subjects lock themselves.
#if canImport(Combine)
@preconcurrency import Combine
#else
@preconcurrency import OpenCombine
#endif

#if canImport(FoundationEssentials)
import FoundationEssentials
#else
import Foundation
#endif

/// What every route shares: the sessions, the reactor kinds, the global user, the store, the
/// metrics.
final class ServiceContext: Sendable {
    let configuration: ServiceConfiguration
    let sessions: SessionTable
    let registry = ReactorRegistry()
    let currentUser: CurrentValueSubject<User?, Never>
    let adminToken: String
    let metrics = ServiceMetrics()
    /// Who may do what: tokens, session owners, quotas, the admin (Access/SessionAccess).
    let access: SessionAccess
    let logger: Logger
    /// Logs the limits that turn requests away.
    let limitNotices: LimitNotices
    let retryFrame: Frame
    let cors: CORSPolicy
    /// What /readyz asks; the store adds its own check (ReactorServer.addReadinessCheck).
    let readiness = Readiness()
    /// Where requests do what may wait (a store's read, a probe of it), off libmicrohttpd's
    /// threads: threads of their own, as many as are waiting (up to 64, the probes apart).
    let waitingWork = WaitingWork()
    /// The action log's pages and exports read at once (more get 503): a page reads up to 1,000
    /// entries and an export holds up to 64 MiB, so that many at once would take the memory.
    let logReads = Places(capacity: 4)
    /// Counts and logs the streams closed for reading too slowly.
    var slowConsumers: SlowConsumers { SlowConsumers(metrics: metrics, logger: logger) }
    /// What `openStore()` sets, before the server listens, and nothing changes after.
    private struct Stores: Sendable {
        var persistence: Persistence?
        var cluster: Cluster?
        var actionLogSettings: ActionLogSettings?
        var idempotency: IdempotencyLedger
    }
    private let stores: Locked<Stores>
    /// The durable store's side, once `openStore()` opened one; nil with the memory store.
    var persistence: Persistence? { stores.withLock { $0.persistence } }
    /// Cluster mode's side, when the store is shared (`postgres://`); set with `persistence`.
    var cluster: Cluster? { stores.withLock { $0.cluster } }
    /// What each session's action log keeps (nil: no log); set again with `persistence`.
    var actionLogSettings: ActionLogSettings? { stores.withLock { $0.actionLogSettings } }
    /// The requests sent under idempotency keys and their kept answers; set again with `persistence`.
    var idempotency: IdempotencyLedger { stores.withLock { $0.idempotency } }
    /// The routes, for a request a route hands back to them (Forwarding's retry). Set before the
    /// server listens; emptied by `stop()`, since the routes hold this context.
    let routes = Locked(Router())
    private let stopping = Locked(false)
    /// The rendered /openapi.yaml and the kinds it was rendered for.
    private let spec = Locked<(kinds: [String], bytes: [UInt8])?>(nil)

    init(configuration: ServiceConfiguration, adminToken: String, logger: Logger) {
        self.configuration = configuration
        self.adminToken = adminToken
        self.logger = logger
        limitNotices = LimitNotices(logger: logger)
        access = SessionAccess(
            configuration: configuration, adminToken: adminToken, metrics: metrics, limits: limitNotices)
        sessions = SessionTable(capacity: configuration.maxSessions, storedCapacity: configuration.maxStoredSessions)
        currentUser = CurrentValueSubject(nil)
        retryFrame = EventFrames.retry(milliseconds: Int((configuration.streamRetry / .milliseconds(1)).rounded()))
        cors = CORSPolicy(configuration: configuration)
        stores = Locked(
            Stores(
                actionLogSettings: Self.actionLog(configuration, keepsEntries: true),
                idempotency: Self.ledger(
                    configuration, engine: nil, metrics: IdempotencyMetrics(registry: metrics.registry))))
    }

    private static func actionLog(_ configuration: ServiceConfiguration, keepsEntries: Bool) -> ActionLogSettings? {
        guard configuration.actionLogLength > 0 else { return nil }
        return ActionLogSettings(
            length: configuration.actionLogLength, age: configuration.actionLogAge.inSeconds,
            keepsEntries: keepsEntries)
    }

    private static func ledger(
        _ configuration: ServiceConfiguration, engine: (any StoreEngine)?,
        metrics: IdempotencyMetrics
    ) -> IdempotencyLedger {
        // A forwarding node's own keys need only outlive a holder's lease and the forward's retry.
        IdempotencyLedger(
            ttl: configuration.idempotencyTTL.inSeconds,
            forwardTTL: max(60, 4 * (configuration.forwardTimeout + configuration.leaseDuration).inSeconds),
            engine: engine, metrics: metrics)
    }

    /// Opens the configured store and brings back what must be there before the first
    /// request: the global user (before any session sees `currentUser`) and the session count.
    /// Sessions themselves come back lazily, on their first request.
    func openStore() throws(StoreError) {
        guard let engine = try configuration.store.open(leaseDuration: configuration.leaseDuration.inSeconds) else {
            return
        }
        let shared = (engine as? any ClusterStore).map {
            Cluster(store: $0, configuration: configuration, metrics: metrics)
        }
        do throws(StoreError) {
            let stored: [UInt8]?
            if let shared { stored = try shared.loadUser().user } else { stored = try engine.loadUser() }
            if let json = stored {
                guard let user = try? JSONDecoder().decode(User.self, from: Data(json)) else {
                    throw StoreError.cannotOpen(
                        "the stored global user does not decode: \(String(decoding: json, as: UTF8.self))")
                }
                currentUser.send(user)
            }
            sessions.setStored(try engine.sessionCount())
            if let shared {
                access.reserveCreations(in: shared.store)
            } else {
                access.countStoredSessions { owner in
                    Result { () throws(StoreError) in try engine.sessionCount(ownedBy: owner) }
                }
            }
        } catch {
            engine.close()
            throw error
        }
        let persistence = Persistence(
            engine: engine, historyLength: configuration.historyLength,
            actionLogLength: configuration.actionLogLength, logger: logger)
        let actionLogSettings = Self.actionLog(configuration, keepsEntries: false)
        stores.withLock { stores in
            stores = Stores(
                persistence: persistence, cluster: shared, actionLogSettings: actionLogSettings,
                idempotency: Self.ledger(configuration, engine: engine, metrics: stores.idempotency.metrics))
        }
    }

    var isStopping: Bool { stopping.current }

    /// How often the sweeper looks at idle sessions (a full table's `Retry-After`).
    var sweepInterval: Double { SessionSweeper.interval(configuration, durable: persistence != nil) }

    /// The OpenAPI document for the kinds registered now; rendered once per set of kinds.
    func openAPISpec(template: String) -> [UInt8] {
        let kinds = registry.names
        if let cached = spec.withLock({ $0 }), cached.kinds == kinds { return cached.bytes }
        let text = OpenAPISpec.render(
            template: template, kinds: registry.descriptions(),
            defaultKind: configuration.defaultReactor ?? kinds.first)
        let bytes = Array(text.utf8)
        spec.withLock { $0 = (kinds, bytes) }
        return bytes
    }

    /// Marks the service as stopping; `true` only for the first caller.
    func beginStopping() -> Bool {
        stopping.withLock { stopping in
            defer { stopping = true }
            return !stopping
        }
    }

    /// The session with this id: in memory, or brought back from the durable store. `forwarded`
    /// (a request another node sent here, taking this node for the holder): taken from the store
    /// only when it names this node's address (this node before a restart); a session given back
    /// (unloaded, handed over, a stop) is then `heldElsewhere`, which a forwarded request answers
    /// with a 503 that its node retries through the store: the node its requests reach takes
    /// it, not this one (Placement). `mayWait` false (on libmicrohttpd's thread): `needsStore`
    /// where the store would be read.
    func session(_ id: String, forwarded: Bool = false, mayWait: Bool = true) -> Result<
        any Session, SessionLookupError
    > {
        if let loaded = sessions.session(id) {
            // In a cluster, a session is served from memory only while its lease lasts.
            guard let cluster, !cluster.store.holds(id), !loaded.hub.isNewSession else { return .success(loaded) }
            letGo(loaded)
        }
        // Stopping, the sessions have left memory for good: none comes back now, and a request
        // that raced the stop must not hear that its session is unknown.
        guard !isStopping else { return .failure(.store(.stopping)) }
        guard let persistence, let key = SessionKey(id) else { return .failure(.unknown) }
        if let address = cluster?.knownHolder(of: key) { return .failure(.heldElsewhere(address: address)) }
        guard mayWait else { return .failure(.needsStore) }
        let found = persistence.restore(key, into: self, onlyAtThisAddress: forwarded)
        if case let .failure(.heldElsewhere(address)) = found, !address.isEmpty {
            cluster?.remember(address, asHolderOf: key)
        }
        return found
    }

    /// A hub for a new session (no `restoring`) or a restored one, journaled when the store is durable.
    /// `owner`: the subject that creates a new session (a restored one has its stored owner).
    func makeHub(id: String, kind: String, owner: String? = nil, restoring stored: StoredSession? = nil) -> EventHub {
        let record = persistence.map {
            SessionRecord(
                id: id, kind: kind, owner: stored?.owner ?? owner, journal: $0.journal, stored: stored,
                ttl: configuration.sessionTTL.inSeconds)
        }
        let log = actionLogSettings.flatMap { settings in
            SessionKey(id).map {
                SessionActionLog(settings: settings, session: $0, lastNumber: stored?.lastLoggedAction ?? 0)
            }
        }
        return EventHub(
            historyLength: configuration.historyLength, metrics: metrics, record: record, restoring: stored,
            actionLog: log)
    }

    /// Claims a place in memory for a session, unloading the least recently used idle ones when
    /// every place is taken (with a durable store); false when all are busy. `restoring`: called
    /// by a load, which holds the restore lock already.
    func reservePlace(restoring: Bool = false) -> Bool {
        if sessions.reserve() { return true }
        guard let persistence else {
            limitNotices.hit("a session refused: the session table is full (--max-sessions)")
            return false
        }
        // A hundredth at a time: one scan of the table frees room for many requests.
        let batch = max(1, sessions.capacity / 100)
        let unloaded = sessions.unloadLeastRecentlyUsed(batch, now: ProcessClock.now)
        didUnload(unloaded, counter: metrics.memoryUnloads, persistence: persistence, restoring: restoring)
        if !unloaded.isEmpty && sessions.reserve() { return true }
        limitNotices.hit("a session refused a place in memory: every one there is busy (--max-sessions)")
        return false
    }

    /// Puts a new or restored session in the table, its place reserved. Should the journal lose
    /// one of its changes, the session leaves memory (its streams close without `event: end`, so
    /// clients resume) and its next request brings back the last committed state.
    func adopt(_ session: any Session, restored: Bool = false) {
        sessions.insert(session)
        metrics.sessions.increment()
        if restored { metrics.loads.increment() }
        access.sessionOpened(session)
        guard persistence != nil else { return }
        session.hub.onLost { [weak self, weak session] neverStored in
            guard let self, let session, sessions.unload(session) else { return }
            if neverStored { sessions.forgetStored() }
            end(session, reason: nil)
        }
    }

    /// Sessions unloaded (out of the table, their hubs ended): they live on in the store, and in a
    /// cluster their leases go back, so any node takes them on their next request.
    func didUnload(
        _ unloaded: [any Session], counter: Counter, persistence: Persistence, restoring: Bool = false,
        handedOver: Bool = false
    ) {
        guard !unloaded.isEmpty else { return }
        for session in unloaded { end(session, reason: nil) }
        counter.increment(by: Int64(unloaded.count))
        persistence.releaseLeases(of: unloaded, in: self, restoring: restoring, afterCommit: !handedOver)
    }

    /// Ends a session removed from the table: `event: end` with `reason` for its streams, or
    /// a plain close when nil.
    func end(_ session: any Session, reason: String?) {
        session.end(reason: reason)
        metrics.sessions.decrement()
        access.sessionEnded(session)
    }

    /// Takes a session out of memory for a DELETE (`remove` follows); with a durable store, a
    /// load cannot bring it back meanwhile (`Persistence.beginDelete`). False when another path
    /// took it out first.
    func takeForDeletion(_ session: any Session) -> Bool {
        persistence?.beginDelete(session, from: self) ?? sessions.unload(session)
    }

    /// Removes a session for good (DELETE, or its TTL): from the store first when it is
    /// durable, then its streams get `event: end`. `completion` gets the store's failure.
    func remove(
        _ session: any Session, reason: String, answer: StoredAnswer? = nil,
        then completion: @escaping @Sendable (StoreError?) -> Void = { _ in }
    ) {
        guard let persistence else {
            end(session, reason: reason)
            completion(nil)
            return
        }
        persistence.delete(session, reason: reason, answer: answer, from: self, then: completion)
    }
}
