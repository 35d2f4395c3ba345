internal import CMicroHTTPD
internal import ConcurrencyPrimitives

/// The answers libmicrohttpd makes itself, before any callback of ours: 414 and 431 for a
/// request line or head too large for the connection's memory pool, 400 or 413 for a malformed
/// chunked body (400 too where it answers 500: a chunk's size line longer than it reads), 400
/// or 505 for a bad HTTP version. (A Content-Length it cannot read is kept
/// from it, and answered by `framingProblem`: its own answer to that had its head twice.) Where CMicroHTTPDOwnAnswers is linked and `handler` installed (a reactord server
/// does both; MicroHTTP alone neither), each goes to `handler`, and what it makes is sent instead
/// of libmicrohttpd's HTML page: a problem document with the same status, naming the problem,
/// with the fields the server's `decorate` adds (CORS), as on MicroHTTP's own refusals.
///
/// Known of the request then: the header fields libmicrohttpd had read before it gave up. A
/// field on the line just before the one that overflowed, or any field after a request line
/// that overflowed (414), is not among them (`RequestHead.hasAllFields` is false).
package enum OwnAnswers {
    /// What CMicroHTTPDOwnAnswers' `mhd_own_answers_install` takes: the answer to send in place
    /// of libmicrohttpd's (a response the caller owns), or nil to send libmicrohttpd's.
    package static let handler: @convention(c) (OpaquePointer?, UnsafeMutablePointer<UInt32>?) -> OpaquePointer? = {
        raw, status in
        mhdOwnAnswer(raw: raw, status: status)
    }

    /// The running servers, by their daemons' addresses.
    private static let servers = Locked<[UInt: Unmanaged<HTTPServer>]>([:])

    /// `server` is kept alive by its own start() until after MHD_stop_daemon, when it leaves.
    static func enter(_ server: HTTPServer, daemons: [OpaquePointer]) {
        servers.withLock { servers in
            for daemon in daemons { servers[UInt(bitPattern: daemon)] = Unmanaged.passUnretained(server) }
        }
    }

    static func leave(daemons: [OpaquePointer]) {
        servers.withLock { servers in
            for daemon in daemons { servers[UInt(bitPattern: daemon)] = nil }
        }
    }

    static func server(of connection: Connection) -> Unmanaged<HTTPServer>? {
        guard let daemon = mhd_shim_connection_daemon(connection.raw) else { return nil }
        return servers.withLock { $0[UInt(bitPattern: daemon)] }
    }
}

extension HTTPServer {
    /// What to send instead of one of libmicrohttpd's own answers.
    func ownAnswer(_ connection: Connection, status: Int) -> Response {
        let headers = connection.headersAndQuery().0
        let problem = OwnAnswers.problem(answering: status, headers: headers)
        var response = Response.problem(status: problem.status, detail: problem.detail)
        if let decorate = configuration.decorate {
            // Neither method nor target is to be had from libmicrohttpd at this point.
            decorate(
                RequestHead(method: HTTPMethod(rawValue: ""), path: "", headers: headers, hasAllFields: false),
                &response)
        }
        return response
    }
}

extension OwnAnswers {
    /// The answer to send for libmicrohttpd's `status`, told from it and the fields it had read.
    static func problem(answering status: Int, headers: HTTPHeaders) -> (status: Int, detail: String) {
        // Its 500 is its answer when the connection's buffer is full and it cannot read on: while
        // reading a chunked body (every byte of which goes to the route as it comes), a chunk's
        // size line too long to fit beside the head. The client's doing.
        if status == 500, headers["Transfer-Encoding"] != nil {
            return (
                400,
                "the chunked request body is malformed: a chunk's size line, with its extensions, "
                    + "is longer than this server reads"
            )
        }
        return (status, detail(status: status, headers: headers))
    }

    /// The problem libmicrohttpd found, told from its status and the fields it had read.
    static func detail(status: Int, headers: HTTPHeaders) -> String {
        let chunked = headers["Transfer-Encoding"] != nil
        switch status {
        case 400 where chunked: return "the chunked request body is malformed"
        case 400: return "the request is malformed"
        case 413 where chunked: return "a chunk of the request body is too large"
        case 414: return "the request target is too long for this server"
        case 431: return "the request's header fields are too large for this server"
        case 505: return "the HTTP version is not supported: this server speaks HTTP/1.0 and HTTP/1.1"
        default: return ReasonPhrase.of(status)
        }
    }
}
