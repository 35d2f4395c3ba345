import ConcurrencyPrimitives
import MicroHTTP
import ReactorStore

/// The requests sent under idempotency keys: those running on this node now (a repeat
/// meanwhile gets 409), and the answers kept. With a durable store an answer is written in the
/// transaction of the change it answers, so a repeat after any crash finds both or neither;
/// with the memory store the ledger keeps them itself (lost on restart, as the sessions are).
/// In a cluster the requests no session's holder serialises also claim their key in the store.
final class IdempotencyLedger: Sendable {
    enum Admission {
        /// Not answered before: run it, holding the ticket until the answer is given.
        case run(Ticket)
        /// The kept answer again, or why not (409 running, 422 another request, the store's error).
        case answer(Response)
    }

    /// A key running here. `finish` gives it back just before the answer goes out (a repeat
    /// that comes after the answer must find it kept, not running); failing that, the last
    /// reference going does, so a path that forgets it cannot leave the key running for ever.
    final class Ticket: Sendable {
        let request: IdempotentRequest
        private let ledger: IdempotencyLedger
        /// Whether `finish` was called, the answer last given to `keep`, and the token of the
        /// key's claim in a shared store (see `ClusterStore.claimAnswer`).
        private let progress = Locked<(finished: Bool, answer: Response?, claim: String?)>((false, nil, nil))

        fileprivate init(_ request: IdempotentRequest, _ ledger: IdempotencyLedger) {
            self.request = request
            self.ledger = ledger
        }

        deinit { finish() }

        /// The key's run is over: its answer (kept, if it is to be) is about to be given. Only
        /// the first call counts, so it never frees a later run of the same key. `given`: the
        /// answer the client gets, when it is not the one given to `keep` (a failed commit's).
        func finish(giving given: Response? = nil) {
            guard
                let claim = progress.withLock({ progress -> String?? in
                    defer { progress.finished = true }
                    guard !progress.finished else { return nil }
                    // A kept answer replaces the claim in its commit. A commit whose outcome is
                    // unknown (504) leaves the claim to pass by itself: it may have landed. Any
                    // other failure stored nothing, and a repeat runs again at once.
                    let isStored =
                        progress.answer.map(Self.isKept) == true
                        && given.map { Self.isKept($0) || $0.status == 504 } != false
                    return .some(isStored ? nil : progress.claim)
                })
            else { return }
            if let claim, let cluster = ledger.engine as? any ClusterStore {
                // Nothing is kept: a repeat runs again (a claim left runs out by itself).
                try? cluster.releaseClaim(scope: request.scope, key: request.key, token: claim)
            }
            ledger.running.withLock { $0[request.id] = nil }
        }

        /// Whether an answer is kept: a 2xx; any other changed nothing, and a repeat runs again.
        private static func isKept(_ response: Response) -> Bool { (200..<300).contains(response.status) }

        fileprivate func claimed(_ token: String) { progress.withLock { $0.claim = token } }

        /// The answer last given to `keep`: the client gets the very bytes a repeat will.
        var keptResponse: Response? { progress.withLock { $0.answer } }

        /// What to keep of `response` under the key (nil for an answer that is not 2xx: it
        /// changed nothing, and a repeat runs again). With the memory store the ledger keeps it
        /// now and nil is returned; with a durable store it is to be written with the change
        /// (`session`: the session that change is about).
        func keep(_ response: Response, session: String?) -> StoredAnswer? {
            let claim = progress.withLock { progress in
                progress.answer = response
                return progress.claim
            }
            guard Self.isKept(response) else { return nil }
            var headers: [StoredAnswer.Field] = []
            headers.reserveCapacity(IdempotencyLedger.keptFields.count)
            for (name, value) in response.headers where IdempotencyLedger.isKept(name) {
                headers.append(StoredAnswer.Field(name, value))
            }
            let answer = StoredAnswer(
                scope: request.scope, key: request.key, request: request.digest, status: response.status,
                headers: headers,
                body: response.body,
                expires: WallClock.now + (request.isForwarders ? ledger.forwardTTL : ledger.ttl), session: session,
                claim: claim)
            guard ledger.engine == nil else { return answer }
            ledger.kept.withLock { $0[request.id] = answer }
            return nil
        }
    }

    /// Whether a field of an answer is the answer's own (not CORS's, not the connection's), its
    /// name in any case.
    fileprivate static func isKept(_ name: String) -> Bool {
        keptFields.contains { $0.elementsEqual(name.utf8) { $0 == ($1 | 0x20) } }
    }

    /// `isKept`'s names, in lowercase.
    fileprivate static let keptFields = ["content-type", "etag", "location"].map { Array($0.utf8) }

    /// Seconds a client's key is kept; a forwarding node's own keys only need to outlive a
    /// holder's lease and a forward's retry.
    let ttl: Double
    let forwardTTL: Double
    fileprivate let engine: (any StoreEngine)?
    /// The digests of the requests running, by key.
    fileprivate let running = Locked<[KeyInScope: String]>([:])
    fileprivate let kept = Locked<[KeyInScope: StoredAnswer]>([:])
    /// When a durable store's keys were last counted (`ProcessClock`), and how often at most.
    private let lastCounted = Locked<Double>(-.infinity)
    private static let countInterval = 60.0
    /// Seconds a run's claim on its key holds without its answer; after that, its node is taken
    /// for dead and a repeat may run. Far longer than a commit takes.
    private static let claimDuration = 30.0
    let metrics: IdempotencyMetrics

    init(ttl: Double, forwardTTL: Double, engine: (any StoreEngine)?, metrics: IdempotencyMetrics) {
        self.ttl = ttl
        self.forwardTTL = forwardTTL
        self.engine = engine
        self.metrics = metrics
    }

    /// Whether `request` runs, or what it is answered instead. In a cluster, call it only once
    /// this node holds the session: the store's word on the key is final only then.
    func admit(_ request: IdempotentRequest) -> Admission {
        let runningDigest: String? = running.withLock { table in
            if let digest = table[request.id] { return digest }
            table[request.id] = request.digest
            return nil
        }
        if let runningDigest {
            guard runningDigest == request.digest else { return .answer(mismatch(request)) }
            return .answer(stillRunning())
        }
        let ticket = Ticket(request, self)
        if request.isFresh { return .run(ticket) }
        let found: StoredAnswer?
        if let engine {
            do throws(StoreError) {
                if request.isUnheld, let cluster = engine as? any ClusterStore {
                    // No holder serialises it across nodes: the store's claim on the key does.
                    let token = SessionID.make().string
                    found = try cluster.claimAnswer(
                        scope: request.scope, key: request.key, request: request.digest, token: token,
                        duration: Self.claimDuration)
                    if found == nil { ticket.claimed(token) }
                } else {
                    found = try engine.answer(scope: request.scope, key: request.key)
                }
            } catch {
                return .answer(Problems.store(error))
            }
        } else {
            found = kept.withLock { $0[request.id] }
        }
        guard let found else { return .run(ticket) }
        guard found.request == request.digest else { return .answer(mismatch(request)) }
        // Another node's run of it (a claim is never replayed).
        if found.isClaim { return .answer(stillRunning()) }
        metrics.replays.increment()
        var headers = HTTPHeaders(found.headers.map { ($0.name, $0.value) })
        if !request.isForwarders { headers.add(IdempotentRequest.replayedHeader, "true") }
        return .answer(Response(status: found.status, headers: headers, body: found.body))
    }

    /// Forgets expired answers (the sweeper's, now and then): the memory store's at once, a
    /// durable store's in one batch through `journal`. Updates the count of kept keys: a durable
    /// store's once a minute at most, as counting them reads the whole index (in a cluster,
    /// every node reads the shared table).
    func trim(through journal: Journal?) {
        let now = WallClock.now
        guard let engine, let journal else {
            let count = kept.withLock { table in
                table = table.filter { $0.value.expires >= now }
                return table.count
            }
            metrics.stored.set(Double(count))
            return
        }
        journal.write([.forgetAnswers(expiredBefore: now, limit: 5000)]) { _ in }
        let countDue = lastCounted.withLock { last in
            guard ProcessClock.now - last >= Self.countInterval else { return false }
            last = ProcessClock.now
            return true
        }
        if countDue, let count = try? engine.answerCount() { metrics.stored.set(Double(count)) }
    }

    private func stillRunning() -> Response {
        metrics.conflicts.increment()
        return .problem(
            status: 409,
            detail: "a request with this \(IdempotentRequest.header) is still "
                + "running; retry once it is answered", headers: HTTPHeaders([("Retry-After", "1")]))
    }

    private func mismatch(_ request: IdempotentRequest) -> Response {
        metrics.mismatches.increment()
        return .problem(
            status: 422,
            detail: "this \(IdempotentRequest.header) was used for another request (another operation, "
                + "session or body; POST /action and POST /sessions/{id}/actions are one operation); a key "
                + "names one request: send a new key for a new request")
    }
}

/// A key in its caller's space, both told apart byte for byte: the scope is a subject.
private struct KeyInScope: Hashable {
    let scope: Bytewise<String>
    let key: Bytewise<String>
}

extension IdempotentRequest {
    fileprivate var id: KeyInScope { KeyInScope(scope: Bytewise(scope), key: Bytewise(key)) }
}

/// `reactord_idempotent_replays_total`, `reactord_idempotency_conflicts_total{status}` (409: the
/// first still running; 422: the key named another request), `reactord_idempotency_keys_stored`.
struct IdempotencyMetrics: Sendable {
    let replays: Counter
    let conflicts: Counter
    let mismatches: Counter
    let stored: Gauge

    init(registry: MetricsRegistry) {
        replays = registry.makeCounter(
            name: "reactord_idempotent_replays_total",
            help: "Requests answered with the answer kept under their Idempotency-Key.")
        let conflicts = "Requests refused for their Idempotency-Key: 409 while the first runs, 422 for another request."
        self.conflicts = registry.makeCounter(
            name: "reactord_idempotency_conflicts_total", help: conflicts,
            labels: [("status", "409")])
        mismatches = registry.makeCounter(
            name: "reactord_idempotency_conflicts_total", help: conflicts,
            labels: [("status", "422")])
        stored = registry.makeGauge(
            name: "reactord_idempotency_keys_stored",
            help: "Answers kept under Idempotency-Keys (with a durable store, counted once a minute).")
        stored.set(0)
    }
}
