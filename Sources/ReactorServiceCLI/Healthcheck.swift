import ArgumentParser
import MicroHTTP

#if canImport(FoundationEssentials)
import FoundationEssentials
#else
import Foundation
#endif
#if canImport(Glibc)
import Glibc
#elseif canImport(Darwin)
import Darwin
#endif

/// `reactord healthcheck`: the container's HEALTHCHECK, done by the binary itself so the image
/// needs no curl. A plain HTTP/1.1 GET on a socket (no Foundation networking) to the address the
/// server binds (`REACTORD_HOST`; a wildcard one is asked on loopback); exit status 0 for a 2xx
/// answer, 1 otherwise, with one line saying why.
struct Healthcheck: ParsableCommand {
    static let configuration = CommandConfiguration(
        abstract: "Asks a running reactord on this host whether it is ready (exit status 0) or not (1).")

    // Not `--port`: the server's own options are parsed after a subcommand's name too.
    @Option(name: .customLong("server-port"), help: "Port of the server to ask. [env: REACTORD_PORT] (default: 8080)")
    var port: UInt16?
    @Option(
        name: .customLong("server-host"),
        help: """
            Address the server binds: asked there, on loopback when it is 0.0.0.0 or ::. \
            [env: REACTORD_HOST] (default: 127.0.0.1)
            """)
    var host: String?
    @Option(help: "Path to GET: /readyz (ready for work) or /healthz (alive).")
    var path: String = "/readyz"
    @Option(help: "Seconds to wait for the answer.")
    var timeout: Double = 2

    mutating func validate() throws {
        guard path.hasPrefix("/") else {
            throw ValidationError("--path must start with '/', e.g. /readyz or /healthz (got \(path))")
        }
        guard timeout.isFinite, timeout > 0, timeout <= 3_600 else {
            throw ValidationError("--timeout must be a number of seconds above 0 and at most 3600 (got \(timeout))")
        }
    }

    func run() throws {
        let environment = Environment(ProcessInfo.processInfo.environment)
        let port = try port ?? environment.value("REACTORD_PORT") ?? 8080
        let bound = try host ?? environment.value("REACTORD_HOST") ?? "127.0.0.1"
        let status: Int
        do {
            status = try Self.get(path: path, host: Self.reachable(bound), port: port, timeout: timeout)
        } catch {
            print("unhealthy: GET \(path): \(error)")
            throw ExitCode(1)
        }
        guard (200..<300).contains(status) else {
            print("unhealthy: GET \(path) answered \(status)")
            throw ExitCode(1)
        }
        print("healthy: GET \(path) answered \(status)")
    }

    struct Failure: Error, CustomStringConvertible {
        let description: String
    }

    /// Where a server bound to `host` is asked: there, or on loopback for a wildcard.
    static func reachable(_ host: String) -> String {
        switch host {
        case "0.0.0.0", "": return "127.0.0.1"
        case "::", "[::]": return "::1"
        default: return host.hasPrefix("[") && host.hasSuffix("]") ? String(host.dropFirst().dropLast()) : host
        }
    }

    /// The status code of `GET path` on `host`:`port`.
    static func get(path: String, host: String, port: UInt16, timeout: Double) throws -> Int {
        let fd: Int32
        switch ClientSocket.connect(host: host, port: port, timeout: timeout) {
        case let .success(connected): fd = connected
        case let .failure(.unresolved(why)): throw Failure(description: "cannot resolve \(host): \(why)")
        case let .failure(.unreachable(why)):
            throw Failure(description: "cannot connect to \(host) port \(port): \(why ?? "no address")")
        }
        defer { close(fd) }
        let authority = host.contains(":") ? "[\(host)]:\(port)" : "\(host):\(port)"
        let request = Array("GET \(path) HTTP/1.1\r\nHost: \(authority)\r\nConnection: close\r\n\r\n".utf8)
        var sent = 0
        while sent < request.count {
            let count = request[sent...].withUnsafeBytes { send(fd, $0.baseAddress, $0.count, 0) }
            guard count > 0 else { throw Failure(description: "send: \(String(cString: strerror(errno)))") }
            sent += count
        }
        // The status line is all that is needed: "HTTP/1.1 200 OK\r\n".
        var received: [UInt8] = []
        var buffer = [UInt8](repeating: 0, count: 512)
        while !received.contains(UInt8(ascii: "\n")) && received.count < 4096 {
            let count = buffer.withUnsafeMutableBytes { recv(fd, $0.baseAddress, $0.count, 0) }
            guard count > 0 else {
                throw Failure(
                    description: count == 0
                        ? "the server closed the connection without an answer"
                        : "no answer within \(timeout) s")
            }
            received += buffer[0..<count]
        }
        let line = String(
            decoding: received.prefix { $0 != UInt8(ascii: "\r") && $0 != UInt8(ascii: "\n") }, as: UTF8.self)
        let parts = line.split(separator: " ")
        guard parts.count >= 2, parts[0].hasPrefix("HTTP/"), let status = Int(parts[1]) else {
            throw Failure(description: "not an HTTP answer: \(line.prefix(80))")
        }
        return status
    }
}
