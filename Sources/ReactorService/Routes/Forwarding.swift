import MicroHTTP

extension RouteTable {
    /// Cluster mode: a request for a session another node holds, sent on to that node and its
    /// answer relayed as it is. When the holder cannot be reached the answer is 503 with
    /// `Retry-After` (nothing was sent; its lease runs out and another node takes over); when it
    /// was sent but no answer came back, 504: it may or may not have been done, never a guess.
    static func forward(_ request: Request, to address: String, _ context: ServiceContext) -> Reply {
        guard let cluster = context.cluster else { return .response(Problems.unknownSession) }
        // Forwarded once only: the holder named by the store has just lost the session.
        guard request.headers[Forwarder.marker] == nil else {
            return .response(Problems.session(.heldElsewhere(address: address)))
        }
        var headers = HTTPHeaders()
        for name in ["Authorization", "Content-Type", "Accept", "If-Match", "If-None-Match"] {
            if let value = request.headers[name] { headers.add(name, value) }
        }
        let retryAfter = String(Int(cluster.store.leaseDuration.rounded(.up)))
        let job = { (responder: Responder) in
            Forwarder.Job(method: request.method, path: Self.target(of: request), headers: headers, body: request.body,
                          address: address) { outcome in
                switch outcome {
                case let .answered(response):
                    cluster.metrics.countForward(.answered)
                    // The node let the session go meanwhile, or is stopping (its leases already given
                    // back): when it says nothing was done there, once more, from the store. (Another
                    // 503, a failed commit, may have been applied: relayed as it is.)
                    if response.status == 503 { cluster.forgetHolder(address) }
                    if response.status == 503, response.headers[Problems.notAppliedField] != nil,
                       request.headers[Self.retryMarker] == nil, let retry = Self.retry(request, context) {
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
                    responder.respond(.problem(
                        status: 503, detail: "the node holding this session does not answer; "
                            + "another node takes it over once its lease runs out: retry",
                        headers: HTTPHeaders([("Retry-After", retryAfter)])))
                case let .unknown(reason):
                    cluster.metrics.countForward(.unknown)
                    cluster.forgetHolder(address)
                    context.logger.info("no answer came back from the session's node: \(reason)")
                    responder.respond(.problem(
                        status: 504, detail: "the request reached the node holding this session, but no answer "
                            + "came back: whether it was done is unknown; read the session before retrying"))
                }
            }
        }
        return .deferred { responder in cluster.forwarder.forward(job(responder)) }
    }

    /// Marks a request handed back to the routes after a failed forward: it is not retried twice.
    private static let retryMarker = "Reactord-Forward-Retry"

    private static func retry(_ request: Request, _ context: ServiceContext) -> ((Responder) -> Void)? {
        var headers = request.headers
        headers.add(retryMarker, "1")
        let again = Request(method: request.method, path: request.path, query: request.query, headers: headers,
                            body: request.body, peer: request.peer, client: request.client)
        switch context.routes.current.reply(to: again) {
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
