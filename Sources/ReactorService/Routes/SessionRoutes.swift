import ConcurrencyPrimitives
import MicroHTTP
import ReactorStore

extension RouteTable {
    mutating func addSessionRoutes() {
        let context = context
        add(.POST, "/sessions") { request in
            // A subject's quota counts its stored sessions; a key is looked up.
            let readsStore =
                context.persistence != nil
                && (context.access.isAuthenticating || IdempotentRequest.isLookedUp(request))
            return Self.answer(offThreadIf: readsStore, context) { Self.createSession(request, context) }
        }
        add(.GET, "/sessions/{id}") { request in
            Self.readSession(request, context, mayWait: false)
                ?? Self.retryOffThread(context) { Self.readSession(request, context, mayWait: $0) }
        }
        add(.DELETE, "/sessions/{id}") { request in
            Self.deleteSession(request, context, mayWait: false)
                ?? Self.retryOffThread(context) { Self.deleteSession(request, context, mayWait: $0) }
        }
    }

    /// `GET /sessions/{id}`; nil when finding the session needs the store (see `retryOffThread`).
    private static func readSession(_ request: Request, _ context: ServiceContext, mayWait: Bool) -> Reply? {
        let principal: Principal?
        switch context.access.authenticate(request) {
        case let .success(found): principal = found
        case let .failure(refusal): return .response(refusal.response)
        }
        let ifNoneMatch: Preconditions.Condition?
        let ifMatch: Preconditions.Condition?
        do throws(PreconditionError) {
            ifNoneMatch = try Preconditions.condition("If-None-Match", of: request)
            ifMatch = try Preconditions.condition("If-Match", of: request)
        } catch {
            return .response(error.response)
        }
        switch context.session(
            request.pathParameters["id"] ?? "", forwarded: request.isForwarded, mayWait: mayWait)
        {
        case let .success(session):
            if let refusal = context.access.authorize(session, for: principal) { return .response(refusal) }
            session.hub.touch()
            // Checked now: a bad name need not wait for a commit to be told so.
            let view: FieldFilter?
            switch FieldFilter.requested(
                by: request, stateJSON: session.hub.snapshot.stateJSON, stateFieldNames: session.stateFieldNames)
            {
            case let .success(found): view = found
            case let .failure(error): return .response(error.response)
            }
            // After what is pending commits: a session restored just now may hold a change
            // (the user, changed while it was stored) that clients may not see before then.
            // A write that failed leaves the committed state, which is still the answer.
            return Self.answer(afterCommitOf: session.hub, context) { _ in
                let snapshot = session.hub.snapshot
                if let ifMatch, !Preconditions.holds(ifMatch, at: snapshot.version) {
                    return Preconditions.failed(snapshot, condition: ifMatch)
                }
                let current = SessionJSON.response(of: session, snapshot, view: view)
                if let ifNoneMatch, Preconditions.holds(ifNoneMatch, at: snapshot.version, view: view) {
                    return Preconditions.notModified(current)
                }
                return current
            }
        case let .failure(.heldElsewhere(address)):
            return Self.forward(request, to: address, context)
        case .failure(.needsStore):
            return nil
        case let .failure(error):
            return .response(Problems.session(error))
        }
    }

    /// `DELETE /sessions/{id}`; nil when finding the session needs the store (see `retryOffThread`).
    private static func deleteSession(_ request: Request, _ context: ServiceContext, mayWait: Bool) -> Reply? {
        let id = request.pathParameters["id"] ?? ""
        let principal: Principal?
        switch context.access.authenticate(request) {
        case let .success(found): principal = found
        case let .failure(refusal): return .response(refusal.response)
        }
        let ifMatch: Preconditions.Condition?
        do throws(PreconditionError) {
            ifMatch = try Preconditions.conditionOnDelete(of: request)
        } catch {
            return .response(error.response)
        }
        var ticket: IdempotencyLedger.Ticket?
        // A stored session is loaded first: one path for deleting it, its reactor and its streams.
        // Twice at most: it may leave memory (idle, or let go) between its lookup and its removal.
        for _ in 0..<2 {
            let session: any Session
            switch context.session(id, forwarded: request.isForwarded, mayWait: mayWait) {
            case let .success(found): session = found
            case let .failure(.heldElsewhere(address)): return Self.forward(request, to: address, context)
            case .failure(.needsStore): return nil
            case let .failure(error) where error.isGoneOrGoing:
                // Gone, or going: a repeat of the delete that removes it still gets its answer, or
                // 409 while it runs (unless this request runs under the key already: gone
                // between its two looks).
                if ticket == nil, Self.keyLookupWaits(request, context, mayWait: mayWait) { return nil }
                let kept =
                    ticket == nil ? Self.keptAnswer(request, principal, .deleteSession, session: id, context) : nil
                return .response(kept ?? Problems.session(error))
            case let .failure(.unrestorable(detail, owner)):
                return Self.deleteUnrestorable(
                    request, principal, id, owner: owner, ifMatch: ifMatch, ticket: ticket,
                    unrestorable: Problems.session(.unrestorable(detail, owner: owner)), context)
            case let .failure(error): return .response(Problems.session(error))
            }
            if let refusal = context.access.authorize(session, for: principal) { return .response(refusal) }
            if ticket == nil {
                if Self.keyLookupWaits(request, context, mayWait: mayWait) { return nil }
                // Once the session is found here (held by this node, in a cluster), as for an action.
                switch Self.admit(request, principal, .deleteSession, session: id, context) {
                case let .answer(response): return .response(response)
                case let .run(admitted): ticket = admitted
                case nil: break
                }
            }
            if let ifMatch {
                // The version checked and the reactor let go in one step: no action comes between.
                switch session.release(ifAt: ifMatch) {
                case .stale:
                    return Self.answer(afterCommitOf: session.hub, context) { _ in
                        Preconditions.failed(session.hub.snapshot, condition: ifMatch)
                    }
                case .gone: continue
                case .applied: break
                }
            }
            guard context.takeForDeletion(session) else { continue }
            return Self.answerDeletion(of: id, ticket: ticket, context) { answer, then in
                context.remove(session, reason: "deleted", answer: answer, then: then)
            }
        }
        return .response(context.isStopping ? Problems.stopping : Problems.sessionInFlux)
    }

    /// DELETE of a stored session that cannot be restored: its row goes, so that it need not
    /// wait for its TTL (nor hold a place in its owner's quota). It stays, answering
    /// `unrestorable` (409), when what the request asks cannot be checked: the owner of a
    /// damaged row (with authentication on), or a version in `If-Match` or any `If-None-Match`
    /// (its state does not decode; `If-Match: *` holds: it exists).
    private static func deleteUnrestorable(
        _ request: Request, _ principal: Principal?, _ id: String, owner: StoredOwner,
        ifMatch: Preconditions.Condition?, ticket: IdempotencyLedger.Ticket?, unrestorable: Response,
        _ context: ServiceContext
    ) -> Reply {
        guard let persistence = context.persistence, let key = SessionKey(id) else { return .response(unrestorable) }
        switch owner {
        case let .read(subject):
            if let refusal = context.access.authorize(owner: subject, for: principal) { return .response(refusal) }
        case .unreadable:
            if context.access.isAuthenticating { return .response(unrestorable) }
        }
        if let ifMatch, ifMatch != .any { return .response(unrestorable) }
        var ticket = ticket
        if ticket == nil {
            switch Self.admit(request, principal, .deleteSession, session: id, context) {
            case let .answer(response): return .response(response)
            case let .run(admitted): ticket = admitted
            case nil: break
            }
        }
        if let busy = persistence.beginDelete(stored: key, from: context) {
            let refusal = Problems.session(busy)
            ticket?.finish(giving: refusal)
            return .response(refusal)
        }
        return Self.answerDeletion(of: id, ticket: ticket, context) { answer, then in
            persistence.delete(stored: key, reason: "deleted", answer: answer, from: context, then: then)
        }
    }

    /// A DELETE's 204 once `remove` has committed the deletion, with the answer kept under the
    /// request's key (`ticket`) that `remove` writes in the same transaction.
    private static func answerDeletion(
        of id: String, ticket: IdempotencyLedger.Ticket?, _ context: ServiceContext,
        by remove:
            @escaping @Sendable (
                _ answer: StoredAnswer?, _ then: @escaping @Sendable (StoreError?) -> Void
            ) -> Void
    ) -> Reply {
        let deleted = Response(status: 204)
        let answer = ticket?.keep(deleted, session: id)
        return Self.answer(context) { [ticket] done in
            remove(answer) { failure in
                ticket?.finish()  // before the answer: a repeat after it finds the key kept
                done(failure.map(Problems.store) ?? deleted)
            }
        }
    }

    private struct CreateBody: Decodable {
        let reactor: String?

        private enum CodingKeys: String, CodingKey { case reactor }

        /// Absent means the default kind; `null` is no kind (422), as the spec's enum says.
        init(from decoder: any Decoder) throws {
            let container = try decoder.container(keyedBy: CodingKeys.self)
            reactor = container.contains(.reactor) ? try container.decode(String.self, forKey: .reactor) : nil
        }
    }

    private static func createSession(_ request: Request, _ context: ServiceContext) -> Reply {
        guard !context.isStopping else { return .response(Problems.stopping) }
        let principal: Principal?
        switch context.access.authenticate(request) {
        case let .success(found): principal = found
        case let .failure(refusal): return .response(refusal.response)
        }
        var ticket: IdempotencyLedger.Ticket?
        switch Self.admit(request, principal, .createSession, body: request.body[...], context) {
        case let .answer(response): return .response(response)
        case let .run(admitted): ticket = admitted
        case nil: break
        }
        let kinds = context.registry.names
        var kind = context.configuration.defaultReactor ?? kinds.first ?? ""
        // Only an empty body means "the default kind": whitespace alone is not a JSON document.
        if !request.body.isEmpty {
            do throws(RequestError) {
                if let named = try RequestDecoding.decode(CreateBody.self, from: request.body).reactor { kind = named }
            } catch {
                return .response(Problems.body(error))
            }
        }
        guard let factory = context.registry.factory(for: kind) else {
            return .response(
                .problem(
                    status: 422,
                    detail: "unknown reactor '\(Response.excerpt(kind))'; this server has: "
                        + kinds.joined(separator: ", ")))
        }
        return open(kind, factory, for: principal, request, ticket: ticket, context)
    }

    /// Opens a session of `kind` for `principal` (the creation limits and quotas apply), its
    /// reactor starting from `state` when one is given (a fork), else from its initial state.
    static func open(
        _ kind: String, _ factory: ReactorRegistry.Factory, for principal: Principal?, _ request: Request,
        ticket: IdempotencyLedger.Ticket?, restoring state: [UInt8]? = nil,
        _ context: ServiceContext
    ) -> Reply {
        let key = SessionID.make()
        let id = key.string
        let admission: SessionAccess.CreationTicket
        switch context.access.admitCreation(request, for: principal, session: id) {
        case let .success(admitted): admission = admitted
        case let .failure(refusal): return .response(refusal.response)
        }
        guard context.sessions.reserveStored() else {
            admission.cancel()
            context.limitNotices.hit("a session refused: the store holds its most (--max-stored-sessions)")
            return .response(
                .problem(
                    status: 507,
                    detail: "the store holds \(context.sessions.storedCapacity) sessions, "
                        + "its most (--max-stored-sessions); delete one or let one expire"))
        }
        guard context.reservePlace() else {
            admission.cancel()
            context.sessions.forgetStored()
            guard context.persistence == nil else { return .response(Problems.memoryFull) }
            var headers = HTTPHeaders()
            headers.add("Retry-After", String(Int(context.sweepInterval.rounded(.up))))
            return .response(
                .problem(
                    status: 503,
                    detail: "the session table is full (\(context.sessions.capacity) sessions); "
                        + "retry after idle sessions expire", headers: headers))
        }
        let session: any Session
        let hub = context.makeHub(id: id, kind: kind, owner: principal?.subject)
        // Its first write and the answer kept under the request's key go in one transaction.
        if ticket != nil { hub.holdWrites() }
        do {
            session = try factory(key, hub, principal, state)
        } catch {
            hub.releaseWrites(adding: nil)
            admission.cancel()
            context.sessions.cancelReservation()
            context.sessions.forgetStored()
            if state != nil {
                return .response(
                    .problem(status: 422, detail: "the state does not restore into a '\(kind)' reactor: \(error)"))
            }
            return .response(.problem(status: 500, detail: "the reactor could not be made: \(error)"))
        }
        // The session as it was made (the answer kept under a key is this very one).
        var created = SessionJSON.response(of: session, session.hub.latest, status: 201)
        created.headers.add("Location", "/sessions/\(id)")
        if let ticket { hub.releaseWrites(adding: ticket.keep(created, session: id)) }
        context.adopt(session)
        return answer(afterCommitOf: session.hub, context) { [ticket, created] failure in
            let given = failure.map(Problems.store)
            ticket?.finish(giving: given)  // before the answer: a repeat after it finds the key kept
            admission.opened()  // committed, so a durable store counts it now (or, failed, never will)
            return given ?? created
        }
    }
}

extension RouteTable {
    /// The request's `Idempotency-Key` admitted: nil when it has none; else whether it runs
    /// (`.run`), or the answer instead (a kept one, 409, 422, or the 400 for a malformed key).
    /// Keys are the caller's (`IdempotentRequest.scope`).
    static func admit(
        _ request: Request, _ principal: Principal?, _ kind: IdempotentRequest.Kind,
        session: @autoclosure () -> String = "", body: @autoclosure () -> ArraySlice<UInt8> = [],
        _ context: ServiceContext
    ) -> IdempotencyLedger.Admission? {
        let scope = IdempotentRequest.scope(of: kind, for: principal)
        switch IdempotentRequest.read(request, scope: scope, kind: kind, session: session(), body: body()) {
        case .none: return nil
        case let .malformed(refusal): return .answer(refusal)
        case let .key(idempotent): return context.idempotency.admit(idempotent)
        }
    }

    /// Whether admitting `request` would look its key up in a shared store, which a route may not
    /// wait for on libmicrohttpd's thread (`mayWait` false): in a cluster each lookup is a round
    /// trip to PostgreSQL (SQLite's are local, and a fresh key mostly answered from memory).
    static func keyLookupWaits(_ request: Request, _ context: ServiceContext, mayWait: Bool) -> Bool {
        !mayWait && context.cluster != nil && IdempotentRequest.isLookedUp(request)
    }

    /// What the request's key answers for a request whose session is gone: the answer kept, 409
    /// while the first request under it still runs (a delete's session leaves memory before its
    /// commit, which may yet succeed), 422 for another request under it, or the store's error.
    /// Nil when it has no key or a malformed one, or the key is free (then the session's absence
    /// is the answer).
    static func keptAnswer(
        _ request: Request, _ principal: Principal?, _ kind: IdempotentRequest.Kind, session: String,
        body: @autoclosure () -> ArraySlice<UInt8> = [], _ context: ServiceContext
    ) -> Response? {
        guard case let .answer(response)? = admit(request, principal, kind, session: session, body: body(), context),
            response.status != 400
        else { return nil }
        return response
    }

    /// The answer once what the request changed in `hub` is durable (up to `mark`, when it
    /// knows the mark of its own change; else everything made so far); at once with the memory
    /// store, or when nothing is left to write.
    static func answer(
        afterCommitOf hub: EventHub, through mark: UInt64? = nil, _ context: ServiceContext,
        _ response: @escaping @Sendable (StoreError?) -> Response
    ) -> Reply {
        guard context.persistence != nil else { return .response(response(nil)) }
        return .deferred { responder in
            hub.whenCommitted(through: mark) { failure in responder.respond(response(failure)) }
        }
    }

    /// A reply given by `work`, which calls its argument once with the answer: inline when it
    /// does so before returning (the memory store), else from the journal's thread later.
    static func answer(
        _ context: ServiceContext,
        _ work: @escaping @Sendable (@escaping @Sendable (Response) -> Void) -> Void
    ) -> Reply {
        guard context.persistence != nil else {
            let answered = Locked<Response?>(nil)
            work { response in answered.withLock { $0 = response } }
            if let response = answered.current { return .response(response) }
            return .response(.problem(status: 500, detail: "the request was not answered"))
        }
        return .deferred { responder in work { responder.respond($0) } }
    }
}
