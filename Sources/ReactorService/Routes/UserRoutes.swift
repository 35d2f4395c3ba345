import MicroHTTP
import ReactorCore

extension RouteTable {
    /// The global current user. Reading is open; writing needs the admin token (or an admin JWT).
    mutating func addUserRoutes() {
        let context = context
        add(.GET, "/user") { _ in .response(.json(Self.userJSON(context.currentUser.value))) }
        add(.PUT, "/user") { request in
            if let refusal = context.access.authorizeAdmin(request) { return .response(refusal) }
            do throws(RequestError) {
                let user = try RequestDecoding.decode(User.self, from: request.body)
                guard !user.id.isEmpty else {
                    return .response(.problem(status: 422, detail: "field 'id' must not be empty"))
                }
                return Self.setUser(user, request, context, answer: .json(Self.userJSON(user)))
            } catch {
                return .response(Problems.body(error))
            }
        }
        add(.DELETE, "/user") { request in
            if let refusal = context.access.authorizeAdmin(request) { return .response(refusal) }
            return Self.setUser(nil, request, context, answer: Response(status: 204))
        }
    }

    /// Stores the user (with a durable store), then hands it to every reactor; answers once
    /// the states it changed are committed too, so a read after the answer sees them. Under an
    /// `Idempotency-Key` (the admins share one space of keys) the answer is kept with the change.
    private static func setUser(
        _ user: User?, _ request: Request, _ context: ServiceContext,
        answer: Response
    ) -> Reply {
        let readsStore = context.persistence != nil && IdempotentRequest.isLookedUp(request)
        return Self.answer(offThreadIf: readsStore, context) {
            Self.storeUser(user, request, context, answer: answer)
        }
    }

    /// `setUser`'s work, where the key's lookup may wait for the store.
    private static func storeUser(
        _ user: User?, _ request: Request, _ context: ServiceContext,
        answer: Response
    ) -> Reply {
        var ticket: IdempotencyLedger.Ticket?
        switch Self.admit(request, nil, user == nil ? .clearUser : .setUser, body: request.body[...], context) {
        case let .answer(response): return .response(response)
        case let .run(admitted): ticket = admitted
        case nil: break
        }
        let kept = ticket?.keep(answer, session: nil)
        return Self.answer(context) { [ticket] done in
            let done: @Sendable (Response) -> Void = { response in
                ticket?.finish(giving: response)  // before the answer: a repeat after it finds the key kept
                done(response)
            }
            let publish: @Sendable () -> Void = {
                // Every session's streams are resumed together at the end: see batchingResumes.
                EventStream.batchingResumes {
                    ChangeCause.with(SessionActionLog.userCause) { context.currentUser.send(user) }
                }
                context.logger.info(
                    user == nil ? "current user cleared" : "current user set",
                    metadata: user.map { ["user": "\($0.id)"] } ?? [:])
            }
            guard let journal = context.persistence?.journal else {
                publish()
                done(answer)
                return
            }
            journal.write([.user(user.map(Self.userJSON))] + (kept.map { [.answer($0)] } ?? [])) { failure in
                if let failure { return done(Problems.store(failure)) }
                // Answered once the sessions' new states are written too, so that a read after the
                // answer finds the user in each. Whatever their outcome: the user is stored (with the
                // answer under its key), and a session whose write failed comes back from the store
                // with it (EventHub.goLive), so an error here would invite a retry of what is done.
                guard let cluster = context.cluster else {
                    publish()  // here, on the journal's thread: user changes reach the reactors in order
                    return journal.whenCommitted { _ in done(answer) }
                }
                // In a cluster every node, this one too, takes the change from the store, by version
                // (in order whatever thread reads it), away from the journal's thread: a read of
                // PostgreSQL there would hold every session's commit.
                context.waitingWork.run {
                    cluster.feedUser(context)
                    journal.whenCommitted { _ in done(answer) }
                }
            }
        }
    }

    /// The user as JSON, or `null` when none is set: the value of the global subject.
    private static func userJSON(_ user: User?) -> [UInt8] {
        guard let user else { return Array("null".utf8) }
        return JSONText.object([("id", JSONText.string(user.id)), ("name", JSONText.string(user.name))])
    }
}
