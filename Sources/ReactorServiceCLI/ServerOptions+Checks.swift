import ArgumentParser
import Logging
import MicroHTTP
import ReactorService

#if canImport(Glibc)
import Glibc
#endif
#if canImport(FoundationEssentials)
import FoundationEssentials
#else
import Foundation
#endif

extension ServerOptions {
    /// `--log-level`, else `REACTORD_LOG_LEVEL`, else info.
    public func logLevel(environment: [String: String] = ProcessInfo.processInfo.environment) throws -> Logger.Level {
        try logLevel.map { try Environment.parse($0, name: "--log-level") }
            ?? Environment(environment).value("REACTORD_LOG_LEVEL") ?? .info
    }

    /// `--log-format`, else `REACTORD_LOG_FORMAT`, else text.
    public func logFormat(environment: [String: String] = ProcessInfo.processInfo.environment) throws -> LogFormat {
        try logFormat ?? Environment(environment).value("REACTORD_LOG_FORMAT") ?? .text
    }

    /// Sends swift-log's output to stderr at `logLevel(environment:)`, as text or one JSON object
    /// per line (`logFormat(environment:)`). Once per process.
    public func bootstrapLogging(environment: [String: String] = ProcessInfo.processInfo.environment) throws {
        let level = try logLevel(environment: environment)
        let format = try logFormat(environment: environment)
        LoggingSystem.bootstrap { label in format.handler(label: label, level: level) }
    }

    /// Each rule names where the bad value came from: the flag when it was given, else its variable.
    func check(_ configuration: ServiceConfiguration) throws {
        func require(_ condition: Bool, _ flag: Any?, _ name: String, _ rule: String, _ value: Any) throws {
            guard !condition else { return }
            let source =
                flag != nil ? "--\(name)" : "REACTORD_" + String(name.uppercased().map { $0 == "-" ? "_" : $0 })
            throw ValidationError("\(source) \(rule) (got \(value))")
        }
        // Seconds become Dispatch deadlines, which trap past Int64 nanoseconds (inf, 1e300):
        // finite and at most a billion seconds (about 31 years) keeps every one in range.
        func seconds(_ value: Double, min: Double, exclusive: Bool) -> Bool {
            value.isFinite && value <= 1e9 && (exclusive ? value > min : value >= min)
        }
        try require(configuration.threads >= 1, threads, "threads", "must be at least 1", configuration.threads)
        try require(
            configuration.adminToken?.isEmpty != true, adminToken, "admin-token",
            "must not be empty (leave it out to have one generated)", "\"\"")
        try require(
            seconds(configuration.sessionTTL, min: 0, exclusive: false), sessionTTL, "session-ttl",
            "must be a number of seconds from 0 (never expire) to 1e9", configuration.sessionTTL)
        try require(
            configuration.maxSessions >= 1, maxSessions, "max-sessions", "must be at least 1", configuration.maxSessions
        )
        try require(
            seconds(configuration.unloadAfter, min: 0, exclusive: false), unloadAfter, "unload-after",
            "must be a number of seconds from 0 (never) to 1e9", configuration.unloadAfter)
        try require(
            seconds(configuration.idempotencyTTL, min: 0, exclusive: true), idempotencyTTL, "idempotency-ttl",
            "must be a number of seconds above 0, up to 1e9", configuration.idempotencyTTL)
        try require(
            configuration.maxStoredSessions >= 1, maxStoredSessions, "max-stored-sessions", "must be at least 1",
            configuration.maxStoredSessions)
        try require(
            (64...(1 << 30)).contains(configuration.bodyLimit), bodyLimit, "body-limit",
            "must be from 64 bytes to 1 GiB (1073741824)", configuration.bodyLimit)
        try require(
            seconds(configuration.heartbeat, min: 0.01, exclusive: false), heartbeat, "heartbeat",
            "must be a number of seconds from 0.01 to 1e9", configuration.heartbeat)
        try require(
            configuration.historyLength >= 0, history, "history", "must not be negative", configuration.historyLength)
        try require(
            configuration.actionLogLength >= 0, actionLog, "action-log", "must not be negative (0: no log)",
            configuration.actionLogLength)
        try require(
            seconds(configuration.actionLogAge, min: 0, exclusive: true), actionLogAge, "action-log-age",
            "must be a number of seconds above 0, up to 1e9", configuration.actionLogAge)
        try require(
            (1...HTTPServer.maxConnectionLimit).contains(configuration.connectionLimit), connectionLimit,
            "connection-limit", "must be from 1 to \(HTTPServer.maxConnectionLimit)", configuration.connectionLimit)
        try require(
            seconds(configuration.streamMaxAge, min: 0, exclusive: false), streamMaxAge, "stream-max-age",
            "must be a number of seconds from 0 to 1e9", configuration.streamMaxAge)
        try require(
            configuration.effectiveConnectionsPerIP >= 0, connectionsPerIP, "connections-per-ip",
            "must not be negative", configuration.effectiveConnectionsPerIP)
        try require(
            seconds(configuration.headTimeout, min: 0, exclusive: false), headTimeout, "head-timeout",
            "must be a number of seconds from 0 (no deadline) to 1e9", configuration.headTimeout)
        try require(
            configuration.maxSessionsPerSubject >= 1, maxSessionsPerSubject, "max-sessions-per-subject",
            "must be at least 1", configuration.maxSessionsPerSubject)
        try require(
            configuration.sessionCreateRate.isFinite && configuration.sessionCreateRate >= 0, sessionCreateRate,
            "session-create-rate", "must be a number of sessions per second, 0 or more", configuration.sessionCreateRate
        )
        try require(
            configuration.sessionCreateBurst >= 1, sessionCreateBurst, "session-create-burst", "must be at least 1",
            configuration.sessionCreateBurst)
        try require(
            seconds(configuration.leaseDuration, min: 0.5, exclusive: false) && configuration.leaseDuration <= 3_600,
            lease, "lease", "must be a number of seconds from 0.5 to 3600", configuration.leaseDuration)
        if let address = configuration.advertise {
            try require(
                ServiceConfiguration.isNodeAddress(address), advertise, "advertise",
                "must be an http:// URL with a host and a port other nodes can reach, e.g. http://10.0.0.5:8080",
                address)
        }
        try require(
            configuration.connectionTimeout >= 1, connectionTimeout, "connection-timeout", "must be at least 1 second",
            configuration.connectionTimeout)
        if configuration.adminToken == nil, let path = configuration.adminTokenFile {
            try checkAdminTokenFile(path, require)
        }
    }

    /// The generated token's file: its folder must exist, and it must be neither a folder nor a
    /// symbolic link (the token would land wherever the link points). An explicitly named file
    /// and its folder must also be writable; the default, in the working directory, only warns
    /// when it is not (a read-only working directory must not stop a server that needs no file).
    private func checkAdminTokenFile(
        _ path: String,
        _ require: (Bool, Any?, String, String, Any) throws -> Void
    ) throws {
        let explicit = adminTokenFile != nil || path != Self.defaultAdminTokenFile
        let flag: Any? = adminTokenFile
        let folder = path.contains("/") ? String(path[...path.lastIndex(of: "/")!]) : "."
        var info = stat()
        try require(
            stat(folder, &info) == 0 && info.st_mode & S_IFMT == S_IFDIR,
            flag, "admin-token-file", "must be in a folder that exists", path)
        let exists = lstat(path, &info) == 0
        try require(
            !(exists && info.st_mode & S_IFMT == S_IFLNK), flag, "admin-token-file", "must not be a symbolic link", path
        )
        try require(
            !(exists && info.st_mode & S_IFMT == S_IFDIR) && !path.hasSuffix("/"), flag, "admin-token-file",
            "must name a file, not a folder", path)
        if explicit {
            try require(
                access(folder, W_OK) == 0 && (!exists || access(path, W_OK) == 0), flag, "admin-token-file",
                "must be a file this user can write, in a folder it can write", path)
        }
    }
}
