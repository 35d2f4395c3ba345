/// Everything an `HTTPServer` is started with. The defaults suit one process on a laptop;
/// a container sets `host` to "0.0.0.0".
public struct HTTPServerConfiguration: Sendable {
    public var host: String = "127.0.0.1"
    /// 0 = any free port; read `HTTPServer.port` after `start()`.
    public var port: UInt16 = 8080
    /// Epoll threads, each a libmicrohttpd daemon of its own that the acceptor hands connections
    /// to in turn.
    public var threads: Int = 1
    /// Open connections served; a connection past it has its request answered 503 (see
    /// `HTTPServer.overLimitSlots`). At most `HTTPServer.maxConnectionLimit`.
    public var connectionLimit: Int = 10_000
    /// Most connections open at once from one client address (the socket's peer), 0 =
    /// unlimited. An address past it has a few more connections accepted, each answered 429
    /// with Retry-After, then further ones closed at once (see `EdgeGuard.refusalSlots`).
    /// `trustedProxies` are not limited.
    public var connectionsPerIP: Int = 0
    /// Proxies (addresses and CIDR ranges) whose connections `connectionsPerIP` does not limit,
    /// and whose `Forwarded` / `X-Forwarded-For` names the client in `Request.client`.
    public var trustedProxies = AddressRanges()
    /// Seconds a client has to send a whole request head: from the accept for the first
    /// request, and for each following one on a keep-alive connection from the previous
    /// request's completion plus `connectionTimeout` (its first byte can come no later, or the
    /// idle timeout ends the connection). Past it the connection is closed unanswered. Unlike
    /// `connectionTimeout`, no trickle of bytes extends it. A head that has arrived is never
    /// cut: bodies, handlers, streams and deferred replies are not timed by it. 0 = none.
    public var headTimeout: Double = 10
    /// Largest request body accepted, in bytes; larger ones get 413.
    public var bodyLimit: Int = 1 << 20
    /// Seconds of inactivity before an ordinary connection is closed (see also `headTimeout`).
    /// Event streams have none: the disconnect watcher and the heartbeat end their dead clients.
    public var connectionTimeout: Int = 30
    /// libmicrohttpd's memory pool per connection (`MHD_OPTION_CONNECTION_MEMORY_LIMIT`); small,
    /// because every SSE subscriber has one (the whole pool is resident for a stream) and
    /// libmicrohttpd 0.9.75 zeroes all of it after every keep-alive request: `MHD_pool_reset`
    /// (memorypool.c) memsets the pool's whole size but the pipelined bytes it keeps, whatever
    /// the options say. No option turns that off; this size is the only lever (the pool is one
    /// malloc of it; `MHD_OPTION_CONNECTION_MEMORY_INCREMENT` only steps the read buffer's growth
    /// inside it). 4 KiB holds a request head of up to ~3.8 KB (request line and headers: a JWT
    /// in `Authorization` or `access_token` fits) and the response head; a larger head is
    /// answered 431 (414 for a long target). 8 KiB held ~7.9 KB heads and cost ~9.7k more
    /// instructions per request (callgrind counts memset's `rep stosb` per byte) and 4 KiB more
    /// per subscriber.
    public var connectionMemoryLimit: Int = 4 * 1024
    /// Seconds between ": keep-alive\n\n" comments on every open stream.
    public var heartbeatInterval: Double = 15
    /// Bytes queued per stream; past it the stream is closed with `.overflow`.
    public var streamQueueLimit: Int = 256 * 1024
    /// SO_SNDBUF for event-stream connections, in bytes; 0 leaves the kernel's autotuning,
    /// which may buffer megabytes for a subscriber that stopped reading before its queue
    /// (`streamQueueLimit`) even starts to fill.
    public var streamSocketSendBuffer: Int = 0
    /// The listen socket's backlog.
    public var listenBacklog: Int = 4096
    /// Receives libmicrohttpd's error log, one line per call, on libmicrohttpd's threads
    /// (MHD_OPTION_EXTERNAL_LOGGER). Most lines are about single clients that vanished or
    /// sent nonsense ("Failed to send the footers for the request for ..." once per
    /// disconnecting event-stream client), so the default drops them: stderr is no place for
    /// what any client can cause. The last line is kept for `HTTPServerError.cannotStart`.
    public var errorLog: (@Sendable (String) -> Void)?
    /// Applied to every response MicroHTTP makes itself, before or instead of a handler: 400
    /// for bad framing or a missing Host, 404, 405, 413, 503 while stopping or at the connection
    /// limit. Handlers' own responses are not passed here. E.g. CORS headers, so that a browser shows the problem
    /// instead of an opaque CORS failure. Runs on libmicrohttpd's thread; must not block.
    /// The problem documents sent in place of the answers libmicrohttpd makes itself (414, 431,
    /// some 400/413, 505) come here too, with an empty method and path, the header fields read
    /// so far and `hasAllFields` false (see `OwnAnswers`).
    public var decorate: (@Sendable (RequestHead, inout Response) -> Void)?

    /// Whether the daemons get the 50 ms nudges of `BatchTicker`, the fallback for a full batch of
    /// 128 ready connections when `epoll_wait` is not this package's (full_batch.c). Internal:
    /// a test turns it off to show the batch is served without it.
    var batchTicker = true

    public init() {}
}

public enum HTTPServerError: Error, CustomStringConvertible {
    /// The address could not be resolved or bound.
    case cannotBind(host: String, port: UInt16, reason: String)
    /// libmicrohttpd refused to start (with its last error-log line, if it gave one).
    case cannotStart(String)
    /// `start()` was called on a server that was already started.
    case alreadyStarted

    public var description: String {
        switch self {
        case let .cannotBind(host, port, reason): return "cannot listen on \(host):\(port): \(reason)"
        case let .cannotStart(message): return "cannot start the HTTP server: \(message)"
        case .alreadyStarted: return "the HTTP server was already started"
        }
    }
}
