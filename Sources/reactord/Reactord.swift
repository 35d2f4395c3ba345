import ArgumentParser
import Examples
#if canImport(FoundationEssentials)
import FoundationEssentials
#else
import Foundation
#endif
import Logging
import ReactorService

@main
struct Reactord: ParsableCommand {
    static let configuration = CommandConfiguration(
        abstract: "Serves reactors over HTTP: sessions, actions, state and pulses as Server-Sent Events.",
        discussion: "Every option can also be set by the environment variable named in its help; the flag wins.",
        subcommands: [Healthcheck.self])

    @Option(help: "Address to bind. [env: REACTORD_HOST] (default: 127.0.0.1)")
    var host: String?
    @Option(help: "Port to listen on, 0 for any free one. [env: REACTORD_PORT] (default: 8080)")
    var port: UInt16?
    @Option(help: "libmicrohttpd worker threads. [env: REACTORD_THREADS] (default: 1)")
    var threads: Int?
    @Option(help: "Bearer token for PUT/DELETE /user; random and logged when unset. [env: REACTORD_ADMIN_TOKEN]")
    var adminToken: String?
    @Option(help: "Seconds a session lives without actions or subscribers. [env: REACTORD_SESSION_TTL] (default: 1800)")
    var sessionTTL: Double?
    @Option(help: "Most sessions at once; past it POST /sessions answers 503. [env: REACTORD_MAX_SESSIONS] (default: 100000)")
    var maxSessions: Int?
    @Option(help: "Largest request body in bytes. [env: REACTORD_BODY_LIMIT] (default: 1048576)")
    var bodyLimit: Int?
    @Option(help: "Seconds between SSE keep-alive comments. [env: REACTORD_HEARTBEAT] (default: 15)")
    var heartbeat: Double?
    @Option(help: "Events kept per session for Last-Event-ID resumes. [env: REACTORD_HISTORY] (default: 1024)")
    var history: Int?
    @Option(help: "Most connections at once. [env: REACTORD_CONNECTION_LIMIT] (default: 10000)")
    var connectionLimit: Int?
    @Option(help: "Most connections from one address, 0 for no limit. [env: REACTORD_CONNECTIONS_PER_IP] (default: 0)")
    var connectionsPerIP: Int?
    @Option(help: "Seconds after which an event stream is closed without 'event: end' so the client reconnects and resumes, 0 for never. [env: REACTORD_STREAM_MAX_AGE] (default: 0)")
    var streamMaxAge: Double?
    @Option(help: "Seconds a connection may stay silent mid-request before it is closed (slowloris); event streams have none. [env: REACTORD_CONNECTION_TIMEOUT] (default: 30)")
    var connectionTimeout: Int?
    @Option(help: "Comma-separated browser origins allowed by CORS, or '*'. [env: REACTORD_CORS_ORIGINS] (default: none)")
    var corsOrigins: String?
    @Option(help: "Log level: trace, debug, info, notice, warning, error, critical. [env: REACTORD_LOG_LEVEL] (default: info)")
    var logLevel: String?
    @Option(help: "Log format: text, or json (one object per line). [env: REACTORD_LOG_FORMAT] (default: text)")
    var logFormat: LogFormat?
    @Option(help: "One log line per request, at info: on or off. [env: REACTORD_ACCESS_LOG] (default: on)")
    var accessLog: Switch?
    @Option(help: "Where sessions, their history and the global user outlive the process: 'sqlite:PATH' (one process per file) or 'memory' (nothing survives). [env: REACTORD_STORE] (default: sqlite:reactord.sqlite)")
    var store: String?

    mutating func run() throws {
        let environment = Environment(ProcessInfo.processInfo.environment)
        var configuration = ServiceConfiguration()
        configuration.host = try host ?? environment.value("REACTORD_HOST") ?? configuration.host
        configuration.port = try port ?? environment.value("REACTORD_PORT") ?? configuration.port
        configuration.threads = try threads ?? environment.value("REACTORD_THREADS") ?? configuration.threads
        configuration.adminToken = try adminToken ?? environment.value("REACTORD_ADMIN_TOKEN")
        configuration.sessionTTL = try sessionTTL ?? environment.value("REACTORD_SESSION_TTL") ?? configuration.sessionTTL
        configuration.maxSessions = try maxSessions ?? environment.value("REACTORD_MAX_SESSIONS") ?? configuration.maxSessions
        configuration.bodyLimit = try bodyLimit ?? environment.value("REACTORD_BODY_LIMIT") ?? configuration.bodyLimit
        configuration.heartbeat = try heartbeat ?? environment.value("REACTORD_HEARTBEAT") ?? configuration.heartbeat
        configuration.historyLength = try history ?? environment.value("REACTORD_HISTORY") ?? configuration.historyLength
        configuration.connectionLimit = try connectionLimit ?? environment.value("REACTORD_CONNECTION_LIMIT")
            ?? configuration.connectionLimit
        configuration.connectionsPerIP = try connectionsPerIP ?? environment.value("REACTORD_CONNECTIONS_PER_IP")
            ?? configuration.connectionsPerIP
        configuration.streamMaxAge = try streamMaxAge ?? environment.value("REACTORD_STREAM_MAX_AGE")
            ?? configuration.streamMaxAge
        configuration.connectionTimeout = try connectionTimeout ?? environment.value("REACTORD_CONNECTION_TIMEOUT")
            ?? configuration.connectionTimeout
        let origins: String? = try corsOrigins ?? environment.value("REACTORD_CORS_ORIGINS")
        configuration.corsOrigins = origins.map {
            $0.split(separator: ",").map { $0.trimmingWhitespace() }.filter { !$0.isEmpty }
        } ?? []
        let storeText: String = try store ?? environment.value("REACTORD_STORE") ?? "sqlite:reactord.sqlite"
        do {
            configuration.store = try StoreLocation(parsing: storeText)
        } catch {
            throw ValidationError("--store: \(error)")
        }
        let level: Logger.Level = try logLevel.map { try Environment.parse($0, name: "--log-level") }
            ?? environment.value("REACTORD_LOG_LEVEL") ?? .info
        let format: LogFormat = try logFormat ?? environment.value("REACTORD_LOG_FORMAT") ?? .text
        configuration.accessLog = try (accessLog ?? environment.value("REACTORD_ACCESS_LOG") ?? .on) == .on
        try Self.validate(configuration)

        LoggingSystem.bootstrap { label in format.handler(label: label, level: level) }
        let server = ReactorServer(configuration: configuration, logger: Logger(label: "reactord"))
        server.registerBundledReactors()
        try server.run()
    }

    private static func validate(_ configuration: ServiceConfiguration) throws {
        func require(_ condition: Bool, _ message: String) throws {
            if !condition { throw ValidationError(message) }
        }
        try require(configuration.threads >= 1, "threads must be at least 1")
        try require(configuration.sessionTTL > 0, "session TTL must be positive")
        try require(configuration.maxSessions >= 1, "max sessions must be at least 1")
        try require(configuration.bodyLimit >= 64, "body limit must be at least 64 bytes")
        try require(configuration.heartbeat > 0, "heartbeat must be positive")
        try require(configuration.historyLength >= 0, "history must not be negative")
        try require(configuration.connectionLimit >= 1, "connection limit must be at least 1")
        try require(configuration.streamMaxAge >= 0, "stream max age must not be negative")
        try require(configuration.connectionsPerIP >= 0, "connections per IP must not be negative")
        try require(configuration.connectionTimeout >= 1, "connection timeout must be at least 1 second")
    }
}
