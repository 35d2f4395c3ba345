internal import CMicroHTTPD

#if canImport(Glibc)
import Glibc
#elseif canImport(Darwin)
import Darwin
#endif

/// Marks, in `con_cls`, a request without a body between its first and final call: the common
/// case needs no per-request allocation here.
// Marks are addresses compared, never read or written through: shared by every thread safely.
nonisolated(unsafe) let bodylessRequestMark = UnsafeMutableRawPointer.allocate(byteCount: 1, alignment: 1)

/// What `mhd_shim_check_target` puts in `con_cls` once a request line is in, before the first
/// call (see `RequestMark`): addresses within `requestMarks`, never touched, so its pages cost no
/// memory. A request libmicrohttpd ends before that call (a head it answers itself, a client
/// gone mid-head) still has its mark when it completes.
nonisolated(unsafe) let requestMarks = UnsafeMutableRawPointer.allocate(
    byteCount: 3 + RequestMark.measuredTargetLimit, alignment: 1)

/// What `mhd_shim_check_target` found in a request line.
enum RequestMark: Equatable {
    /// Whitespace or a control character in the target.
    case malformedTarget
    /// A query too large for the connection's pool (its arguments cut off).
    case oversizedQuery
    /// Any other target, `length` bytes long up to its first NUL (nil: too long to be marked so).
    case target(length: Int?)

    /// Longer targets are not measured; a request line that long cannot fit a connection's pool.
    static let measuredTargetLimit = 1 << 20

    /// nil when `raw` is no request mark (an exchange of ours, `bodylessRequestMark`).
    init?(_ raw: UnsafeMutableRawPointer?) {
        guard let raw, raw >= requestMarks, raw < requestMarks + 3 + Self.measuredTargetLimit else { return nil }
        switch raw - requestMarks {
        case 0: self = .malformedTarget
        case 1: self = .target(length: nil)
        case 2: self = .oversizedQuery
        case let offset: self = .target(length: offset - 3)
        }
    }

    /// Whether a NUL byte cut the target short: libmicrohttpd finds the target in the request line
    /// by its length, then hands it over as a C string, so "/sessions/S\0/../x" was served as
    /// "/sessions/S". The version follows the target and the space after it.
    func cutShort(url: UnsafePointer<CChar>, version: UnsafePointer<CChar>) -> Bool {
        guard case let .target(length?) = self, version.pointee != 0 else { return false }  // no version: 505
        return UnsafeRawPointer(url) + length + 1 != UnsafeRawPointer(version)
    }
}

/// Marks, in a connection's socket context, one accepted past the connection limit.
// A mark like those above: compared, never read or written through.
nonisolated(unsafe) let overLimitMark = UnsafeMutableRawPointer.allocate(byteCount: 1, alignment: 1)

/// What happens on libmicrohttpd's thread for each call of the access handler.
///
/// libmicrohttpd calls once when the headers are in, once per piece of body, and once more
/// when the request is complete. It closes the connection after a response queued on the
/// first call ("early"), so only refusals (400 for bad framing, 503, 413 by Content-Length,
/// 404/405 for a request with a body) are answered then; everything else on the final call,
/// keeping it alive. Every response made here rather than by a handler goes through
/// `configuration.decorate`.
extension HTTPServer {
    /// Returns false to make libmicrohttpd close the connection.
    func handle(
        _ connection: Connection, url: UnsafePointer<CChar>, method: UnsafePointer<CChar>,
        version: UnsafePointer<CChar>, upload: UnsafePointer<CChar>?, uploadSize: UnsafeMutablePointer<Int>,
        context: UnsafeMutablePointer<UnsafeMutableRawPointer?>
    ) -> Bool {
        let mark = RequestMark(context.pointee)
        if mark != nil { context.pointee = nil }
        if let raw = context.pointee {
            if raw == bodylessRequestMark {
                context.pointee = nil
                return answer(connection, url: url, method: method, context: context)
            }
            let exchange = Unmanaged<Exchange>.fromOpaque(raw).takeUnretainedValue()
            return proceed(exchange, connection, upload: upload, uploadSize: uploadSize, context: context)
        }
        // First call: the headers are in, the body (if any) is not.
        let pastAddressLimit = edge.isTracking && edge.headArrived(connection.socket)
        let admission = beginRequest()
        if admission.stopping {
            return refuse(
                .stopping, connection,
                HTTPMethod(cString: method), url, closing: true)
        }
        if pastAddressLimit {
            return refuse(
                .problem(
                    status: 429,
                    detail: "too many connections from this address; at most "
                        + "\(edge.connectionsPerIP) at once, retry later",
                    headers: HTTPHeaders([("Retry-After", "1")])),
                connection, HTTPMethod(cString: method), url, closing: true)
        }
        if admission.crowded && connection.isOverLimit {
            return refuse(
                .problem(
                    status: 503,
                    detail: "the server is at its limit of \(configuration.connectionLimit) "
                        + "connections; retry later", headers: HTTPHeaders([("Retry-After", "1")])),
                connection, HTTPMethod(cString: method), url, closing: true)
        }
        let framing = mhd_shim_framing_fields(connection.raw, method)
        if let problem = Self.requestLineProblem(
            method: method,
            malformedTarget: mark == .malformedTarget || mark?.cutShort(url: url, version: version) == true,
            oversizedQuery: mark == .oversizedQuery)
            ?? Self.framingProblem(framing, version: version)
        {
            // Then close: the framing of what follows is unknowable.
            return refuse(
                .problem(status: problem.status, detail: problem.detail), connection,
                HTTPMethod(cString: method), url, closing: true)
        }
        let declaredLength = framing.first_length.map { Int(String(cString: $0)) ?? Int.max } ?? 0
        if declaredLength > configuration.bodyLimit {
            // By Content-Length, before reading a byte of the body.
            return refuse(bodyTooLarge(), connection, HTTPMethod(cString: method), url, closing: true)
        }
        if declaredLength == 0 && connection.header("Transfer-Encoding") == nil {
            context.pointee = bodylessRequestMark
            return true
        }
        let httpMethod = HTTPMethod(cString: method)
        if let coding = connection.header("Content-Encoding"), let refusal = Self.unsupportedCoding(coding) {
            return refuse(refusal, connection, httpMethod, url, closing: true)
        }
        if connection.poolRoom(limit: configuration.connectionMemoryLimit) < 256 {
            // libmicrohttpd reads the body into what the head left of the pool, and with none
            // left answers 500 itself.
            return refuse(
                .problem(status: 431, detail: "the request's header fields leave no room for its body on this server"),
                connection, httpMethod, url, closing: true)
        }
        switch resolve(httpMethod, url) {
        case let .refused(refusal):
            // Not worth reading the body for.
            return refuse(refusal.response, connection, httpMethod, url, closing: true)
        case let .found(handler, path, parameters):
            let exchange = Exchange(handler: handler, method: httpMethod, path: path, parameters: parameters)
            if declaredLength != Int.max { exchange.body.reserveCapacity(declaredLength) }
            context.pointee = Unmanaged.passRetained(exchange).toOpaque()
            return true
        }
    }

    /// The final call of a request without a body: route, run the handler, answer.
    private func answer(
        _ connection: Connection, url: UnsafePointer<CChar>, method: UnsafePointer<CChar>,
        context: UnsafeMutablePointer<UnsafeMutableRawPointer?>
    ) -> Bool {
        let httpMethod = HTTPMethod(cString: method)
        switch resolve(httpMethod, url) {
        case let .refused(refusal):
            return refuse(refusal.response, connection, httpMethod, url, closing: isStopping)
        case let .found(handler, path, parameters):
            let request = makeRequest(connection, httpMethod, path, parameters, body: [])
            return dispatch(handler(request), request, connection, exchange: nil, context: context)
        }
    }

    /// Later calls of a request with a body (or with a stream or deferred reply): a piece of
    /// the body, the final call, or the call after a resume.
    private func proceed(
        _ exchange: Exchange, _ connection: Connection, upload: UnsafePointer<CChar>?,
        uploadSize: UnsafeMutablePointer<Int>,
        context: UnsafeMutablePointer<UnsafeMutableRawPointer?>
    ) -> Bool {
        let size = uploadSize.pointee
        if size > 0 {
            exchange.received += size
            if exchange.bodyTooLarge {
                // The rest is read and dropped after the 413, but only up to another `bodyLimit`
                // bytes: past that the sender is cut off (no endless upload holds the connection).
                if exchange.received - configuration.bodyLimit > configuration.bodyLimit { return false }
            } else {
                if exchange.received > configuration.bodyLimit {
                    exchange.bodyTooLarge = true
                    exchange.body = []
                    // libmicrohttpd 0.9.75 accepts no response before the upload ends: the 413 is
                    // written to the socket now, while the sender is still sending (one that reads
                    // meanwhile, as curl does, stops), and the connection closes after it.
                    var refusal = bodyTooLarge()
                    configuration.decorate?(
                        RequestHead(
                            method: exchange.method, path: exchange.path, headers: connection.headersAndQuery().0),
                        &refusal)
                    connection.writeClosing(refusal, headOnly: exchange.method == .HEAD)
                } else if let upload {
                    UnsafeRawPointer(upload).withMemoryRebound(to: UInt8.self, capacity: size) {
                        exchange.body.append(contentsOf: UnsafeBufferPointer(start: $0, count: size))
                    }
                }
            }
            uploadSize.pointee = 0  // consumed (or dropped): MHD moves on to the next piece
            return true
        }
        if let deferred = exchange.deferred {
            guard let answer = deferred.takeAnswer() else { return true }
            deferred.endHold()
            switch answer {
            case let .response(response):
                return send(response, connection, closing: isStopping, headOnly: exchange.method == .HEAD)
            case let .eventStream(headers, open):
                return openStream(headers, open, exchange.method, connection, exchange: exchange, context: context) {
                    RequestHead(method: exchange.method, path: exchange.path, headers: connection.headersAndQuery().0)
                }
            }
        }
        if exchange.stream != nil { return true }
        if exchange.bodyTooLarge { return false }  // answered when it passed the limit: close
        guard let handler = exchange.handler else { return false }
        let body = exchange.body
        exchange.body = []
        let request = makeRequest(connection, exchange.method, exchange.path, exchange.parameters, body: body)
        return dispatch(handler(request), request, connection, exchange: exchange, context: context)
    }

    private func dispatch(
        _ reply: Reply, _ request: Request, _ connection: Connection, exchange: Exchange?,
        context: UnsafeMutablePointer<UnsafeMutableRawPointer?>
    ) -> Bool {
        switch reply {
        case let .response(response):
            return send(response, connection, closing: isStopping, headOnly: request.method == .HEAD)

        case let .eventStream(headers, open):
            return openStream(headers, open, request.method, connection, exchange: exchange, context: context) {
                RequestHead(method: request.method, path: request.path, headers: request.headers)
            }

        case let .deferred(work):
            let deferred = DeferredExchange(connection: connection)
            guard register(deferred) else {
                return refuse(
                    .stopping, connection,
                    RequestHead(method: request.method, path: request.path, headers: request.headers),
                    closing: true)
            }
            let exchange = exchange ?? attachExchange(context, method: request.method, path: request.path)
            exchange.deferred = deferred
            deferred.suspend()  // before the work can answer (and resume)
            work(Responder(exchange: deferred))
            return true
        }
    }

    /// Opens the event stream of a `Reply.eventStream` (or of a deferred request answered with
    /// one): its head, then `open` with the stream. `head`: the request, for a refusal.
    private func openStream(
        _ headers: HTTPHeaders, _ open: @Sendable (EventStream) -> Void, _ method: HTTPMethod,
        _ connection: Connection, exchange: Exchange?, context: UnsafeMutablePointer<UnsafeMutableRawPointer?>,
        head: () -> RequestHead
    ) -> Bool {
        var streamHead = HTTPHeaders(Connection.eventStreamHeaders)
        for (name, value) in headers { streamHead.add(name, value) }
        if method == .HEAD {
            // The head a GET would get, and no stream, written here: libmicrohttpd would add
            // `Content-Length: 0` to an empty answer, and write the end of a chunked body to
            // a HEAD request.
            connection.writeClosing(Response(status: 200, headers: streamHead), headOnly: true, unbounded: true)
            return false
        }
        guard
            connection.poolHolds(
                headOf: Response(status: 200, headers: streamHead), streaming: true,
                limit: configuration.connectionMemoryLimit)
        else {
            return refuse(
                .problem(
                    status: 431,
                    detail: "the request's header fields leave no room for an event stream on this server"),
                connection, head(), closing: true)
        }
        let exchange = exchange ?? attachExchange(context, method: method)
        let stream = EventStream(connection: connection, queueLimit: configuration.streamQueueLimit)
        exchange.stream = stream
        register(stream)
        connection.disableTimeout()
        if configuration.streamSocketSendBuffer > 0 {
            connection.setSendBuffer(configuration.streamSocketSendBuffer)
        }
        open(stream)
        return connection.queueStream(stream, head: streamHead)
    }

    /// A stream or deferred reply outlives this call: keep its state in `con_cls`, where
    /// the completion callback finds it. (`path`: for a deferred request's refusals, should it
    /// be answered with a stream.)
    private func attachExchange(
        _ context: UnsafeMutablePointer<UnsafeMutableRawPointer?>, method: HTTPMethod, path: String = ""
    ) -> Exchange {
        let exchange = Exchange(handler: nil, method: method, path: path, parameters: [:])
        context.pointee = Unmanaged.passRetained(exchange).toOpaque()
        return exchange
    }

    private func resolve(_ method: HTTPMethod, _ url: UnsafePointer<CChar>) -> Routed {
        let resolution: Router.Resolution
        let path: String
        if let literal = router.resolveLiteral(method, cPath: url) {
            (resolution, path) = literal
        } else {
            guard let decoded = String(validatingCString: url) else {
                return .refused(Refusal(.problem(status: 400, detail: "the request path is not valid UTF-8")))
            }
            guard let target = Self.originForm(decoded) else {
                return .refused(
                    Refusal(
                        .problem(
                            status: 400,
                            detail: "the request target must be a path that starts with / or an absolute http(s) URL")))
            }
            (resolution, path) = (router.resolve(method, target), target)
        }
        switch resolution {
        case let .found(handler, parameters):
            return .found(handler, path: path, parameters: parameters)
        case .notFound:
            // The path is not echoed: it may carry a capability (a session id), and a long one
            // would be reflected back whole.
            return .refused(Refusal(.problem(status: 404, detail: "no resource at this path")))
        case let .methodNotAllowed(allow):
            let allowed = allow.map(\.rawValue).joined(separator: ", ")
            // A method is echoed only while short: it is the client's text.
            let named = method.rawValue.utf8.count <= 32 ? method.rawValue : "this method"
            return .refused(
                Refusal(
                    .problem(
                        status: 405, detail: "\(named) is not allowed on this resource; allowed: \(allowed)",
                        headers: HTTPHeaders([("Allow", allowed)]))))
        }
    }

    /// The path of a request target (RFC 9112 §3.2): origin-form as it is, the path of the
    /// absolute form, which a server must accept (`GET http://host/healthz`), `*` as it is
    /// (asterisk-form, which no route has); nil for anything else (`GET healthz`).
    static func originForm(_ target: String) -> String? {
        if target.hasPrefix("/") || target == "*" { return target }
        for scheme in ["http://", "https://"]
        where target.count > scheme.count
            && target.prefix(scheme.count).lowercased() == scheme
        {
            let authorityAndPath = target.dropFirst(scheme.count)
            guard let slash = authorityAndPath.firstIndex(of: "/") else { return "/" }
            return String(authorityAndPath[slash...])
        }
        return nil
    }

    /// RFC 9112 §3: the method is a token (RFC 9110 §5.6.2) and the target has no whitespace
    /// or control character; libmicrohttpd 0.9.75 passes on both.
    static func requestLineProblem(
        method: UnsafePointer<CChar>, malformedTarget: Bool,
        oversizedQuery: Bool = false
    ) -> (status: Int, detail: String)? {
        if malformedTarget { return (400, "the request target contains whitespace or a control character") }
        if oversizedQuery {
            return (414, "the request target's query has too many arguments or is too long for this server")
        }
        var byte = method
        while byte.pointee != 0 {
            guard isTokenCharacter(UInt8(bitPattern: byte.pointee)) else {
                return (400, "the request method is not a token (RFC 9110 section 5.6.2)")
            }
            byte += 1
        }
        return nil
    }

    /// RFC 9110 §5.6.2's tchar.
    private static func isTokenCharacter(_ byte: UInt8) -> Bool {
        switch byte {
        case UInt8(ascii: "a")...UInt8(ascii: "z"), UInt8(ascii: "A")...UInt8(ascii: "Z"),
            UInt8(ascii: "0")...UInt8(ascii: "9"):
            return true
        default:
            return "!#$%&'*+-.^_`|~".utf8.contains(byte)
        }
    }

    /// RFC 9112 §3.2: Host is `uri-host [ ":" port ]` (RFC 3986), or empty. Anything else (a
    /// space, a slash, userinfo, an unclosed IPv6 literal) is 400.
    static func isValidHost(_ host: UnsafePointer<CChar>) -> Bool {
        // libmicrohttpd drops the whitespace before a value, not after it (RFC 9112 §5: both are OWS).
        var length = strlen(host)
        while length > 0, host[length - 1] == 0x20 || host[length - 1] == 0x09 { length -= 1 }
        let text = UnsafeRawBufferPointer(start: host, count: length)
        let isDigit: (UInt8) -> Bool = { (UInt8(ascii: "0")...UInt8(ascii: "9")).contains($0) }
        var index = 0
        if text.first == UInt8(ascii: "[") {
            // IP-literal: hex digits, colons and dots (an IPv4 tail) between brackets.
            index = 1
            while index < text.count,
                isDigit(text[index]) || (UInt8(ascii: "a")...UInt8(ascii: "f")).contains(text[index] | 0x20)
                    || text[index] == UInt8(ascii: ":") || text[index] == UInt8(ascii: ".")
            {
                index += 1
            }
            guard index > 1, index < text.count, text[index] == UInt8(ascii: "]") else { return false }
            index += 1
        } else {
            // reg-name or IPv4address: unreserved, percent-encoded and sub-delims characters.
            while index < text.count, text[index] != UInt8(ascii: ":") {
                let byte = text[index]
                guard
                    isDigit(byte) || (UInt8(ascii: "a")...UInt8(ascii: "z")).contains(byte | 0x20)
                        || "-._~%!$&'()*+,;=".utf8.contains(byte)
                else { return false }
                index += 1
            }
        }
        guard index < text.count else { return true }
        guard text[index] == UInt8(ascii: ":") else { return false }
        return text[(index + 1)...].allSatisfy(isDigit)
    }

    /// RFC 9112's framing rules that libmicrohttpd 0.9.75 does not enforce: no whitespace between
    /// a field name and its colon (§5.1: libmicrohttpd would keep "Content-Length " as another
    /// field and read the body as the next request); no obsolete line folding (§5.2 lets a server
    /// refuse it: libmicrohttpd glued the continuation onto the field's name, so a folded
    /// Content-Length vanished and the body ran as a second request); an HTTP/1.1 request has
    /// exactly one Host, a host with an optional port (§3.2); Content-Length fields that disagree,
    /// or Content-Length with Transfer-Encoding, make the body's end unknowable (§6.1, §6.3);
    /// chunked must be the final transfer coding, once (§6.1), and libmicrohttpd implements no
    /// other (§7: 501). Repeated identical Content-Length values are accepted, as §6.3 allows.
    /// Each problem is answered, then the connection closes.
    static func framingProblem(_ framing: mhd_shim_framing, version: UnsafePointer<CChar>)
        -> (status: Int, detail: String)?
    {
        if framing.spaced_names > 0 {
            return (400, "a header field name has whitespace before its colon")
        }
        if framing.cr_fields > 0 { return (400, "a header field contains a bare CR") }
        if framing.folded_fields > 0 {
            return (400, "a header field is continued on the next line (obs-fold); send each field on one line")
        }
        if framing.nameless_fields > 0 { return (400, "a header field has no name (its line starts with ':')") }
        if let name = framing.nul_field {
            // A NUL cut the field's value short, or began the next line (read as the head's end);
            // libmicrohttpd writes one over a colon too, so a next line ": v" reads alike.
            return (
                400,
                "header field '\(String(cString: name))', or the line after it, holds a NUL byte or has no field name"
            )
        }
        if framing.lengths > 1 && framing.lengths_differ != 0 {
            return (400, "the request has conflicting Content-Length header fields")
        }
        if let length = framing.first_length, let problem = contentLengthProblem(length) { return problem }
        if framing.hosts > 1 { return (400, "the request has more than one Host header field") }
        if let host = framing.first_host, !isValidHost(host) {
            return (400, "the Host header field is not a host name or address with an optional port")
        }
        if framing.hosts == 0 && strcmp(version, "HTTP/1.0") != 0 {
            return (400, "an HTTP/1.1 request must have a Host header field")
        }
        guard framing.encodings > 0 else { return nil }
        if framing.lengths > 0 {
            return (400, "the request has both Content-Length and Transfer-Encoding header fields")
        }
        if framing.encodings > 1 { return (400, "the request has more than one Transfer-Encoding header field") }
        // libmicrohttpd reads a body as chunked only when the field is this word alone.
        guard let field = framing.first_encoding, strcasecmp(field, "chunked") != 0 else { return nil }
        let codings = transferCodings(String(cString: field))
        if codings.count > 1, codings.last == "chunked", !codings.dropLast().contains("chunked") {
            return (
                501,
                "transfer coding \(codings.dropLast().joined(separator: ", ")) is not implemented; send chunked alone"
            )
        }
        return (400, "the only transfer coding accepted is chunked, alone and last")
    }

    /// A Content-Length libmicrohttpd cannot read: one that is not decimal digits alone (a sign,
    /// a trailing space), or past 2^64. libmicrohttpd 0.9.75 answers it itself, writing that
    /// answer's head twice; where CMicroHTTPDOwnAnswers is linked it never sees such a field
    /// (its `is_readable_length` is this test) and the request comes here as one without a body.
    static func contentLengthProblem(_ value: UnsafePointer<CChar>) -> (status: Int, detail: String)? {
        let digits = UnsafeRawBufferPointer(start: value, count: strlen(value))
        guard !digits.isEmpty, digits.allSatisfy({ (UInt8(ascii: "0")...UInt8(ascii: "9")).contains($0) }) else {
            return (400, "the Content-Length field is not a decimal number")
        }
        guard UInt64(String(decoding: digits, as: UTF8.self)) != nil else {
            return (413, "the Content-Length field is larger than this server can read")
        }
        return nil
    }

    private static func transferCodings(_ field: String) -> [String] {
        field.split(separator: ",", omittingEmptySubsequences: false).map { coding in
            let isBlank: (Character) -> Bool = { $0 == " " || $0 == "\t" }
            return String(coding.drop(while: isBlank).reversed().drop(while: isBlank).reversed()).lowercased()
        }
    }

    /// Queues a response this layer makes itself, through `configuration.decorate`.
    private func refuse(
        _ response: Response, _ connection: Connection, _ method: HTTPMethod,
        _ url: UnsafePointer<CChar>, closing: Bool
    ) -> Bool {
        guard configuration.decorate != nil else {
            return send(response, connection, closing: closing, headOnly: method == .HEAD)
        }
        let head = RequestHead(
            method: method,
            path: String(
                decoding: UnsafeRawBufferPointer(
                    start: url, count: strlen(url)), as: UTF8.self), headers: connection.headersAndQuery().0)
        return refuse(response, connection, head, closing: closing)
    }

    private func refuse(_ response: Response, _ connection: Connection, _ head: RequestHead, closing: Bool) -> Bool {
        var response = response
        configuration.decorate?(head, &response)
        return send(response, connection, closing: closing, headOnly: head.method == .HEAD)
    }

    /// Queues `response`; or, when libmicrohttpd could not build its head in what the request's
    /// head left of the connection's pool, writes it to the socket (see DirectAnswer.swift) and
    /// returns false, so that libmicrohttpd closes the connection.
    private func send(_ response: Response, _ connection: Connection, closing: Bool, headOnly: Bool) -> Bool {
        guard connection.poolHolds(headOf: response, limit: configuration.connectionMemoryLimit) else {
            connection.writeClosing(response, headOnly: headOnly)
            return false
        }
        return connection.queue(response, closing: closing)
    }

    private func makeRequest(
        _ connection: Connection, _ method: HTTPMethod, _ path: String,
        _ parameters: [String: String], body: [UInt8]
    ) -> Request {
        let (headers, query) = connection.headersAndQuery()
        let peer = connection.peer()
        var client = peer
        if let peer, edge.trustedProxies.contains(peer) {
            client = ForwardedClient.resolve(peer: peer, headers: headers, trusted: edge.trustedProxies)
        }
        return Request(
            method: method, path: path, query: query, headers: headers,
            body: body, peer: peer, client: client, pathParameters: parameters)
    }

    /// A body in a content coding (gzip, …) is not decoded: read as it is, it would fail as JSON
    /// at its first byte, or, if it happened to be JSON, be taken for what it is not. 415 names
    /// the coding, and `Accept-Encoding` says what is taken (RFC 9110, 15.5.16).
    static func unsupportedCoding(_ field: String) -> Response? {
        // A coding is a token: no space or tab in it, only around it.
        let codings = field.split(separator: ",").map { $0.filter { $0 != " " && $0 != "\t" }.lowercased() }
        guard let coding = codings.first(where: { !$0.isEmpty && $0 != "identity" }) else { return nil }
        return .problem(
            status: 415,
            detail: "the request body's Content-Encoding '\(Response.excerpt(coding, limit: 32))' is not supported; "
                + "send the body unencoded",
            headers: HTTPHeaders([("Accept-Encoding", "identity")]))
    }

    private func bodyTooLarge() -> Response {
        .problem(status: 413, detail: "request body exceeds the limit of \(configuration.bodyLimit) bytes")
    }
}

/// Where a request goes. Not a `Result` of a tuple: a generic payload keeps the handler at
/// the generic abstraction, which costs a thunk allocation per request.
enum Routed {
    case found(Handler, path: String, parameters: [String: String])
    case refused(Refusal)
}

/// A response the layer gives instead of running a handler (400, 404, 405).
struct Refusal: Error {
    let response: Response
    init(_ response: Response) { self.response = response }
}
