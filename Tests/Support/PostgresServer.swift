import Foundation

#if canImport(Glibc)
import Glibc
#endif

/// A real PostgreSQL server for the tests, one per test process, started on a free loopback
/// port by `scripts/postgres-test-server` and stopped when the process exits.
///
///     let server = try PostgresServer.shared()   // PostgresServer.Unavailable: skip
///     let dsn = try server.createDatabase("store_commit")
public final class PostgresServer: @unchecked Sendable {
    /// PostgreSQL is not installed here (the only reason a test may skip); `reason` says so.
    public struct Unavailable: Error, CustomStringConvertible {
        public var reason: String
        public var description: String { reason }
    }

    public struct Failed: Error, CustomStringConvertible {
        public var description: String
    }

    /// `postgres://reactord:reactord-test@127.0.0.1:PORT/reactord`: the database made at start.
    public let dsn: String
    public let port: Int
    let directory: String

    private static let lock = NSLock()
    nonisolated(unsafe) private static var started: Result<PostgresServer, Error>?
    nonisolated(unsafe) private static var databases = 0

    /// The process's server, started on first use (a second or two).
    public static func shared() throws -> PostgresServer {
        lock.lock()
        defer { lock.unlock() }
        if started == nil {
            started = Result { try PostgresServer() }
            if case .success = started {
                atexit { PostgresServer.stopShared() }
            }
        }
        return try started!.get()
    }

    private static func stopShared() {
        if case let .success(server)? = started {
            _ = try? server.script("stop", server.directory)
        }
    }

    private init() throws {
        Self.stopLeftovers()
        let port = try Self.freePort()
        let directory = "/tmp/reactord-pg-\(getpid())-\(port)"
        self.port = port
        self.directory = directory
        do {
            dsn = try Self.run(["start", directory, String(port)]).trimmingCharacters(in: .whitespacesAndNewlines)
        } catch let failure as Failed where failure.description.hasPrefix("exit 3:") {
            let reason = "PostgreSQL is not installed (scripts/setup installs it): " + failure.description
            print("skipped: \(reason)")
            throw Unavailable(reason: reason)
        }
    }

    /// Servers of test processes that died before their atexit (a crash, kill -9).
    private static func stopLeftovers() {
        let entries = (try? FileManager.default.contentsOfDirectory(atPath: "/tmp")) ?? []
        for entry in entries where entry.hasPrefix("reactord-pg-") && !entry.hasPrefix("reactord-pg-run-") {
            let fields = entry.split(separator: "-")
            guard fields.count == 4, let pid = Int32(fields[2]), kill(pid, 0) != 0, errno == ESRCH else { continue }
            _ = try? run(["stop", "/tmp/" + entry])
        }
    }

    /// A fresh, empty database owned by the test role; `name` is made unique in this process.
    public func createDatabase(_ name: String) throws -> String {
        Self.lock.lock()
        Self.databases += 1
        let unique = "\(name.lowercased().filter { $0.isLetter || $0.isNumber || $0 == "_" })_\(Self.databases)"
        Self.lock.unlock()
        return try script("createdb", directory, unique).trimmingCharacters(in: .whitespacesAndNewlines)
    }

    /// Stops the server (connections drop; its data is kept), for "PostgreSQL is down".
    public func stop() throws { _ = try script("halt", directory) }

    /// Starts it again on the same port with the same data.
    public func start() throws { _ = try script("resume", directory) }

    /// The DSN of database `name` with another password (for the wrong-password cases).
    public func dsn(database: String = "reactord", password: String = "reactord-test") -> String {
        "postgres://reactord:\(password)@127.0.0.1:\(port)/\(database)"
    }

    @discardableResult
    private func script(_ arguments: String...) throws -> String { try Self.run(arguments) }

    static let scriptPath: String = {
        // Tests/Support/PostgresServer.swift → the repository's root.
        var url = URL(fileURLWithPath: #filePath)
        for _ in 0..<3 { url.deleteLastPathComponent() }
        return url.appendingPathComponent("scripts/postgres-test-server").path
    }()

    /// Runs the script with its output in files: Foundation's Process waited forever here
    /// once the server it started outlived the script.
    private static func run(_ arguments: [String]) throws -> String {
        let base = "/tmp/reactord-pg-run-\(getpid())-\(UInt32.random(in: 0 ... .max))"
        defer {
            unlink(base + ".out")
            unlink(base + ".err")
        }
        var actions = posix_spawn_file_actions_t()
        posix_spawn_file_actions_init(&actions)
        defer { posix_spawn_file_actions_destroy(&actions) }
        posix_spawn_file_actions_addopen(&actions, 0, "/dev/null", O_RDONLY, 0)
        posix_spawn_file_actions_addopen(&actions, 1, base + ".out", O_WRONLY | O_CREAT | O_TRUNC, 0o600)
        posix_spawn_file_actions_addopen(&actions, 2, base + ".err", O_WRONLY | O_CREAT | O_TRUNC, 0o600)
        let argv = ([scriptPath] + arguments).map { strdup($0) } + [nil]
        defer { for argument in argv { free(argument) } }
        var pid = pid_t()
        let spawned = posix_spawn(&pid, scriptPath, &actions, nil, argv, environ)
        guard spawned == 0 else {
            throw Failed(description: "cannot run \(scriptPath): \(String(cString: strerror(spawned)))")
        }
        var status: Int32 = 0
        while waitpid(pid, &status, 0) < 0 && errno == EINTR {}
        let out = (try? String(contentsOfFile: base + ".out", encoding: .utf8)) ?? ""
        let err = (try? String(contentsOfFile: base + ".err", encoding: .utf8)) ?? ""
        let code = (status & 0x7f) == 0 ? (status >> 8) & 0xff : 128 + (status & 0x7f)
        guard code == 0 else {
            throw Failed(description: "exit \(code): postgres-test-server \(arguments.joined(separator: " ")): \(err)")
        }
        return out
    }

    /// A port the kernel just handed out on 127.0.0.1, closed again for the server to take.
    private static func freePort() throws -> Int {
        let fd = socket(AF_INET, Int32(SOCK_STREAM.rawValue), 0)
        guard fd >= 0 else { throw Failed(description: "socket: \(errno)") }
        defer { close(fd) }
        var address = sockaddr_in()
        address.sin_family = sa_family_t(AF_INET)
        address.sin_addr.s_addr = inet_addr("127.0.0.1")
        address.sin_port = 0
        var length = socklen_t(MemoryLayout<sockaddr_in>.size)
        let bound = withUnsafeMutablePointer(to: &address) {
            $0.withMemoryRebound(to: sockaddr.self, capacity: 1) { pointer in
                bind(fd, pointer, length) == 0 && getsockname(fd, pointer, &length) == 0
            }
        }
        guard bound else { throw Failed(description: "bind: \(errno)") }
        return Int(UInt16(bigEndian: address.sin_port))
    }
}
