import MicroHTTP

extension RouteTable {
    mutating func addSessionRoutes() {
        let context = context
        add(.POST, "/sessions") { request in .response(Self.createSession(request, context)) }
        add(.GET, "/sessions/{id}") { request in
            guard let session = context.store.session(request.pathParameters["id"] ?? "") else {
                return .response(Problems.unknownSession)
            }
            session.hub.touch()
            return .response(.json(SessionJSON.body(of: session, session.hub.snapshot)))
        }
        add(.DELETE, "/sessions/{id}") { request in
            guard let session = context.store.remove(request.pathParameters["id"] ?? "") else {
                return .response(Problems.unknownSession)
            }
            context.end(session, reason: "deleted")
            return .response(Response(status: 204))
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

    private static func createSession(_ request: Request, _ context: ServiceContext) -> Response {
        guard !context.isStopping else { return Problems.stopping }
        let kinds = context.registry.names
        var kind = context.configuration.defaultReactor ?? kinds.first ?? ""
        if request.body.contains(where: { !Self.isJSONWhitespace($0) }) {
            do throws(RequestError) {
                if let named = try RequestDecoding.decode(CreateBody.self, from: request.body).reactor { kind = named }
            } catch {
                return Problems.body(error)
            }
        }
        guard let factory = context.registry.factory(for: kind) else {
            return .problem(status: 422, detail: "unknown reactor '\(kind)'; this server has: "
                + kinds.joined(separator: ", "))
        }
        guard context.store.reserve() else {
            var headers = HTTPHeaders()
            headers.add("Retry-After", String(Int(SessionSweeper.interval(ttl: context.configuration.sessionTTL).rounded(.up))))
            return .problem(status: 503, detail: "the session table is full (\(context.store.capacity) sessions); "
                + "retry after idle sessions expire", headers: headers)
        }
        let key = SessionID.make()
        let id = key.string
        let session = factory(key, EventHub(historyLength: context.configuration.historyLength, metrics: context.metrics))
        context.store.insert(session)
        context.metrics.sessions.increment()
        var response = Response.json(SessionJSON.body(of: session, session.hub.snapshot), status: 201)
        response.headers.add("Location", "/sessions/\(id)")
        return response
    }

    private static func isJSONWhitespace(_ byte: UInt8) -> Bool {
        byte == 0x20 || byte == 0x0A || byte == 0x0D || byte == 0x09
    }
}
