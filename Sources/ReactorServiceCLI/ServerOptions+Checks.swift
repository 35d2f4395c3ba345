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

    /// A rule's failure, named by where the bad value came from: the flag when it was given, else its variable.
    static func require(_ condition: Bool, _ flag: Any?, _ name: String, _ rule: String, _ value: Any) throws {
        guard !condition else { return }
        throw ValidationError("\(flag != nil ? "--\(name)" : variable(name)) \(rule) (got \(value))")
    }

    /// `--session-ttl`'s variable: `REACTORD_SESSION_TTL`.
    static func variable(_ flag: String) -> String {
        "REACTORD_" + String(flag.uppercased().map { $0 == "-" ? "_" : $0 })
    }

    /// The range a time in seconds must fall in, and how its error words it.
    struct SecondsRule {
        let lowest: Double
        let excludesLowest: Bool
        let highest: Double
        let words: String

        /// From `lowest` (included) to `highest`.
        static func from(_ lowest: Double, _ words: String, upTo highest: Double = 1e9) -> SecondsRule {
            SecondsRule(lowest: lowest, excludesLowest: false, highest: highest, words: words)
        }

        /// Above `lowest`, up to a billion.
        static func above(_ lowest: Double, _ words: String) -> SecondsRule {
            SecondsRule(lowest: lowest, excludesLowest: true, highest: 1e9, words: words)
        }

        func admits(_ value: Double) -> Bool {
            value.isFinite && value <= highest && (excludesLowest ? value > lowest : value >= lowest)
        }
    }

    /// A time given in seconds by its flag, else its variable, checked before it becomes a `Duration`:
    /// `Duration.seconds` traps on inf and NaN, and the server's timers past Int64 nanoseconds, so
    /// a time must be finite and at most a billion seconds (about 31 years). nil: neither was given.
    func seconds(_ flag: Double?, _ name: String, _ environment: Environment, _ rule: SecondsRule) throws -> Duration? {
        guard let value: Double = try flag ?? environment.value(Self.variable(name)) else { return nil }
        try Self.require(rule.admits(value), flag, name, "must be a number of seconds \(rule.words)", value)
        return .seconds(value)
    }

    /// The rules between values; each time was checked as it was read (`seconds`).
    func check(_ configuration: ServiceConfiguration) throws {
        let require = Self.require
        try require(
            (1...HTTPServer.maxThreads).contains(configuration.threads), threads, "threads",
            "must be from 1 to \(HTTPServer.maxThreads)", configuration.threads)
        try require(
            configuration.adminToken?.isEmpty != true, adminToken, "admin-token",
            "must not be empty (leave it out to have one generated)", "\"\"")
        try require(
            configuration.maxSessions >= 1, maxSessions, "max-sessions", "must be at least 1", configuration.maxSessions
        )
        try require(
            configuration.maxStoredSessions >= 1, maxStoredSessions, "max-stored-sessions", "must be at least 1",
            configuration.maxStoredSessions)
        try require(
            (64...(1 << 30)).contains(configuration.bodyLimit), bodyLimit, "body-limit",
            "must be from 64 bytes to 1 GiB (1073741824)", configuration.bodyLimit)
        try require(
            configuration.historyLength >= 0, history, "history", "must not be negative", configuration.historyLength)
        try require(
            configuration.actionLogLength >= 0, actionLog, "action-log", "must not be negative (0: no log)",
            configuration.actionLogLength)
        try require(
            (1...HTTPServer.maxConnectionLimit).contains(configuration.connectionLimit), connectionLimit,
            "connection-limit", "must be from 1 to \(HTTPServer.maxConnectionLimit)", configuration.connectionLimit)
        try require(
            (0...HTTPServer.maxConnectionLimit).contains(configuration.effectiveConnectionsPerIP), connectionsPerIP,
            "connections-per-ip", "must be from 0 (no limit) to \(HTTPServer.maxConnectionLimit)",
            configuration.effectiveConnectionsPerIP)
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
        if let address = configuration.advertise {
            try require(
                ServiceConfiguration.isNodeAddress(address), advertise, "advertise",
                "must be an http:// URL with a host and a port other nodes can reach, e.g. http://10.0.0.5:8080",
                address)
        }
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
