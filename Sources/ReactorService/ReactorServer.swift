internal import CMicroHTTPDOwnAnswers
import ConcurrencyPrimitives
import Dispatch
import Logging
import MicroHTTP
import ReactorCore
import ReactorStore

// The factories capture `currentUser`: OpenCombine marks nothing Sendable; its subjects lock themselves.
#if canImport(Combine)
@preconcurrency import Combine
#else
@preconcurrency import OpenCombine
#endif

#if canImport(FoundationEssentials)
import FoundationEssentials
#else
import Foundation
#endif
#if canImport(Glibc)
import Glibc
#endif

/// Serves reactors over HTTP: sessions, actions, and their state and pulses as SSE.
///
/// ```swift
/// let server = ReactorServer(configuration: ServiceConfiguration())
/// server.register("counter") { currentUser in CounterReactor(currentUser: currentUser) }
/// try server.run()   // until SIGINT or SIGTERM
/// ```
public final class ReactorServer: Sendable {
    let context: ServiceContext
    private let http: HTTPServer
    private let sweeper = Locked<SessionSweeper?>(nil)
    /// The generated admin token's file, locked while this server runs.
    private let tokenFile = Locked<AdminTokenFile?>(nil)

    /// The global current user, handed to every reactor made by `register`'s factory.
    public var currentUser: CurrentValueSubject<User?, Never> { context.currentUser }
    /// The bearer token writes to `/user` need.
    public var adminToken: String { context.adminToken }
    /// The bound port, after `start()`.
    public var port: UInt16 { http.port }
    /// Sessions in memory and, with a durable store, stored ones not loaded yet (in a cluster,
    /// only the sessions this node holds).
    public var sessionCount: Int { context.sessions.sessionCount }
    /// Event streams the HTTP server holds open now (a stream leaves once libmicrohttpd
    /// reports its connection completed): for operators' and the fault tests' leak checks.
    public var openStreamCount: Int { http.openStreamCount }
    /// The configuration the server was made with.
    public var configuration: ServiceConfiguration { context.configuration }

    /// A server with `configuration` and no reactor kinds yet; nothing listens before `start()`.
    /// `logger` gets the server's log lines. Without `configuration.adminToken` the server makes
    /// a random admin token (see `ServiceConfiguration.adminToken`).
    public init(
        configuration: ServiceConfiguration = ServiceConfiguration(),
        logger: Logger = Logger(label: "reactord")
    ) {
        let token = configuration.adminToken ?? Self.randomToken()
        let context = ServiceContext(configuration: configuration, adminToken: token, logger: logger)
        let routes = RouteTable(context: context)
        context.routes.withLock { $0 = routes.handlers }
        self.context = context
        http = HTTPServer(
            configuration: Self.httpConfiguration(configuration, context: context, logger: logger),
            router: routes.router)
    }

    /// Adds a reactor kind. `make` builds one reactor per session and is handed the global
    /// current user, which the reactor merges in its `transform(mutation:)`. (The overloads that
    /// take `(currentUser, principal)` also hand it who created the session.)
    ///
    /// `make` is `@Sendable` because it runs on libmicrohttpd's threads, one call per
    /// `POST /sessions`, possibly several at once. Without it, Swift 6 infers a closure written
    /// in top-level code (`main.swift`) to be `@MainActor`, and its first call from a server
    /// thread traps on the isolation check; with it, the compiler rejects what is not safe
    /// instead (a capture of main-actor or non-`Sendable` state).
    ///
    /// `R`, `R.Action` and `R.State` are `SendableMetatype` (SE-0470): the server names them on its
    /// own threads. Every concrete type is; a type parameter (`typealias State = T` in a generic
    /// reactor) is only when constrained so. The reactor and its values need not be `Sendable`.
    ///
    /// Its sessions survive a restart with a durable store when `State` is also `Decodable`
    /// (the overload below); with an `Encodable`-only state a stored session cannot come back,
    /// and its requests after a restart answer 409.
    ///
    /// `/openapi.yaml` describes the kind from `R`'s own types: the first request for it (after
    /// kinds change) calls `make` once more for a reactor whose `initialState` it encodes, and
    /// runs `R.Action`'s `init(from:)` against a probe to find the action types and fields.
    public func register<R: Reactor>(
        _ kind: String,
        _ make: @escaping @Sendable (CurrentValueSubject<User?, Never>) -> R
    ) where R: SendableMetatype, R.Action: Decodable & SendableMetatype, R.State: Encodable & SendableMetatype {
        add(kind, { currentUser, _ in make(currentUser) }) { _ in
            throw RestoreError(description: "\(R.self).State is not Decodable, so it cannot be restored")
        }
    }

    /// Adds a reactor kind whose sessions a durable store can bring back: the reactor starts
    /// from the stored state (`Reactor.restore`), decoded from the JSON its state encodes to.
    public func register<R: Reactor>(
        _ kind: String,
        _ make: @escaping @Sendable (CurrentValueSubject<User?, Never>) -> R
    ) where R: SendableMetatype, R.Action: Decodable & SendableMetatype, R.State: Codable & SendableMetatype {
        add(kind, { currentUser, _ in make(currentUser) }) { json in
            try JSONDecoder().decode(R.State.self, from: Data(json))
        }
    }

    /// Adds a reactor kind whose factory is also handed the `Principal` that creates the session:
    /// the verified token's subject and claims, so a reactor can scope what it does to its
    /// owner. `nil` without authentication, and for the spec's probe reactor. A session brought
    /// back from a durable store gets its owner's subject only (the store keeps no claims).
    public func register<R: Reactor>(
        _ kind: String,
        _ make: @escaping @Sendable (CurrentValueSubject<User?, Never>, Principal?) -> R
    ) where R: SendableMetatype, R.Action: Decodable & SendableMetatype, R.State: Encodable & SendableMetatype {
        add(kind, make) { _ in
            throw RestoreError(description: "\(R.self).State is not Decodable, so it cannot be restored")
        }
    }

    /// The principal-aware factory of a kind whose sessions a durable store can bring back.
    public func register<R: Reactor>(
        _ kind: String,
        _ make: @escaping @Sendable (CurrentValueSubject<User?, Never>, Principal?) -> R
    ) where R: SendableMetatype, R.Action: Decodable & SendableMetatype, R.State: Codable & SendableMetatype {
        add(kind, make) { json in try JSONDecoder().decode(R.State.self, from: Data(json)) }
    }

    private func add<R: Reactor>(
        _ kind: String,
        _ make: @escaping @Sendable (CurrentValueSubject<User?, Never>, Principal?) -> R,
        decode: @escaping @Sendable ([UInt8]) throws -> R.State
    ) where R: SendableMetatype, R.Action: Decodable & SendableMetatype, R.State: Encodable & SendableMetatype {
        // The factory lives in the context's registry: it takes what it needs, not the context,
        // or context → registry → factory → context is a cycle that outlives stop().
        let currentUser = context.currentUser
        let logger = context.logger
        // Shared by every session of this kind (made per session, the closure cost each one a context).
        let sessionKind = SessionKind(name: kind, redactedFields: SensitiveFields.of(R.Action.self)) { error in
            logger.error("a state could not be encoded", metadata: ["reactor": "\(kind)", "error": "\(error)"])
        }
        context.registry.register(
            kind,
            factory: { key, hub, principal, storedState in
                let state = try storedState.map(decode)
                return ReactorSession(
                    key: key, kind: sessionKind, owner: principal?.subject,
                    reactor: make(currentUser, principal), hub: hub, restoring: state)
            },
            describe: {
                // A reactor made only to read its initial state (its pipeline is never started).
                KindDescription.of(kind: kind, initialState: make(currentUser, nil).initialState, action: R.Action.self)
            })
    }

    /// Opens the store (throws `StoreError.cannotOpen`, naming what is wrong, when it cannot),
    /// then listens.
    public func start() throws {
        // libmicrohttpd's own answers (414, 431, ...) made this server's, with its fields (CORS).
        _ = mhd_own_answers_install(OwnAnswers.handler)
        try context.openStore()
        if let probe = context.persistence?.probe {
            addReadinessCheck(ReadinessCheck("store") { probe.unreachableReason() })
        }
        let cluster = context.cluster
        // Where other nodes reach this one: before listening when the port is known, else after.
        var advertised: String?
        if let cluster, configuration.port != 0 {
            let address = try advertisedAddress(port: configuration.port)
            cluster.store.advertise(address)
            advertised = address
        }
        do {
            try http.start()
        } catch {
            context.persistence?.journal.stop()
            context.persistence?.engine.close()
            throw error
        }
        if let cluster {
            if configuration.port == 0 {
                let address = try advertisedAddress(port: http.port)
                cluster.store.advertise(address)
                advertised = address
            }
            cluster.start(context)
        }
        sweeper.withLock { $0 = SessionSweeper(context: context) }
        // Only now, with the store open and the port bound: a start that fails must not replace
        // the token of a server that runs in the same folder.
        if configuration.adminToken == nil { announceGeneratedToken() }
        if let files = OpenFileLimit.short(of: configuration.connectionLimit) {
            // Connections past it would wait unanswered in the kernel's queue, with nothing logged.
            context.logger.warning(
                "fewer open files are allowed than the connection limit needs",
                metadata: [
                    "open_file_limit": "\(files)", "connection_limit": "\(configuration.connectionLimit)",
                    "fix": "raise ulimit -n, or lower --connection-limit",
                ])
        }
        context.readiness.setListening(true)
        context.logger.info(
            "reactord listening",
            metadata: [
                "host": "\(context.configuration.host)", "port": "\(http.port)",
                "reactors": "\(context.registry.names.joined(separator: ","))",
                "access_log": "\(context.configuration.accessLog ? "on" : "off")",
                "auth": "\(context.access.isAuthenticating ? "jwt" : "off")",
                "store": "\(context.configuration.store)", "sessions": "\(context.sessions.sessionCount)",
            ].merging(
                cluster.map { ["node": "\($0.store.nodeID)", "advertise": "\(advertised ?? "")"] } ?? [:]
            ) { $1 })
    }

    /// Where other nodes of a cluster reach this one: `advertise`, else `http://HOST:PORT`.
    private func advertisedAddress(port: UInt16) throws(StoreError) -> String {
        if let advertise = configuration.advertise { return advertise }
        let host = configuration.host
        guard !["0.0.0.0", "::", "", "*"].contains(host) else {
            throw .cannotOpen(
                "cluster mode needs --advertise URL (REACTORD_ADVERTISE) when listening on \(host): "
                    + "other nodes forward requests to that address")
        }
        return host.contains(":") ? "http://[\(host)]:\(port)" : "http://\(host):\(port)"
    }

    /// Stops gracefully: new work is refused (503), requests in flight are answered,
    /// connections drain for up to `stopDeadline` seconds. With the memory store every stream
    /// gets `event: end` (its session is over); with a durable store what is pending is
    /// committed and streams close without it, so clients reconnect and resume.
    public func stop() {
        guard context.beginStopping() else { return }
        defer { tokenFile.current?.release() }  // last: another server may have the file from then on
        defer { context.routes.withLock { $0 = Router() } }  // they hold the context: no cycle once stopped
        let started = DispatchTime.now().uptimeNanoseconds
        context.logger.info(
            "reactord stopping",
            metadata: [
                "sessions": "\(context.sessions.sessionCount)", "streams": "\(http.openStreamCount)",
            ])
        sweeper.current?.cancel()
        guard let persistence = context.persistence else {
            let ended = context.sessions.removeAll()
            for session in ended { context.end(session, reason: "shutdown") }
            http.stop(
                finalFrame: EventFrames.end(reason: "shutdown"), deadline: context.configuration.stopDeadline.inSeconds)
            context.logger.info(
                "reactord stopped",
                metadata: [
                    "sessions_ended": "\(ended.count)", "streams_left": "\(http.openStreamCount)",
                    "seconds": "\(Self.seconds(since: started))",
                ])
            return
        }
        for session in context.sessions.loaded { session.hub.refreshStoredActivity(exactly: true) }
        let sessions = persistence.removeAllForStop(from: context)
        for session in sessions { session.release() }  // no change after this one...
        persistence.journal.stop()  // ...so this commits the last of them
        // Committed: every lease goes back now, not at exit, so that other nodes serve these
        // sessions on their next request while this one drains its connections.
        context.cluster?.store.release(sessions.map(\.id))
        for session in sessions { context.end(session, reason: nil) }
        context.cluster?.stop()
        http.stop(finalFrame: nil, deadline: context.configuration.stopDeadline.inSeconds)
        persistence.engine.close()  // a shared store gives the leases back
        context.logger.info(
            "reactord stopped",
            metadata: [
                "sessions_in_memory": "\(sessions.count)", "streams_left": "\(http.openStreamCount)",
                "seconds": "\(Self.seconds(since: started))",
            ])
    }

    private static func seconds(since start: UInt64) -> Double {
        Double((DispatchTime.now().uptimeNanoseconds - start) / 1_000_000) / 1000
    }

    /// Starts, then blocks until SIGINT or SIGTERM, then stops gracefully.
    public func run() throws {
        // The handlers first, and registered before anything starts: `resume()` registers a
        // signal source later, on libdispatch's own thread, and a signal that came before was
        // lost (ignored), so a server stopped soon after it logged its port ran on. On Linux,
        // registering installs libdispatch's handler, which hands the signal to its signalfd
        // (the thread it lands on sees EINTR, which every blocking call here retries); until
        // then, or if registration never comes, the signal's default action ends the process,
        // which has accepted nothing yet.
        let stopped = DispatchSemaphore(value: 0)
        let registered = DispatchGroup()
        let signals = [SIGINT, SIGTERM].map { number -> DispatchSourceSignal in
            #if !os(Linux)
            // kqueue reports a signal beside its action; on Linux libdispatch installs a handler
            signal(number, SIG_IGN)
            #endif
            let source = DispatchSource.makeSignalSource(signal: number, queue: .global())
            source.setEventHandler { stopped.signal() }
            registered.enter()
            source.setRegistrationHandler { registered.leave() }
            source.resume()
            return source
        }
        _ = registered.wait(timeout: .now() + 5)  // bounded: a source that cannot register never says so
        do {
            try start()
        } catch {
            for source in signals { source.cancel() }
            throw error
        }
        stopped.wait()
        stop()
        for source in signals { source.cancel() }
    }

    private static func httpConfiguration(
        _ configuration: ServiceConfiguration, context: ServiceContext,
        logger: Logger
    ) -> HTTPServerConfiguration {
        let metrics = context.metrics
        var http = HTTPServerConfiguration()
        // libmicrohttpd's own log is mostly about single clients (one line per vanished event
        // stream): debug level, so no client can flood the log at the default level.
        var mhdLogger = logger
        mhdLogger[metadataKey: "source"] = "libmicrohttpd"
        http.errorLog = { [mhdLogger] line in mhdLogger.debug("\(line)") }
        http.host = configuration.host
        http.port = configuration.port
        http.threads = configuration.threads
        http.connectionLimit = configuration.connectionLimit
        http.connectionsPerIP = configuration.effectiveConnectionsPerIP
        http.trustedProxies = configuration.trustedProxies
        http.headTimeout = configuration.headTimeout.inSeconds
        // Whole seconds (libmicrohttpd's); `HTTPServer` bounds the number, a Double past Int would trap first.
        http.connectionTimeout = Int(
            min(max(configuration.connectionTimeout.inSeconds.rounded(.up), 1), Double(HTTPServer.maxConnectionTimeout))
        )
        http.bodyLimit = configuration.bodyLimit
        http.heartbeatInterval = configuration.heartbeat.inSeconds
        http.streamQueueLimit = configuration.streamQueueLimit
        let cors = CORSPolicy(configuration: configuration).decorator
        let limits = context.limitNotices
        http.decorate = { [weak context] head, response in
            cors?(head, &response)
            metrics.countRefusal(method: head.method, path: head.path, status: response.status)
            // Before routing, only the connection limits answer so, and a stopping server.
            if response.status == 429 || response.status == 503, response.headers["Retry-After"] != nil,
                context?.isStopping == false
            {
                limits.hit(
                    response.status == 429
                        ? "a connection refused: its address is at the per-address connection limit (429 with Retry-After)"
                        : "a connection refused: the server is at its connection limit (503 with Retry-After)")
            }
        }
        return http
    }

    private struct RestoreError: Error, CustomStringConvertible {
        let description: String
    }

    /// A generated admin token is never logged (a log is shipped, kept and read by many): it is
    /// written to `adminTokenFile` with mode 0600, and printed once to stderr when that is a
    /// terminal, where only the person who started the server sees it.
    private func announceGeneratedToken() {
        let logger = context.logger
        var metadata: Logger.Metadata = [:]
        if let path = configuration.adminTokenFile {
            switch AdminTokenFile.claim(path, token: adminToken) {
            case let .success(file):
                tokenFile.withLock { $0 = file }
                metadata["admin_token_file"] = "\(path)"
            case .failure(.inUse):
                logger.warning(
                    """
                    no admin token configured, and the token file belongs to another running server: it is left \
                    as it is (set REACTORD_ADMIN_TOKEN or --admin-token-file)
                    """,
                    metadata: ["admin_token_file": "\(path)"])
            case let .failure(.cannotWrite(reason)):
                logger.warning(
                    "no admin token configured, and the generated one could not be written",
                    metadata: ["admin_token_file": "\(path)", "error": "\(reason)"])
            }
        }
        if isatty(STDERR_FILENO) == 1 {
            let line = Array(
                "reactord: this run's admin token (also in the file named in the log, if any): \(adminToken)\n".utf8)
            _ = line.withUnsafeBytes { write(STDERR_FILENO, $0.baseAddress, $0.count) }
            metadata["printed_to"] = "stderr (a terminal)"
        }
        logger.info(
            """
            no admin token configured; made one for this run (choose one with REACTORD_ADMIN_TOKEN or \
            --admin-token, or ServiceConfiguration.adminToken where reactord is embedded)
            """,
            metadata: metadata)
    }

    private static func randomToken() -> String {
        Base64URL.encode((0..<32).map { _ in UInt8.random(in: 0...255) })
    }
}
