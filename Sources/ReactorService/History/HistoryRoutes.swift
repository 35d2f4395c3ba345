import MicroHTTP
import ReactorStore

/// A session's history: its action log, its state at any version still kept, forks from one,
/// and the list of sessions the console picks from. Who may read a session's history is who
/// may use the session (its owner with authentication; whoever has its id without); the list
/// is for admins only.
extension RouteTable {
    mutating func addHistoryRoutes() {
        let context = context
        // Each reads the durable store (a page of the list, of the log, a state, the key of a
        // fork), away from libmicrohttpd's thread.
        func addReading(_ method: HTTPMethod, _ pattern: String, _ handler: @escaping Handler) {
            add(method, pattern) { request in
                Self.answer(offThreadIf: context.persistence != nil, context) { handler(request) }
            }
        }
        addReading(.GET, "/sessions") { request in
            if let refusal = context.access.authorizeAdmin(request) { return .response(refusal) }
            let after = request.query["after"] ?? ""
            let limit: Int
            switch Self.limit(of: request) {
            case let .success(found): limit = found
            case let .failure(refusal): return .response(refusal.response)
            }
            let page: [SessionSummary]
            if let engine = context.persistence?.engine {
                do throws(StoreError) {
                    page = try engine.sessions(after: after, limit: limit)
                } catch {
                    return .response(Problems.store(error))
                }
            } else {
                page = context.sessions.loaded.map { session in
                    SessionSummary(
                        id: session.id, kind: session.kind, owner: session.owner,
                        version: session.hub.snapshot.version, createdAt: 0, lastActive: 0)
                }.filter { after.utf8.lexicographicallyPrecedes($0.id.utf8) }
                    .sorted { $0.id.utf8.lexicographicallyPrecedes($1.id.utf8) }
                    .prefix(limit).map { $0 }
            }
            return .response(.json(HistoryJSON.sessions(page, limit: limit, timed: context.persistence != nil)))
        }
        addReading(.GET, "/sessions/{id}/actions") { request in
            Self.withReadableSession(request, context) { session, principal in
                guard let settings = context.actionLogSettings else { return .response(HistoryJSON.noLog) }
                let ndjson = request.query["format"] == "ndjson"
                if let format = request.query["format"], format != "ndjson", format != "json" {
                    return .response(.problem(status: 400, detail: "query parameter 'format' must be json or ndjson"))
                }
                var after: UInt64?  // nil: from the first entry, those at version 0 included
                if let text = request.query["after"] {
                    switch Self.version(text, named: "query parameter 'after'") {
                    case let .success(found): after = found
                    case let .failure(refusal): return .response(refusal.response)
                    }
                }
                // The export reads the whole log and does not use `limit`, but a malformed one is still
                // refused: the parameter's contract does not depend on the format.
                let limit: Int
                switch Self.limit(of: request) {
                case let .success(found): limit = ndjson ? HistoryJSON.largestPage : found
                case let .failure(refusal): return .response(refusal.response)
                }
                let reply = Self.answerOffThread(afterCommitOf: session.hub, context) { [after, limit] _ in
                    let read = { (after: UInt64?, limit: Int) throws(StoreError) -> [LoggedAction] in
                        guard let engine = context.persistence?.engine else {
                            return session.hub.loggedActions(after: after, limit: limit)
                        }
                        return try engine.loggedActions(
                            of: session.id, after: after, loggedSince: settings.oldestKept, limit: limit)
                    }
                    do throws(StoreError) {
                        guard ndjson else {
                            let (page, more) = HistoryJSON.bounded(try read(after, limit), limit: limit)
                            return .json(HistoryJSON.page(of: session.id, page, more: more))
                        }
                        // The whole log (bounded by --action-log), a page at a time, up to the export's
                        // size; past it the export ends where the next one starts (`Reactord-Next-After`).
                        var body: [UInt8] = []
                        var cursor = after
                        var next: UInt64?
                        while true {
                            let (page, more) = HistoryJSON.bounded(try read(cursor, limit), limit: limit)
                            for entry in page {
                                LoggedActionJSON.append(entry, to: &body, oneLine: true)
                                body.append(UInt8(ascii: "\n"))
                            }
                            guard more, let last = page.last else { break }
                            cursor = last.version
                            if body.count >= HistoryJSON.largestExport {
                                next = last.version
                                break
                            }
                        }
                        var headers = HTTPHeaders([("Content-Type", "application/x-ndjson")])
                        if let next { headers.add("Reactord-Next-After", String(next)) }
                        return Response(status: 200, headers: headers, body: body)
                    } catch {
                        return Problems.store(error)
                    }
                }
                return Self.limitingLogReads(context, reply)
            }
        }
        addReading(.GET, "/sessions/{id}/states/{version}") { request in
            Self.withReadableSession(request, context) { session, principal in
                let version: UInt64
                switch Self.version(request.pathParameters["version"] ?? "", named: "the version in the path") {
                case let .success(found): version = found
                case let .failure(refusal): return .response(refusal.response)
                }
                // Read on another thread, not the journal's that answers the commit's waiters.
                return Self.answerOffThread(afterCommitOf: session.hub, context) { _ in
                    switch Self.state(of: session, at: version, context, missing: 404) {
                    case let .success(json):
                        var response = Response.json(HistoryJSON.state(of: session.id, version: version, json))
                        response.headers.add("ETag", Preconditions.entityTag(version))
                        return response
                    case let .failure(refusal): return refusal.response
                    }
                }
            }
        }
        addReading(.POST, "/sessions/{id}/fork") { request in
            // A repeat of a fork whose session has gone since still gets its answer.
            let kept = { (principal: Principal?) in
                Self.keptAnswer(
                    request, principal, .fork, session: request.pathParameters["id"] ?? "",
                    body: request.body[...], context)
            }
            return Self.withReadableSession(request, context, keptWhenUnknown: kept) { session, principal in
                var version: UInt64?
                if !request.body.isEmpty {
                    do throws(RequestError) {
                        version = try RequestDecoding.decode(ForkBody.self, from: request.body).version
                    } catch {
                        return .response(Problems.body(error))
                    }
                }
                guard let factory = context.registry.factory(for: session.kind) else {
                    return .response(
                        .problem(status: 409, detail: "this server no longer has the reactor '\(session.kind)'"))
                }
                // Under an Idempotency-Key, a repeat gets the first fork back instead of a second one
                // (first: the version it forked may be gone from the history since).
                var ticket: IdempotencyLedger.Ticket?
                switch Self.admit(request, principal, .fork, session: session.id, body: request.body[...], context) {
                case let .answer(response): return .response(response)
                case let .run(admitted): ticket = admitted
                case nil: break
                }
                // The committed state: forking from what a crash could take back would fork a fiction.
                // A version the session does not have is the body's fault: 422, the session being there.
                let json: [UInt8]
                switch Self.state(of: session, at: version ?? session.hub.snapshot.version, context, missing: 422) {
                case let .success(found): json = found
                case let .failure(refusal): return .response(refusal.response)
                }
                return Self.open(
                    session.kind, factory, for: principal, request, ticket: ticket, restoring: json, context)
            }
        }
    }

    /// A request the history routes refuse, with its answer.
    private struct Refused: Error {
        let response: Response
        init(_ response: Response) { self.response = response }
    }

    private struct ForkBody: Decodable {
        let version: UInt64?
    }

    /// Runs `body` with the session the path names, once the caller may read it; forwards the
    /// request to the node holding it (cluster mode).
    /// `keptWhenUnknown`: the answer kept under the request's key, for a session that is gone.
    private static func withReadableSession(
        _ request: Request, _ context: ServiceContext,
        keptWhenUnknown: (Principal?) -> Response? = { _ in nil },
        _ body: (any Session, Principal?) -> Reply
    ) -> Reply {
        let reader: (principal: Principal?, isAdmin: Bool)
        switch context.access.authenticateReader(request) {
        case let .success(found): reader = found
        case let .failure(refusal): return .response(refusal.response)
        }
        switch context.session(request.pathParameters["id"] ?? "", forwarded: request.isForwarded) {
        case let .success(session):
            if !reader.isAdmin, let refusal = context.access.authorize(session, for: reader.principal) {
                return .response(refusal)
            }
            return body(session, reader.principal)
        case let .failure(.heldElsewhere(address)):
            return forward(request, to: address, context)
        case let .failure(error) where error.isGoneOrGoing:
            return .response(keptWhenUnknown(reader.principal) ?? Problems.session(error))
        case let .failure(error):
            return .response(Problems.session(error))
        }
    }

    /// The state `session` had at `version`, or the problem that says why it cannot be had:
    /// `missing` (404, 422) for a version the session does not have (or no longer keeps).
    private static func state(
        of session: any Session, at version: UInt64, _ context: ServiceContext,
        missing: Int
    ) -> Result<[UInt8], Refused> {
        let found: StateAtVersion
        if let engine = context.persistence?.engine {
            do throws(StoreError) {
                found = try engine.state(of: session.id, at: version)
            } catch {
                return .failure(Refused(Problems.store(error)))
            }
        } else {
            found = session.hub.state(at: version)
        }
        switch found {
        case let .found(json): return .success(json)
        case let .notRetained(oldest):
            return .failure(
                Refused(
                    HistoryJSON.notKept(
                        version, oldest: oldest, history: context.configuration.historyLength,
                        status: missing)))
        case let .notYet(current):
            return .failure(
                Refused(
                    .problem(
                        status: missing,
                        detail: "version \(version) does not exist: the session is at version \(current)")))
        case .noSession:
            return .failure(Refused(Problems.session(.unknown)))
        }
    }

    private static func limit(of request: Request) -> Result<Int, Refused> {
        guard let text = request.query["limit"] else { return .success(HistoryJSON.defaultPage) }
        guard let limit = Int(digits: text), limit >= 1, limit <= HistoryJSON.largestPage else {
            return .failure(
                Refused(
                    .problem(
                        status: 400,
                        detail: "query parameter 'limit' must be a whole number from 1 to "
                            + "\(HistoryJSON.largestPage)")))
        }
        return .success(limit)
    }

    /// `reply` (a log's page or export, made off this thread) while the node reads fewer than
    /// `context.logReads.capacity` logs, else 503. A read keeps its place until its answer is sent
    /// whole: an export holds up to 64 MiB until the client has read it.
    private static func limitingLogReads(_ context: ServiceContext, _ reply: Reply) -> Reply {
        guard case let .deferred(work) = reply else { return reply }
        return .deferred { responder in
            guard context.logReads.take() else {
                context.metrics.countLimited("action_log_reads")
                context.limitNotices.hit(
                    "an action-log read refused: this node reads \(context.logReads.capacity) at once")
                return responder.respond(
                    .problem(
                        status: 503,
                        detail: "this node reads \(context.logReads.capacity) action logs at once, its most; retry",
                        headers: HTTPHeaders([("Retry-After", "1")])))
            }
            responder.whenComplete { context.logReads.giveBack() }
            work(responder)
        }
    }

    private static func version(_ text: String, named name: String) -> Result<UInt64, Refused> {
        guard let version = UInt64(digits: text) else {
            return .failure(
                Refused(
                    .problem(
                        status: 400, detail: "\(name) must be a version: a whole number from 0 to 18446744073709551615")
                ))
        }
        return .success(version)
    }
}
