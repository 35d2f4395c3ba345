import MicroHTTP

#if canImport(Glibc)
import Glibc
#endif

extension RouteTable {
    /// Cluster mode: a request for a session another node holds, sent on to that node and its
    /// answer relayed as it is. When the holder cannot be reached the answer is 503 with
    /// `Retry-After` (nothing was sent; its lease runs out and another node takes over). A request
    /// that changes something goes under an idempotency key (the client's, or this node's own):
    /// when it was sent but no answer came back, it is sent again under that key once the holder
    /// has let the session go (it stopped, or its lease ran out), and is answered once, whether it
    /// had been done or not (a read is simply read again). Else, the holder keeping the session
    /// without answering, 504: it may or may not have been done, never a guess.
    static func forward(_ request: Request, to address: String, _ context: ServiceContext) -> Reply {
        guard let cluster = context.cluster else { return .response(Problems.unknownSession) }
        // Forwarded once only: the holder named by the store has just lost the session.
        guard !request.isForwarded else {
            return .response(Problems.session(.heldElsewhere(address: address)))
        }
        let isRead = request.method == .GET || request.method == .HEAD
        let needsKey =
            !isRead && request.headers[IdempotentRequest.header] == nil
            && request.headers[IdempotentRequest.forwardHeader] == nil
        let request = needsKey ? request.adding(IdempotentRequest.forwardHeader, SessionID.make().string) : request
        let headers = {
            var headers = HTTPHeaders()
            for name in [
                "Authorization", "Content-Type", "Accept", "If-Match", "If-None-Match", IdempotentRequest.header,
                IdempotentRequest.forwardHeader,
            ] {
                for value in request.headers.values(name) { headers.add(name, value) }
            }
            return headers
        }()
        let retryAfter = String(Int(cluster.store.leaseDuration.rounded(.up)))
        let job = { @Sendable (responder: Responder) in
            // A HEAD goes as a GET: the holder's answer to a HEAD names a Content-Length with no body
            // after it, which the relay, reading by length, would wait for until its timeout.
            // libmicrohttpd leaves the body out of this node's answer to the client's HEAD.
            Forwarder.Job(
                method: request.method == .HEAD ? .GET : request.method, path: Self.target(of: request),
                headers: headers, body: request.body,
                address: address, keyIsNew: needsKey  // not when sent again: `retry` passes the key along
            ) { outcome in
                switch outcome {
                case let .answered(response):
                    cluster.metrics.countForward(.answered)
                    // The node let the session go meanwhile, or is stopping (its leases already given
                    // back): when it says nothing was done there, once more, from the store. (Another
                    // 503, a failed commit, may have been applied: relayed as it is.)
                    if response.status == 503 { cluster.forgetHolder(address) }
                    if response.status == 503, response.headers[Problems.notAppliedField] != nil,
                        request.headers[Self.retryMarker] == nil, let retry = Self.retry(request, context)
                    {
                        return retry(responder)
                    }
                    responder.respond(response)
                case let .unreachable(reason):
                    cluster.metrics.countForward(.unreachable)
                    cluster.forgetHolder(address)
                    // The node named by what this node remembered is gone (a stop gives its
                    // sessions back at once): once more, from the store's word. Nothing was sent.
                    if request.headers[Self.retryMarker] == nil, let retry = Self.retry(request, context) {
                        return retry(responder)
                    }
                    // The reason names the node's address, which is the cluster's, not the client's.
                    context.logger.info("forwarding to the session's node failed: \(reason)")
                    responder.respond(
                        .problem(
                            status: 503,
                            detail: "the node holding this session does not answer; "
                                + "another node takes it over once its lease runs out: retry",
                            headers: HTTPHeaders([("Retry-After", retryAfter)])))
                case let .unknown(reason, silent):
                    cluster.metrics.countForward(.unknown)
                    cluster.forgetHolder(address)
                    if request.headers[Self.retryMarker] == nil,
                        Self.waitUntilLetGo(request, by: address, orItListensAgain: !silent, context),
                        let retry = Self.retry(request, context)
                    {
                        return retry(responder)
                    }
                    context.logger.info("no answer came back from the session's node: \(reason)")
                    responder.respond(
                        .problem(
                            status: 504,
                            detail: "the request reached the node holding this session, but no answer "
                                + "came back: whether it was done is unknown; read the session before retrying"))
                }
            }
        }
        return .deferred { responder in cluster.forwarder.forward(job(responder)) }
    }

    /// Marks a request handed back to the routes after a failed forward: it is not retried twice.
    private static let retryMarker = "Reactord-Forward-Retry"

    /// Waits (bounded: a lease and a second) until the store no longer names `address` as the
    /// holder of the request's session: it gave the session back, or its lease ran out. From then
    /// on that node can commit nothing more of it (a late commit is fenced off), so the store's
    /// word on the request's key is final. False when it still holds it (alive, but slow).
    /// `orItListensAgain` (the holder closed the connection): also done once something answers
    /// HTTP at `address` again, which is the node started again there (it took its
    /// sessions back, fencing off the one that died) or the same one, alive: either way the request
    /// sent again under its key is answered once (run, replayed, or 409 while it still runs).
    private static func waitUntilLetGo(
        _ request: Request, by address: String, orItListensAgain: Bool, _ context: ServiceContext
    ) -> Bool {
        guard let cluster = context.cluster, let id = sessionID(of: request) else { return false }
        let deadline = ProcessClock.now + cluster.store.leaseDuration + 1
        while true {
            cluster.forgetHolder(address)
            guard case .failure(.heldElsewhere(address)) = context.session(id) else { return true }
            if orItListensAgain, ForwardConnection.answers(address, timeout: 0.3) { return true }
            guard ProcessClock.now < deadline else { return false }
            usleep(100_000)
        }
    }

    /// The session a forwarded request is about: in its path, or in POST /action's body.
    private static func sessionID(of request: Request) -> String? {
        let path = request.path.split(separator: "/")
        if path.count >= 2, path[0] == "sessions" { return String(path[1]) }
        return RequestJSONDecoder.TopLevelObject(parsing: request.body)?.string("session")
    }

    private static func retry(_ request: Request, _ context: ServiceContext) -> ((Responder) -> Void)? {
        switch context.routes.current.reply(to: request.adding(retryMarker, "1")) {
        case let .response(response)?: return { $0.respond(response) }
        case let .deferred(work)?: return work
        case .eventStream?, nil: return nil
        }
    }

    /// The request's path and query, encoded again (session ids and reactord's query values
    /// need no escaping beyond what this does).
    private static func target(of request: Request) -> String {
        guard !request.query.isEmpty else { return request.path }
        let query = request.query.sorted { $0.key < $1.key }.map { "\(escape($0.key))=\(escape($0.value))" }
        return request.path + "?" + query.joined(separator: "&")
    }

    private static func escape(_ text: String) -> String {
        var escaped = ""
        for byte in text.utf8 {
            switch byte {
            case UInt8(ascii: "a")...UInt8(ascii: "z"), UInt8(ascii: "A")...UInt8(ascii: "Z"),
                UInt8(ascii: "0")...UInt8(ascii: "9"), UInt8(ascii: "-"), UInt8(ascii: "_"), UInt8(ascii: "."),
                UInt8(ascii: "~"):
                escaped.unicodeScalars.append(Unicode.Scalar(byte))
            default:
                let hex = String(byte, radix: 16, uppercase: true)
                escaped += "%" + (hex.count == 1 ? "0" + hex : hex)
            }
        }
        return escaped
    }
}

extension Request {
    /// The same request with one more header field (routed again, it gets its path parameters again).
    fileprivate func adding(_ name: String, _ value: String) -> Request {
        var headers = self.headers
        headers.add(name, value)
        return Request(
            method: method, path: path, query: query, headers: headers, body: body, peer: peer, client: client)
    }
}
