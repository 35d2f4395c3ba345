import MicroHTTP

/// Which browser origins may call the API. Answers preflights and marks responses.
struct CORSPolicy: Sendable {
    /// Exact origins (`https://app.example.com`), or `*` for any.
    let allowedOrigins: Set<String>

    /// `Cache-Control` because fetch-based SSE clients send it; `Last-Event-ID` for resumes;
    /// the preconditions on a session's version; the key that makes a retry safe.
    private static let allowedHeaders =
        "Content-Type, Authorization, Last-Event-ID, Cache-Control, If-Match, If-None-Match, \(IdempotentRequest.header)"
    private static let exposedHeaders =
        "Location, Retry-After, ETag, \(IdempotentRequest.replayedHeader), Reactord-Next-After, \(Problems.notAppliedField), "
        + "WWW-Authenticate"

    /// `configuration.corsOrigins` as browsers send them (`ServiceConfiguration.corsOrigin`).
    init(configuration: ServiceConfiguration) {
        allowedOrigins = Set(configuration.corsOrigins.map { ServiceConfiguration.corsOrigin($0) ?? $0 })
    }

    func allows(_ origin: String) -> Bool {
        allowedOrigins.contains("*") || allowedOrigins.contains(origin)
    }

    /// The headers that let `origin` read a response. With any origin configured, every
    /// reply says `Vary: Origin`, so a shared cache never hands one origin's answer to another.
    func responseHeaders(for request: Request) -> [(String, String)] {
        responseHeaders(origin: request.headers["Origin"])
    }

    func responseHeaders(origin: String?) -> [(String, String)] {
        guard !allowedOrigins.isEmpty else { return [] }
        guard let origin, allows(origin) else { return [("Vary", "Origin")] }
        return [
            ("Access-Control-Allow-Origin", origin), ("Vary", "Origin"),
            ("Access-Control-Expose-Headers", Self.exposedHeaders),
        ]
    }

    private func allowsRequest(_ request: Request) -> Bool {
        request.headers["Origin"].map(allows) ?? false
    }

    /// `OPTIONS` on a route: 204, naming the route's methods when the origin is allowed.
    func preflight(_ request: Request, methods: [HTTPMethod]) -> Response {
        var response = Response(status: 204)
        response.headers.add("Allow", HTTPMethod.allowed(methods + [.OPTIONS]).map(\.rawValue).joined(separator: ", "))
        let headers = responseHeaders(for: request)
        for (name, value) in headers { response.headers.add(name, value) }
        guard allowsRequest(request) else { return response }
        response.headers.add("Access-Control-Allow-Methods", methods.map(\.rawValue).joined(separator: ", "))
        response.headers.add("Access-Control-Allow-Headers", Self.allowedHeaders)
        response.headers.add("Access-Control-Max-Age", "600")
        return response
    }

    /// For `HTTPServerConfiguration.decorate`: the answers MicroHTTP and libmicrohttpd give
    /// themselves (400 for bad framing, 404, 405, 413, 414, 431, 503 while stopping or at the
    /// connection limit) carry the same headers as the routes' answers.
    /// Nil when no origin is configured (nothing to add).
    var decorator: (@Sendable (RequestHead, inout Response) -> Void)? {
        guard !allowedOrigins.isEmpty else { return nil }
        return { [self] head, response in
            var origin = head.headers["Origin"]
            if origin == nil, !head.hasAllFields { origin = originNotRead }
            for (name, value) in responseHeaders(origin: origin) { response.headers.add(name, value) }
        }
    }

    /// What to allow when libmicrohttpd stopped before the request's Origin, if any: with every
    /// origin allowed, or only one, the answer is the same whichever it was (a browser compares
    /// it with its own origin); among several, none can be picked.
    private var originNotRead: String? {
        if allowedOrigins.contains("*") { return "*" }
        return allowedOrigins.count == 1 ? allowedOrigins.first : nil
    }

    /// The reply with this origin's headers added.
    func apply(to reply: Reply, for request: Request) -> Reply {
        let headers = responseHeaders(for: request)
        guard !headers.isEmpty else { return reply }
        switch reply {
        case var .response(response):
            for (name, value) in headers { response.headers.add(name, value) }
            return .response(response)
        case .eventStream(var streamHeaders, let open):
            for (name, value) in headers { streamHeaders.add(name, value) }
            return .eventStream(headers: streamHeaders, open: open)
        case let .deferred(work):
            return .deferred { responder in
                for (name, value) in headers { responder.extraHeaders.add(name, value) }
                work(responder)
            }
        }
    }
}
