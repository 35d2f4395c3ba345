import MicroHTTP

#if canImport(FoundationEssentials)
import FoundationEssentials
#else
import Foundation
#endif

/// `{"session": ID, "action": {...}}` decoded in one pass: the session is looked up (or brought
/// back from the store) as soon as its id is read, and decodes the action as its reactor's
/// `Action`. The action is the request's own: the route hands it to the session whole
/// (`Session.perform`), which sends it into the reactor.
private struct ActionRequest {
    /// What the action's decoders find in `userInfo`: the service context, and the caller's
    /// `Principal` with authentication on.
    static let contextKey = CodingUserInfoKey(rawValue: "reactord.serviceContext")!
    static let principalKey = CodingUserInfoKey(rawValue: "reactord.principal")!

    let session: any Session
    let action: DecodedAction

    /// The common request in one parse, with no `Decoder` for the envelope: its `session` read
    /// as a string, its `action` decoded by the session's reactor. Anything else (not an object,
    /// a field missing or mistyped, an action that does not decode) takes the general path, whose
    /// errors name the problem; a session that cannot be used is the same error on both.
    /// `found`: the session, once its id was read and it may be used (for the metrics of an
    /// action that then fails to decode).
    static func decode(
        _ body: [UInt8], _ context: ServiceContext, principal: Principal?, forwarded: Bool, mayWait: Bool,
        userInfo: [CodingUserInfoKey: any Sendable], decoder: JSONDecoder,
        found: inout (any Session)?
    ) throws(RequestError) -> sending ActionRequest {
        guard let envelope = RequestJSONDecoder.TopLevelObject(parsing: body), let id = envelope.string("session")
        else {
            return try decodeInGeneral(
                body, context, principal: principal, mayWait: mayWait, userInfo: userInfo, decoder: decoder)
        }
        let session = try usable(id, context, principal: principal, forwarded: forwarded, mayWait: mayWait)
        found = session
        var mismatch: RequestJSONDecoder.IntegerMismatch?
        if let action = session.decodeAction(in: envelope, userInfo: userInfo, integerMismatch: &mismatch) {
            return ActionRequest(session: session, action: action)
        }
        // The action needs JSONDecoder (to decode, or to word its error), with the session found.
        let action = try session.decodeDeclinedAction(
            from: body, inEnvelope: true, with: decoder, integerMismatch: mismatch)
        return ActionRequest(session: session, action: action)
    }

    /// A body whose envelope the fast read cannot use (no object it accepts, no string `session`),
    /// read as `RequestDecoding.decode` reads it, in the order of its fields' errors: the session
    /// (whose lookup may fail), then its action.
    private static func decodeInGeneral(
        _ body: [UInt8], _ context: ServiceContext, principal: Principal?, mayWait: Bool,
        userInfo: [CodingUserInfoKey: any Sendable], decoder: JSONDecoder
    ) throws(RequestError) -> sending ActionRequest {
        let id = try RequestDecoding.decode(SessionField.self, from: body, with: decoder, userInfo: userInfo).session
        let session = try usable(id, context, principal: principal, mayWait: mayWait)
        let action = try session.decodeDeclinedAction(from: body, inEnvelope: true, with: decoder, integerMismatch: nil)
        return ActionRequest(session: session, action: action)
    }

    /// The envelope's `session`, read before its action (whose type depends on the session).
    private struct SessionField: Decodable {
        let session: String
    }

    /// `POST /sessions/{id}/actions`: the session from the path, the body the action alone.
    static func decode(
        action body: [UInt8], of id: String, _ context: ServiceContext, principal: Principal?,
        forwarded: Bool, mayWait: Bool, userInfo: [CodingUserInfoKey: any Sendable],
        found: inout (any Session)?
    ) throws(RequestError) -> sending ActionRequest {
        let session = try usable(id, context, principal: principal, forwarded: forwarded, mayWait: mayWait)
        found = session
        // The common request: decoded by the session at once. Else, as `RequestDecoding.decode`
        // does: no JSON is a 400, and what the fast decoder declined goes to `JSONDecoder`, whose
        // errors name the problem.
        var mismatch: RequestJSONDecoder.IntegerMismatch?
        var syntax: RequestJSONDecoder.SyntaxProblem?
        if let action = session.decodeAction(
            body: body, userInfo: userInfo, integerMismatch: &mismatch, syntaxProblem: &syntax)
        {
            return ActionRequest(session: session, action: action)
        }
        try RequestDecoding.refuse(syntax)
        let action = try session.decodeDeclinedAction(
            from: body, inEnvelope: false, with: foundationDecoder(userInfo), integerMismatch: mismatch)
        return ActionRequest(session: session, action: action)
    }

    /// For a body the fast decoder declines.
    private static func foundationDecoder(_ userInfo: [CodingUserInfoKey: any Sendable]) -> JSONDecoder {
        let decoder = JSONDecoder()
        decoder.userInfo = userInfo
        return decoder
    }

    /// The session `id` names, if the caller may use it. `forwarded`, `mayWait`: see
    /// `ServiceContext.session`.
    private static func usable(
        _ id: String, _ context: ServiceContext, principal: Principal?,
        forwarded: Bool = false, mayWait: Bool
    ) throws(RequestError) -> any Session {
        let session: any Session
        switch context.session(id, forwarded: forwarded, mayWait: mayWait) {
        case let .success(found): session = found
        case .failure(.unknown): throw .unknownSession
        case let .failure(error): throw .session(error)
        }
        if let refusal = context.access.authorize(session, for: principal) { throw .refused(refusal) }
        return session
    }
}

extension RouteTable {
    /// `POST /action` (`{"session": ID, "action": {...}}`) and `POST /sessions/{id}/actions` (the
    /// action alone, the session in the path, where a balancer can hash on it): one contract. The
    /// action runs inline on this thread, serialised with the session's other work; the answer
    /// is the state after its synchronous mutations, sent once what it changed is committed.
    mutating func addActionRoute() {
        let context = context
        // One decoder for every request: its options never change after this.
        let userInfo: [CodingUserInfoKey: any Sendable] = [ActionRequest.contextKey: context]
        let decoder = JSONDecoder()
        decoder.userInfo = userInfo
        add(.POST, "/action") { request in
            // The action as sent is what an idempotency key names, whichever route carried it.
            let action = { @Sendable in JSONWhitespace.member("action", of: request.body) ?? request.body[...] }
            @Sendable func attempt(mayWait: Bool) -> Reply? {
                Self.act(on: request, action: action, context, mayWait: mayWait, userInfo: userInfo, decoder: decoder) {
                    principal, info, decoder, found throws(RequestError) in
                    try ActionRequest.decode(
                        request.body, context, principal: principal, forwarded: request.isForwarded,
                        mayWait: mayWait, userInfo: info, decoder: decoder, found: &found)
                }
            }
            return attempt(mayWait: false) ?? Self.retryOffThread(context, attempt)
        }
        add(.POST, "/sessions/{id}/actions") { request in
            @Sendable func attempt(mayWait: Bool) -> Reply? {
                Self.act(
                    on: request, action: { JSONScan.withoutByteOrderMark(request.body[...]) }, context,
                    mayWait: mayWait, userInfo: userInfo,
                    decoder: decoder
                ) {
                    principal, info, _, found throws(RequestError) in
                    try ActionRequest.decode(
                        action: request.body, of: request.pathParameters["id"] ?? "", context,
                        principal: principal, forwarded: request.isForwarded, mayWait: mayWait, userInfo: info,
                        found: &found)
                }
            }
            return attempt(mayWait: false) ?? Self.retryOffThread(context, attempt)
        }
    }

    private typealias ActionDecoding = (
        _ principal: Principal?, _ userInfo: [CodingUserInfoKey: any Sendable], _ decoder: JSONDecoder,
        _ found: inout (any Session)?
    ) throws(RequestError) -> sending ActionRequest

    /// `actionJSON`: the action as sent, read only when the request has an idempotency key or the
    /// session keeps an action log. Nil when the session or the key needs the store, which it may
    /// not wait for here (`mayWait` false: `retryOffThread`).
    private static func act(
        on request: Request, action actionJSON: () -> ArraySlice<UInt8>, _ context: ServiceContext, mayWait: Bool,
        userInfo: [CodingUserInfoKey: any Sendable], decoder: JSONDecoder, _ decode: ActionDecoding
    ) -> Reply? {
        guard !context.isStopping else { return .response(Self.notApplied(Problems.stopping, kind: nil, context)) }
        var requestInfo = userInfo
        var requestDecoder = decoder
        var principal: Principal?
        if context.access.isAuthenticating {
            switch context.access.authenticate(request) {
            case let .success(caller): principal = caller
            case let .failure(refusal): return .response(Self.notApplied(refusal.response, kind: nil, context))
            }
            requestInfo[ActionRequest.principalKey] = principal
            // The caller travels with this request's decoding only (the shared decoder is never mutated).
            requestDecoder = JSONDecoder()
            requestDecoder.userInfo = requestInfo
        }
        let ifMatch: Preconditions.Condition?
        do throws(PreconditionError) {
            ifMatch = try Preconditions.condition("If-Match", of: request)
        } catch {
            return .response(Self.notApplied(error.response, kind: nil, context))
        }
        var found: (any Session)?
        var ticket: IdempotencyLedger.Ticket?
        // Found once: a keyed action's digest and its log entry both read it.
        var sentAction: ArraySlice<UInt8>?
        func actionSent() -> ArraySlice<UInt8> {
            if let sentAction { return sentAction }
            let read = actionJSON()
            sentAction = read
            return read
        }
        do throws(RequestError) {
            var acted: any Session
            var outcome = ActionResult.gone
            var attempts = 0
            // A second attempt when its reactor was let go on the way, the action not applied: the
            // session was deleted or expired (found no more: 404), or unloaded, or dropped after a
            // failed commit, to come back from the store on its next use (found again, or the store's error).
            repeat {
                let action = try decode(principal, requestInfo, requestDecoder, &found)
                let session = action.session
                acted = session
                if ticket == nil {
                    if Self.keyLookupWaits(request, context, mayWait: mayWait) { return nil }
                    // Once the session is found here (held by this node, in a cluster): the store's
                    // word on the key is final only then.
                    switch Self.admit(request, principal, .action, session: session.id, body: actionSent(), context) {
                    case let .answer(response): return .response(response)
                    case let .run(admitted): ticket = admitted
                    case nil: break
                    }
                }
                let keep = ticket.map { ticket in
                    { @Sendable (snapshot: EventHub.Snapshot) in
                        ticket.keep(SessionJSON.response(of: session, snapshot), session: session.id)
                    }
                }
                let source =
                    context.configuration.actionLogLength > 0
                    ? ActionSource(
                        json: actionSent(), subject: principal?.subject,
                        idempotencyKey: ticket.flatMap { $0.request.isForwarders ? nil : $0.request.key })
                    : nil
                outcome = session.perform(action.action, ifMatch: ifMatch, keep: keep, source: source)
                attempts += 1
            } while outcome.isGone && attempts < 2 && !context.isStopping
            let session = acted
            switch outcome {
            case let .applied(snapshot):
                return Self.answer(afterCommitOf: session.hub, through: snapshot.mark, context) { [ticket] failure in
                    ticket?.finish()  // before the answer: a repeat after it finds the key kept
                    if let failure { return Self.notApplied(Problems.store(failure), kind: session.kind, context) }
                    context.metrics.countAction(kind: session.kind, outcome: .applied)
                    context.placeAfterRequest(request, for: session)
                    // Made once under a key: the client gets the copy a repeat will get.
                    return ticket?.keptResponse ?? SessionJSON.response(of: session, snapshot)
                }
            case .stale:
                // Where it stands as clients may see it: once what is pending is committed.
                return Self.answer(afterCommitOf: session.hub, context) { _ in
                    Self.notApplied(
                        Preconditions.failed(session.hub.snapshot, condition: ifMatch), kind: session.kind, context)
                }
            case .gone:
                // Stopping, or found each time and let go again before the action ran (each failed
                // commit lets it go): it exists, so 503, never 404.
                let refusal = context.isStopping ? Problems.stopping : Problems.sessionInFlux
                return .response(Self.notApplied(refusal, kind: session.kind, context))
            }
        } catch .session(.heldElsewhere(let address)) {
            return Self.forward(request, to: address, context)
        } catch .session(.needsStore) {
            return nil
        } catch {
            // Deleted since, or not to be loaded now: a repeat of an action it took still gets
            // its answer, which needs no reactor. Not when this request runs under its key
            // already (the session went between its two looks): the key's run is its own.
            if ticket == nil, error.isAnsweredByAKeptAnswer, IdempotentRequest.isSent(with: request) {
                if Self.keyLookupWaits(request, context, mayWait: mayWait) { return nil }
                if let id = request.pathParameters["id"]
                    ?? RequestJSONDecoder.TopLevelObject(parsing: request.body)?.string("session"),
                    let kept = Self.keptAnswer(request, principal, .action, session: id, body: actionSent(), context)
                {
                    return .response(kept)
                }
            }
            return .response(Self.notApplied(Problems.body(error), kind: found?.kind, context))
        }
    }

    /// A POST /action answered without applying it, counted by its outcome under the session's
    /// kind (`unknown` before a session was found). Refusals MicroHTTP makes before the route
    /// runs are counted by `ServiceMetrics.countRefusal`.
    private static func notApplied(_ response: Response, kind: String?, _ context: ServiceContext) -> Response {
        context.metrics.countAction(
            kind: kind ?? "unknown",
            outcome: ServiceMetrics.actionOutcome(status: response.status) ?? .unavailable)
        return response
    }
}

extension RequestError {
    /// Where the session cannot run the action, but a repeat's kept answer, if any, is final:
    /// it is gone, or memory has no room for it now, or it cannot be restored.
    fileprivate var isAnsweredByAKeptAnswer: Bool {
        switch self {
        case .unknownSession, .session(.memoryFull), .session(.unrestorable), .session(.beingDeleted): return true
        default: return false
        }
    }
}
