internal import CMicroHTTPD
internal import ConcurrencyPrimitives

#if canImport(Glibc)
import Glibc
#elseif canImport(Darwin)
import Darwin
#endif

/// An HTTP server on libmicrohttpd: one epoll thread per `threads`, handlers inline on them,
/// SSE streams and deferred replies by suspend/resume. A started server stays alive until
/// `stop()` returns.
// why: owns the libmicrohttpd daemons and their C logger and parse states; its fields are under `lock`.
public final class HTTPServer: @unchecked Sendable {
    let configuration: HTTPServerConfiguration
    let router: Router
    /// Head deadlines and the per-address connection limit (see EdgeGuard.swift).
    let edge: EdgeGuard

    private let lock = Mutex()
    private let stopLock = Mutex()  // serialises stop() calls
    // Guarded by `lock`.
    /// One libmicrohttpd daemon per thread (empty until started, and again once stopped).
    private var daemons: [OpaquePointer] = []
    private var boundPort: UInt16 = 0
    private var stopping = false
    private var inFlight = 0  // requests the access handler has seen and MHD not yet completed
    private var openConnections = 0  // libmicrohttpd's, by its connection notices
    private var connectionsHandedOver = 0  // added by the acceptor, not yet noticed as started
    private var streams: [ObjectIdentifier: EventStream] = [:]
    private var deferreds: [ObjectIdentifier: DeferredExchange] = [:]
    private var stopFinalFrame: Frame?
    private var heartbeat: Heartbeat?
    private var disconnectWatcher: DisconnectWatcher?
    private var acceptor: Acceptor?
    private let logLock = Mutex()  // guards lastLogLine alone: libmicrohttpd logs while start() holds `lock`
    private var lastLogLine: String?
    /// Released after MHD_stop_daemon; nil when it could not be made.
    private var batchTicker: BatchTicker?
    /// Handed to libmicrohttpd as its external logger's context; freed after MHD_stop_daemon.
    private var logger: UnsafeMutablePointer<mhd_shim_logger>?
    /// One per daemon: its thread's request-line parsing (`mhd_shim_parse_state`).
    private var parseStates: UnsafeMutablePointer<mhd_shim_parse_state>?

    public init(configuration: HTTPServerConfiguration, router: Router) {
        var configuration = configuration
        // No arithmetic on a limit may overflow, whatever a caller sets: past these no machine
        // serves anyway (libmicrohttpd counts connections in an unsigned int).
        configuration.connectionLimit = min(configuration.connectionLimit, Self.maxConnectionLimit)
        configuration.connectionsPerIP = min(configuration.connectionsPerIP, Self.maxConnectionLimit)
        configuration.bodyLimit = min(configuration.bodyLimit, Int.max / 2)
        configuration.threads = min(max(configuration.threads, 1), Self.maxThreads)
        // libmicrohttpd takes it as an unsigned int of seconds (0: none): a larger one would wrap.
        configuration.connectionTimeout = min(max(configuration.connectionTimeout, 0), Self.maxConnectionTimeout)
        self.configuration = configuration
        self.router = router
        edge = EdgeGuard(configuration: configuration)
    }

    /// The largest `connectionLimit` (and `connectionsPerIP`) honoured; a larger one is taken as this.
    public static let maxConnectionLimit = 1 << 24
    /// The most `threads`: each is a daemon with its own epoll set and thread, and more than the
    /// machine's cores only add switches. A larger number is taken as this.
    public static let maxThreads = 256
    /// The longest `connectionTimeout` honoured, in seconds (about 31 years); a longer one is taken as this.
    public static let maxConnectionTimeout = 1_000_000_000

    /// Binds, then starts libmicrohttpd. Throws `HTTPServerError` when it cannot.
    public func start() throws {
        lock.lock()
        defer { lock.unlock() }
        guard daemons.isEmpty, !stopping else { throw HTTPServerError.alreadyStarted }
        OpenFileLimit.raiseToHard()
        let listener = try Listener.open(
            host: configuration.host, port: configuration.port,
            backlog: configuration.listenBacklog)
        var options: [MHD_OptionItem] = [
            // The acceptor keeps the limit; libmicrohttpd's own is only a bound it never reaches.
            MHD_OptionItem(
                option: .CONNECTION_LIMIT, value: configuration.connectionLimit + 2 * Self.overLimitSlots,
                ptr_value: nil),
            MHD_OptionItem(option: .CONNECTION_TIMEOUT, value: configuration.connectionTimeout, ptr_value: nil),
            MHD_OptionItem(
                option: .CONNECTION_MEMORY_LIMIT,
                value: configuration.connectionMemoryLimit, ptr_value: nil),
        ]
        // No MHD_OPTION_PER_IP_CONNECTION_LIMIT: the acceptor counts per address (EdgeGuard),
        // so that trusted proxies can be exempt.
        options.append(MHD_OptionItem(option: .END, value: 0, ptr_value: nil))

        // epoll, never select (capped at 1,024 sockets); suspend/resume for streams and deferred
        // replies; connections come from our Acceptor, not from a socket libmicrohttpd listens on.
        let flags =
            MHD_USE_EPOLL_INTERNAL_THREAD.rawValue | MHD_ALLOW_SUSPEND_RESUME.rawValue
            | MHD_USE_ERROR_LOG.rawValue | MHD_USE_NO_LISTEN_SOCKET.rawValue
        // Before the daemon: its first stream may open at once.
        disconnectWatcher = DisconnectWatcher()
        let me = Unmanaged.passRetained(self)  // released after MHD_stop_daemon
        let log = UnsafeMutablePointer<mhd_shim_logger>.allocate(capacity: 1)
        log.initialize(to: mhd_shim_logger(handler: mhdLogLine, cls: me.toOpaque()))
        // Not libmicrohttpd's thread pool: its workers' epoll sets are out of reach of the batch
        // ticker, so each thread is a daemon of its own.
        let threads = configuration.threads
        let states = UnsafeMutablePointer<mhd_shim_parse_state>.allocate(capacity: threads)
        // 512 bytes of the pool stay for the request's header fields and the response's head
        // (a 3.5 KB query fits a 4 KiB pool, as before; the 55 short arguments that ran it dry do not).
        let queryBudget = max(configuration.connectionMemoryLimit - 512, 512)
        states.initialize(
            repeating: mhd_shim_parse_state(
                marks: requestMarks, target: nil, query_budget: queryBudget,
                measured_target_limit: RequestMark.measuredTargetLimit),
            count: threads)
        var started: [OpaquePointer] = []
        for index in 0..<threads {
            guard
                let daemon = mhd_shim_start_daemon(
                    flags, mhdAccessHandler, me.toOpaque(),
                    mhdRequestCompleted, me.toOpaque(),
                    mhdConnectionNotice, me.toOpaque(), log,
                    states + index, &options)
            else { break }
            started.append(daemon)
        }
        let allStarted = started.count == threads
        let ticker = allStarted && configuration.batchTicker ? BatchTicker(daemons: started) : nil
        let accepting =
            allStarted
            ? Acceptor(listener: listener.socket, daemons: started, edge: edge, ticker: ticker, gate: self)
            : nil
        guard let accepting else {
            disconnectWatcher?.stop()
            disconnectWatcher = nil
            for daemon in started { MHD_stop_daemon(daemon) }
            ticker?.release()
            me.release()
            log.deallocate()
            states.deallocate()
            close(listener.socket)
            let reason = logLock.withLock { lastLogLine }.map { ": \($0)" } ?? ""
            throw HTTPServerError.cannotStart(
                allStarted
                    ? "no thread to accept connections on"
                    : "libmicrohttpd did not start on \(configuration.host):\(listener.port)\(reason)")
        }
        OwnAnswers.enter(self, daemons: started)
        acceptor = accepting
        logger = log
        parseStates = states
        daemons = started
        batchTicker = ticker
        boundPort = listener.port
        if configuration.heartbeatInterval > 0 {
            // A strong capture, released when stop() cancels the timer: a weak reference would give
            // the server a side table and slow every retain/release on the request path.
            heartbeat = Heartbeat(interval: configuration.heartbeatInterval) { self.beat() }
        }
    }

    /// The bound port after `start()` (the chosen one when the configuration said 0).
    public var port: UInt16 { lock.withLock { boundPort } }

    public var openStreamCount: Int { lock.withLock { streams.count } }

    var openConnectionCount: Int { lock.withLock { openConnections } }

    public var isStopping: Bool { lock.withLock { stopping } }

    /// Graceful, bounded, idempotent. In order: refuse new work; close the listening socket (new
    /// connects are refused); close every stream (queued bytes and `finalFrame` are flushed where the
    /// client reads); let in-flight deferred requests answer for half the deadline, then answer
    /// the rest 503; wait for requests to drain; end what is left, so that nothing is suspended
    /// (MHD_stop_daemon aborts the process on a suspended connection); stop.
    /// Call it from any thread but a handler's: it joins libmicrohttpd's threads.
    public func stop(finalFrame: Frame? = nil, deadline: Double = 5) {
        stopLock.lock()
        defer { stopLock.unlock() }
        lock.lock()
        guard !daemons.isEmpty, !stopping else {
            lock.unlock()
            return
        }
        let running = daemons
        let ticker = batchTicker
        // Ticks on this thread from here on: the acceptor's thread, which ticked, ends first.
        let clock = Deadline(seconds: deadline, ticking: ticker)
        stopping = true
        stopFinalFrame = finalFrame
        heartbeat?.cancel()
        heartbeat = nil
        let openStreams = Array(streams.values)
        let accepting = acceptor
        acceptor = nil  // and with it its capture of this server
        lock.unlock()

        accepting?.stop()

        for stream in openStreams { stream.close(finalFrame: finalFrame, reason: .serverStopping) }

        clock.wait(fraction: 0.5) { self.lock.withLock { self.deferreds.values.allSatisfy(\.isAnswered) } }
        for deferred in lock.withLock({ Array(deferreds.values) }) {
            // Its handler had begun: whether it was done is unknown, so no invitation to retry.
            deferred.answer(
                .problem(
                    status: 503,
                    detail: "the server is stopping before this request was answered: "
                        + "whether it was done is unknown"))
        }

        clock.wait(fraction: 0.9) { self.lock.withLock { self.inFlight == 0 } }
        for stream in lock.withLock({ Array(streams.values) }) { stream.abort(.serverStopping) }
        clock.wait(fraction: 1) {
            self.lock.withLock { self.streams.values.allSatisfy { !$0.isSuspended } }
        }

        // Stopped before MHD_stop_daemon: after it, no watcher may resume a connection.
        let watcher = lock.withLock { () -> DisconnectWatcher? in
            defer { disconnectWatcher = nil }
            return disconnectWatcher
        }
        watcher?.stop()
        for daemon in running { MHD_stop_daemon(daemon) }
        OwnAnswers.leave(daemons: running)
        lock.withLock {
            daemons = []
            batchTicker = nil
        }
        ticker?.release()
        logger?.deallocate()  // libmicrohttpd logs no more once stopped
        logger = nil
        parseStates?.deallocate()
        parseStates = nil
        Unmanaged.passUnretained(self).release()  // the retain taken by start()
    }

    // MARK: - Bookkeeping, called on MHD threads

    /// Connections accepted past `connectionLimit`, each only to answer its first request 503
    /// and close: a client at the limit learns why (with CORS headers, through `decorate`)
    /// instead of waiting in the listen backlog. Past these, it waits there.
    static let overLimitSlots = 64

    /// libmicrohttpd took a connection on; returns whether it is past `connectionLimit`.
    func connectionStarted() -> Bool {
        lock.withLock {
            connectionsHandedOver -= 1
            openConnections += 1
            return openConnections > configuration.connectionLimit
        }
    }

    func connectionClosed() {
        let waiting: Acceptor? = lock.withLock {
            openConnections -= 1
            return connectionsHandedOver + openConnections == connectionCapacity - 1 ? acceptor : nil
        }
        waiting?.roomFreed()
    }

    /// `connectionLimit` and the over-limit slots: past it, new connections wait in the backlog.
    private var connectionCapacity: Int { configuration.connectionLimit + Self.overLimitSlots }

    /// Counts a new request. `stopping`: it is refused; `crowded`: more connections are open than
    /// the limit, so one accepted past it is refused (one accepted within it is served, and so
    /// is one accepted past it once the crowd has thinned, e.g. after a mass disconnect).
    /// Requests the access handler has seen that libmicrohttpd has not completed (tests).
    var requestsInFlight: Int { lock.withLock { inFlight } }

    func beginRequest() -> (stopping: Bool, crowded: Bool) {
        lock.withLock {
            inFlight += 1
            return (stopping, openConnections > configuration.connectionLimit)
        }
    }

    func completed(_ exchange: Exchange?, ok: Bool, daemonShutdown: Bool) {
        let watcher: DisconnectWatcher? = lock.withLock {
            inFlight -= 1
            if let stream = exchange?.stream { streams[ObjectIdentifier(stream)] = nil }
            if let deferred = exchange?.deferred { deferreds[ObjectIdentifier(deferred)] = nil }
            return disconnectWatcher
        }
        if let stream = exchange?.stream, stream.watchToken != 0 {
            watcher?.unwatch(stream.watchToken, socket: stream.socket)
        }
        exchange?.deferred?.complete()
        exchange?.stream?.complete(clientGone: !ok, daemonShutdown: daemonShutdown)
    }

    func register(_ stream: EventStream) {
        let (stoppingNow, finalFrame, watcher): (Bool, Frame?, DisconnectWatcher?) = lock.withLock {
            streams[ObjectIdentifier(stream)] = stream
            return (stopping, stopFinalFrame, disconnectWatcher)
        }
        if stoppingNow {
            stream.close(finalFrame: finalFrame, reason: .serverStopping)
        } else if let watcher {
            stream.watchToken = watcher.watch(stream, socket: stream.socket)
        }
    }

    /// False while stopping: no new suspension may start then.
    func register(_ deferred: DeferredExchange) -> Bool {
        lock.withLock {
            if stopping { return false }
            deferreds[ObjectIdentifier(deferred)] = deferred
            return true
        }
    }

    /// A line of libmicrohttpd's error log, on one of its threads or on start()'s.
    func logged(_ line: String) {
        let trimmed = line.hasSuffix("\n") ? String(line.dropLast()) : line
        logLock.withLock { lastLogLine = trimmed }
        configuration.errorLog?(trimmed)
    }

    /// The last line libmicrohttpd logged, if any.
    public var lastErrorLogLine: String? { logLock.withLock { lastLogLine } }

    private func beat() {
        let open = lock.withLock { Array(streams.values) }
        for stream in open { stream.send(Heartbeat.frame) }
    }
}

/// A stop deadline, polled in small sleeps that keep the batch ticker going.
private struct Deadline {
    let start = Deadline.now()
    let seconds: Double
    let ticking: BatchTicker?

    init(seconds: Double, ticking: BatchTicker?) {
        self.seconds = max(0, seconds)
        self.ticking = ticking
    }

    /// Waits until `done()` or until `fraction` of the deadline has passed.
    func wait(fraction: Double, until done: () -> Bool) {
        while !done() && Deadline.now() - start < seconds * fraction {
            ticking?.tick()
            usleep(2_000)
        }
    }

    static func now() -> Double {
        var time = timespec()
        clock_gettime(CLOCK_MONOTONIC, &time)
        return Double(time.tv_sec) + Double(time.tv_nsec) / 1e9
    }
}

/// The acceptor's view of the connection count. Connections it hands over count from then on:
/// libmicrohttpd notices them later, on its own thread.
extension HTTPServer: AcceptorGate {
    func hasRoom() -> Bool {
        lock.withLock { connectionsHandedOver + openConnections < connectionCapacity }
    }

    func handingOver() {
        lock.withLock { connectionsHandedOver += 1 }
    }

    func handOverFailed() {
        lock.withLock { connectionsHandedOver -= 1 }
    }
}
