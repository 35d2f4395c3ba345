import CMicroHTTPD
import CMicroHTTPDAnswers

/// The answers libmicrohttpd makes itself, before any callback of ours: 414 and 431 for a
/// request line or head too large for the connection's memory pool, 400 or 413 for a
/// Content-Length it cannot read, 400 or 505 for a bad HTTP version. CMicroHTTPDAnswers hands
/// each to `mhdOwnAnswer` before it is sent, which lets the server's `decorate` add its fields
/// (CORS), as it does to MicroHTTP's own refusals.
///
/// Known of the request then: the header fields libmicrohttpd had read before it gave up. A
/// field on the line just before the one that overflowed, or any field after a request line
/// that overflowed (414), is not among them.
enum OwnAnswers {
    private static let lock = Lock()
    /// The running servers, by their daemons. Guarded by `lock`.
    nonisolated(unsafe) private static var servers: [OpaquePointer: Unmanaged<HTTPServer>] = [:]

    /// `server` is kept alive by its own start() until after MHD_stop_daemon, when it leaves.
    static func enter(_ server: HTTPServer, daemons: [OpaquePointer]) {
        lock.withLock {
            if servers.isEmpty { mhd_answers_set_handler(mhdOwnAnswer) }
            for daemon in daemons { servers[daemon] = Unmanaged.passUnretained(server) }
        }
    }

    static func leave(daemons: [OpaquePointer]) {
        lock.withLock {
            for daemon in daemons { servers[daemon] = nil }
        }
    }

    static func server(of connection: Connection) -> Unmanaged<HTTPServer>? {
        guard let daemon = mhd_shim_connection_daemon(connection.raw) else { return nil }
        return lock.withLock { servers[daemon] }
    }
}

extension HTTPServer {
    /// One of libmicrohttpd's own answers, about to be sent: the fields `decorate` adds.
    func ownAnswerFields(_ connection: Connection, status: Int) -> HTTPHeaders {
        guard let decorate = configuration.decorate else { return HTTPHeaders() }
        // Neither method nor target is to be had from libmicrohttpd at this point.
        let head = RequestHead(method: HTTPMethod(rawValue: ""), path: "", headers: connection.headersAndQuery().0)
        var response = Response(status: status)
        decorate(head, &response)
        return response.headers
    }
}
