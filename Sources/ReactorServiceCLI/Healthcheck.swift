import ArgumentParser

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
/// needs no curl. A plain HTTP/1.1 GET on a socket to 127.0.0.1 (no Foundation networking);
/// exit status 0 for a 2xx answer, 1 otherwise, with one line saying why.
struct Healthcheck: ParsableCommand {
    static let configuration = CommandConfiguration(
        abstract: "Asks a running reactord on this host whether it is ready (exit status 0) or not (1).")

    // Not `--port`: the server's own options are parsed after a subcommand's name too.
    @Option(name: .customLong("server-port"), help: "Port of the server to ask. [env: REACTORD_PORT] (default: 8080)")
    var port: UInt16?
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
        let status: Int
        do {
            status = try Self.get(path: path, port: port, timeout: timeout)
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

    /// The status code of `GET path` on 127.0.0.1:`port`.
    static func get(path: String, port: UInt16, timeout: Double) throws -> Int {
        #if canImport(Glibc)
        let fd = socket(AF_INET, Int32(SOCK_STREAM.rawValue), 0)
        #else
        let fd = socket(AF_INET, SOCK_STREAM, 0)
        #endif
        guard fd >= 0 else { throw Failure(description: "socket: \(String(cString: strerror(errno)))") }
        defer { close(fd) }
        var limit = timeval()
        limit.tv_sec = .init(timeout)
        limit.tv_usec = .init((timeout - timeout.rounded(.down)) * 1_000_000)
        setsockopt(fd, SOL_SOCKET, SO_RCVTIMEO, &limit, socklen_t(MemoryLayout<timeval>.size))
        setsockopt(fd, SOL_SOCKET, SO_SNDTIMEO, &limit, socklen_t(MemoryLayout<timeval>.size))
        var address = sockaddr_in()
        address.sin_family = sa_family_t(AF_INET)
        address.sin_port = port.bigEndian
        address.sin_addr.s_addr = UInt32(0x7f00_0001).bigEndian
        let connected = withUnsafePointer(to: &address) {
            $0.withMemoryRebound(to: sockaddr.self, capacity: 1) {
                connect(fd, $0, socklen_t(MemoryLayout<sockaddr_in>.size))
            }
        }
        guard connected == 0 else {
            throw Failure(description: "cannot connect to 127.0.0.1:\(port): \(String(cString: strerror(errno)))")
        }
        let request = Array("GET \(path) HTTP/1.1\r\nHost: 127.0.0.1:\(port)\r\nConnection: close\r\n\r\n".utf8)
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
