import CMicroHTTPD

/// What happens on libmicrohttpd's thread for each call of the access handler.
extension HTTPServer {
    /// Returns false to make libmicrohttpd close the connection.
    func handle(_ connection: Connection, url: UnsafePointer<CChar>, method: UnsafePointer<CChar>,
                upload: UnsafePointer<CChar>?, uploadSize: UnsafeMutablePointer<Int>,
                context: UnsafeMutablePointer<UnsafeMutableRawPointer?>) -> Bool {
        if let raw = context.pointee {
            let exchange = Unmanaged<Exchange>.fromOpaque(raw).takeUnretainedValue()
            return proceed(exchange, connection, upload: upload, uploadSize: uploadSize, context: context)
        }
        // First call: the headers are in, the body (if any) is not. libmicrohttpd closes the
        // connection after a response queued now ("early"), so only refusals are answered here;
        // everything else is answered on the final call, keeping the connection alive.
        if beginRequest() {
            return connection.queue(.problem(status: 503, detail: "the server is stopping"), closing: true)
        }
        let declaredLength = connection.header("Content-Length").map { Int($0) ?? Int.max } ?? 0
        if declaredLength > configuration.bodyLimit {
            // By Content-Length, before reading a byte of the body.
            return connection.queue(bodyTooLarge(), closing: true)
        }
        let hasBody = declaredLength > 0 || connection.header("Transfer-Encoding") != nil
        let httpMethod = HTTPMethod(rawValue: String(cString: method))
        let exchange: Exchange
        if let path = String(validatingCString: url) {
            switch router.resolve(httpMethod, path) {
            case let .found(handler, parameters):
                exchange = Exchange(handler: handler, method: httpMethod, path: path, parameters: parameters)
                if hasBody && declaredLength != Int.max { exchange.body.reserveCapacity(declaredLength) }
            case .notFound:
                exchange = Exchange(refusal: .problem(status: 404, detail: "no resource at \(path)"))
            case let .methodNotAllowed(allow):
                let allowed = allow.map(\.rawValue).joined(separator: ", ")
                exchange = Exchange(refusal: .problem(
                    status: 405, detail: "\(httpMethod) is not allowed on \(path); allowed: \(allowed)",
                    headers: HTTPHeaders([("Allow", allowed)])))
            }
        } else {
            exchange = Exchange(refusal: .problem(status: 400, detail: "the request path is not valid UTF-8"))
        }
        if let refusal = exchange.refusal, hasBody {
            return connection.queue(refusal, closing: true)  // not worth reading the body for
        }
        context.pointee = Unmanaged.passRetained(exchange).toOpaque()
        return true
    }

    /// Later calls: a piece of the body, the final call, or the call after a resume.
    private func proceed(_ exchange: Exchange, _ connection: Connection, upload: UnsafePointer<CChar>?,
                         uploadSize: UnsafeMutablePointer<Int>,
                         context: UnsafeMutablePointer<UnsafeMutableRawPointer?>) -> Bool {
        let size = uploadSize.pointee
        if size > 0 {
            if !exchange.bodyTooLarge {
                if exchange.body.count + size > configuration.bodyLimit {
                    exchange.bodyTooLarge = true
                    exchange.body = []
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
            guard let response = deferred.takeResponse() else { return true }
            return connection.queue(response, closing: isStopping)
        }
        if exchange.stream != nil { return true }
        if let refusal = exchange.refusal { return connection.queue(refusal, closing: isStopping) }
        if exchange.bodyTooLarge { return connection.queue(bodyTooLarge(), closing: true) }
        guard let handler = exchange.handler else { return false }
        let body = exchange.body
        exchange.body = []
        let request = makeRequest(connection, exchange.method, exchange.path, exchange.parameters, body: body)
        return dispatch(handler(request), connection, exchange: exchange)
    }

    private func dispatch(_ reply: Reply, _ connection: Connection, exchange: Exchange) -> Bool {
        switch reply {
        case let .response(response):
            return connection.queue(response, closing: isStopping)

        case let .eventStream(headers, open):
            let stream = EventStream(connection: connection, queueLimit: configuration.streamQueueLimit)
            exchange.stream = stream
            register(stream)
            connection.disableTimeout()
            if configuration.streamSocketSendBuffer > 0 { connection.setSendBuffer(configuration.streamSocketSendBuffer) }
            open(stream)
            return connection.queueStream(stream, headers: headers)

        case let .deferred(work):
            let deferred = DeferredExchange(connection: connection)
            guard register(deferred) else {
                return connection.queue(.problem(status: 503, detail: "the server is stopping"), closing: true)
            }
            exchange.deferred = deferred
            deferred.suspend()              // before the work can answer (and resume)
            work(Responder(exchange: deferred))
            return true
        }
    }

    private func makeRequest(_ connection: Connection, _ method: HTTPMethod, _ path: String,
                             _ parameters: [String: String], body: [UInt8]) -> Request {
        Request(method: method, path: path, query: connection.query(), headers: connection.headers(),
                body: body, peer: connection.peer(), pathParameters: parameters)
    }

    private func bodyTooLarge() -> Response {
        .problem(status: 413, detail: "request body exceeds the limit of \(configuration.bodyLimit) bytes")
    }
}
