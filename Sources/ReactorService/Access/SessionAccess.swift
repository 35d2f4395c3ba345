import ConcurrencyPrimitives
import Dispatch
import MicroHTTP
import ReactorStore

/// Who may do what, in one place: every route asks this seam and nothing else.
///
/// - With a JWT configured (`ServiceConfiguration.jwt`), every session route needs a bearer token
///   (the event stream also takes `?access_token=`, since EventSource sends no headers). The
///   token's `sub` owns the sessions it creates; only that subject may read, act on, follow or
///   delete them (401 without a valid token, 403 with another subject's). Each subject has at
///   most `maxSessionsPerSubject` sessions (429).
/// - Without one (open mode), the session id is the capability, as before, and session creation
///   is rate limited per client address (429).
/// - Writes to the global user need the admin token, or a JWT carrying the admin claim.
///
/// Tokens are never echoed: problems carry the reason only, and the access log redacts
/// `access_token`.
final class SessionAccess: Sendable {
    let verification: JWTVerification?
    private let adminToken: String
    private let metrics: ServiceMetrics
    private let limits: LimitNotices
    private let quota: SubjectQuota
    private let createRate: CreationRateLimit?
    private let quotaRetryAfter: Int
    private let verified = VerifiedTokens()
    /// With a durable store: a subject's sessions as the store counts them (set before listening).
    private let storedSessions = Locked<(@Sendable (String) -> Result<Int, StoreError>)?>(nil)
    /// In a cluster: the shared store, where every node's creations take their places.
    private let sharedCreations = Locked<(any ClusterStore)?>(nil)

    init(configuration: ServiceConfiguration, adminToken: String, metrics: ServiceMetrics, limits: LimitNotices) {
        verification = configuration.jwt
        self.adminToken = adminToken
        self.metrics = metrics
        self.limits = limits
        quota = SubjectQuota(limit: configuration.maxSessionsPerSubject)
        createRate =
            configuration.jwt == nil && configuration.sessionCreateRate > 0
            ? CreationRateLimit(rate: configuration.sessionCreateRate, burst: configuration.sessionCreateBurst)
            : nil
        quotaRetryAfter = Int(SessionSweeper.interval(configuration, durable: false).rounded(.up))
    }

    var isAuthenticating: Bool { verification != nil }

    // MARK: who is asking

    /// The caller's principal: `.success(nil)` in open mode, the token's principal with
    /// authentication on, else the 401 to answer (403 for the admin token, which is no subject's).
    /// `queryToken`: `?access_token=` is accepted too.
    func authenticate(_ request: Request, queryToken: Bool = false) -> Result<Principal?, Refusal> {
        guard let verification else { return .success(nil) }
        let token: Substring
        switch Self.bearer(in: request, queryToken: queryToken) {
        case let .success(found): token = found
        case let .failure(rejection): return .failure(refuse(rejection))
        }
        switch verify(token, with: verification) {
        case let .success(principal): return .success(principal)
        case .failure where isAdminToken(token):
            // Not a malformed JWT but the wrong credential: the admin token reads any session's
            // history, yet names no subject to own or act on a session as.
            return .failure(
                Refusal(
                    response: forbidden(
                        "forbidden",
                        "the admin token cannot act on sessions: it is no user's token and names no subject; "
                            + "send a user's JWT")))
        case let .failure(rejection): return .failure(refuse(rejection))
        }
    }

    /// Whether `token` is the admin token (compared in constant time).
    private func isAdminToken(_ token: Substring) -> Bool {
        AdminAuthorization.constantTimeEquals(Array(token.utf8), Array(adminToken.utf8))
    }

    /// `verification.verify`, answered from the tokens verified before when it can.
    private func verify(_ token: Substring, with verification: JWTVerification) -> Result<Principal, TokenRejection> {
        let now = WallClock.now
        if let known = verified.principal(for: token) {
            if let rejection = verification.checkTime(known.claims, now: now) { return .failure(rejection) }
            return .success(known)
        }
        let result = verification.verify(token, now: now)
        if case let .success(principal) = result { verified.insert(principal, for: token, now: now) }
        return result
    }

    /// A refusal, as the response to send.
    struct Refusal: Error, Sendable {
        let response: Response
    }

    private static func bearer(in request: Request, queryToken: Bool) -> Result<Substring, TokenRejection> {
        if let (header, count) = request.headers.first("Authorization") {
            // Which of several a proxy would read is anyone's guess: none is.
            guard count == 1 else {
                return .failure(
                    TokenRejection(.malformed, "the Authorization header is sent \(count) times; send it once"))
            }
            let parts = header.split(separator: " ", maxSplits: 1, omittingEmptySubsequences: true)
            guard parts.first?.lowercased() == "bearer" else {
                return .failure(TokenRejection(.malformed, "the Authorization header must use the Bearer scheme"))
            }
            let token = parts.count == 2 ? parts[1].trimmingSpaceAndTab() : ""
            guard !token.isEmpty else {
                return .failure(TokenRejection(.malformed, "the Authorization header's bearer token is empty"))
            }
            return .success(token)
        }
        if queryToken, let token = request.query["access_token"] { return .success(Substring(token)) }
        return .failure(
            TokenRejection(
                .missing,
                queryToken
                    ? "this route needs a bearer token: 'Authorization: Bearer <token>' or '?access_token=<token>'"
                    : "this route needs 'Authorization: Bearer <token>'"))
    }

    private func refuse(_ rejection: TokenRejection) -> Refusal {
        metrics.countAuthFailure(rejection.reason.rawValue)
        // RFC 6750 3.1: no error code when the request had no credentials at all.
        let challenge = rejection.reason == .missing ? #"Bearer realm="reactord""# : #"Bearer error="invalid_token""#
        return Refusal(
            response: .problem(
                status: 401, detail: rejection.detail,
                headers: HTTPHeaders([("WWW-Authenticate", challenge)])))
    }

    // MARK: whose session

    /// nil when `principal` may use `session`; else the 403 to answer. Open mode: always nil.
    func authorize(_ session: any Session, for principal: Principal?) -> Response? {
        authorize(owner: session.owner, for: principal)
    }

    /// The same for a session known by its owner only (one another node holds, followed here).
    func authorize(owner: String?, for principal: Principal?) -> Response? {
        guard verification != nil else { return nil }
        guard let principal, let owner else {
            return forbidden(
                "forbidden",
                "this session has no owner (it was made without authentication, or forked with the admin "
                    + "token): no token may act on it")
        }
        guard Bytewise(owner) == Bytewise(principal.subject) else {
            return forbidden("forbidden", "this session belongs to another subject")
        }
        return nil
    }

    /// A 403: the request may not do this with the credential it carries (another subject's
    /// session, an ordinary token or a wrong one on the admin routes; RFC 6750 3.1).
    private func forbidden(_ reason: String, _ detail: String) -> Response {
        metrics.countAuthFailure(reason)
        return .problem(
            status: 403, detail: detail,
            headers: HTTPHeaders([("WWW-Authenticate", #"Bearer error="insufficient_scope""#)]))
    }

    // MARK: making sessions

    /// A place for session `id` of `principal`, or the 429 to answer: the subject's quota
    /// with authentication on, the client address's creation rate without. The ticket must be
    /// settled (`opened` after `ServiceContext.adopt`, or `cancel`).
    func admitCreation(_ request: Request, for principal: Principal?, session id: String) -> Result<
        CreationTicket, Refusal
    > {
        if let principal {
            let subject = principal.subject
            let shared = sharedCreations.current
            let reserved: Bool
            do throws(StoreError) {
                if let shared {
                    reserved = try shared.reserveCreation(id, owner: subject, limit: quota.limit)
                } else {
                    reserved = try quota.reserve(subject, stored: storedSessions.current)
                }
            } catch {
                return .failure(Refusal(response: Problems.store(error)))
            }
            guard reserved else {
                metrics.countLimited("sessions_per_subject")
                limits.hit("a session refused: its subject has \(quota.limit) sessions (--max-sessions-per-subject)")
                return .failure(
                    Refusal(
                        response: .problem(
                            status: 429,
                            detail: "this subject has \(quota.limit) sessions (stored, or being made), its most; "
                                + "delete one or let one expire",
                            headers: HTTPHeaders([("Retry-After", String(quotaRetryAfter))]))))
            }
            return .success(
                CreationTicket(
                    quota: shared == nil ? quota : nil, subject: subject, rate: nil, peer: "",
                    sharedPlace: shared.map { ($0, id) }))
        }
        let peer = request.client ?? ""  // behind a trusted proxy, the client it forwarded for
        if let createRate, let wait = createRate.take(peer) {
            metrics.countLimited("session_create_rate")
            limits.hit("a session refused: its address created sessions faster than --session-create-rate")
            return .failure(
                Refusal(
                    response: .problem(
                        status: 429,
                        detail: "too many sessions created from this address; at most \(createRate.describe)",
                        headers: HTTPHeaders([("Retry-After", String(wait))]))))
        }
        return .success(CreationTicket(quota: nil, subject: "", rate: createRate, peer: peer))
    }

    /// A reserved place in a subject's quota, or a creation token of a client address, until the
    /// session is adopted or not made.
    struct CreationTicket {
        fileprivate let quota: SubjectQuota?
        fileprivate let subject: String
        fileprivate let rate: CreationRateLimit?
        fileprivate let peer: String
        /// The place taken in a cluster's store, and the session it is for.
        fileprivate var sharedPlace: (store: any ClusterStore, id: String)?

        /// The session was not made (a full table, say): its place, or its token, is free again.
        func cancel() {
            quota?.release(pending: subject)
            rate?.giveBack(peer)
            releaseSharedPlace()
        }
        /// The session is made and counted (by `sessionOpened`, or stored): the reservation ends.
        func opened() {
            quota?.release(pending: subject)
            releaseSharedPlace()
        }

        /// Off the calling thread (the journal's, after a commit): a round trip to the database,
        /// tried again every second for the place's minute while the database cannot be reached
        /// (a creation that failed with it would keep its subject's place until then).
        private func releaseSharedPlace() {
            guard let (store, id) = sharedPlace else { return }
            @Sendable func release(tries: Int) {
                if !store.releaseCreation(id), tries > 1 {
                    DispatchQueue.global().asyncAfter(deadline: .now() + 1) { release(tries: tries - 1) }
                }
            }
            DispatchQueue.global().async { release(tries: 60) }
        }
    }

    /// Counts each subject's sessions with `count` (a durable store's), from now on.
    func countStoredSessions(with count: @escaping @Sendable (String) -> Result<Int, StoreError>) {
        storedSessions.withLock { $0 = count }
    }

    /// Takes each creation's place in `store`, shared by every node of a cluster, from now on.
    func reserveCreations(in store: any ClusterStore) {
        sharedCreations.withLock { $0 = store }
    }

    /// A session entered memory: counted for its owner, with the memory store.
    func sessionOpened(_ session: any Session) {
        if let owner = session.owner, countsInMemory { quota.opened(owner) }
    }

    /// A session left memory: uncounted, with the memory store.
    func sessionEnded(_ session: any Session) {
        if let owner = session.owner, countsInMemory { quota.closed(owner) }
    }

    /// The memory store: sessions are counted here as they open and end.
    private var countsInMemory: Bool { storedSessions.current == nil && sharedCreations.current == nil }

    // MARK: event streams

    /// Ends `stream` of `hub` with `event: end` (reason `token-expired`) at the token's `exp`,
    /// so the client fetches a new token and resumes with Last-Event-ID.
    func endAtExpiry(_ stream: EventStream, of hub: EventHub, for principal: Principal?) {
        guard let principal, let expiry = principal.claims["exp"]?.number else { return }
        let seconds = max(0, min(expiry - WallClock.now, 1e9))
        DispatchQueue.global().asyncAfter(deadline: .now() + seconds) { [weak stream, weak hub] in
            guard let stream else { return }
            if let hub {
                hub.end(stream, reason: "token-expired")
            } else {
                stream.close(finalFrame: EventFrames.end(reason: "token-expired"))
            }
        }
    }

    // MARK: history readers

    /// Who asks for a session's history (the action log, past states, a fork): an admin (the
    /// admin token, or a JWT with the admin claim) may read every session's; anyone else
    /// is authenticated as for the session itself. The principal is nil for the admin token
    /// and in open mode.
    func authenticateReader(_ request: Request) -> Result<(principal: Principal?, isAdmin: Bool), Refusal> {
        if case let .success(token) = Self.bearer(in: request, queryToken: false), isAdminToken(token) {
            return .success((nil, true))
        }
        switch authenticate(request) {
        case let .success(principal):
            return .success((principal, principal.map { verification?.isAdmin($0) == true } ?? false))
        case let .failure(refusal): return .failure(refusal)
        }
    }

    // MARK: admin

    /// nil when the request may write the global user: it carries the admin token, or a JWT
    /// with the admin claim; else the 401 or 403 to answer.
    func authorizeAdmin(_ request: Request) -> Response? {
        let token: Substring
        switch Self.bearer(in: request, queryToken: false) {
        case let .success(found): token = found
        case let .failure(rejection) where rejection.reason == .missing:
            return refuse(
                TokenRejection(
                    .missing,
                    "this route needs 'Authorization: Bearer <admin token>'"
                        + (verification == nil ? "" : " or a token with the '\(verification!.adminClaim)' claim"))
            ).response
        case let .failure(rejection): return refuse(rejection).response
        }
        if isAdminToken(token) { return nil }
        if let verification, token.utf8.filter({ $0 == UInt8(ascii: ".") }).count == 2 {
            switch verify(token, with: verification) {
            case let .failure(rejection):
                return refuse(rejection).response
            case let .success(principal) where verification.isAdmin(principal):
                return nil
            case .success:
                return forbidden(
                    "not_admin", "this token's subject is no admin: it lacks '\"\(verification.adminClaim)\": true'")
            }
        }
        return forbidden("not_admin", "the bearer token is not the admin token")
    }
}
