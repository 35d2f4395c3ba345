import Foundation

#if canImport(Glibc)
import Glibc
#endif

/// A blocking TCP connection to a server under test on loopback, with a read timeout: the one
/// raw socket every test client (TestClient, HTTPClient, EventStreamClient, StreamFleet,
/// the hostile-client tests) is built on.
public final class TestSocket {
    public enum Failure: Error { case connect(Int32), timeout, closed, io(Int32) }

    public let fd: Int32

    /// `from`: the loopback address to connect from (127.0.0.2 is another client than 127.0.0.1).
    public init(port: UInt16, timeout: Double = 5, receiveBuffer: Int32? = nil, from source: String? = nil) throws {
        fd = try connectLoopback(port: port, receiveBuffer: receiveBuffer, from: source)
        setTimeout(timeout)
    }

    deinit { close(fd) }

    /// The read timeout; writes get at least 10 s, so a server that stops reading fails a
    /// test instead of hanging it.
    public func setTimeout(_ seconds: Double) {
        var time = timeval(tv_sec: Int(seconds), tv_usec: Int((seconds - Double(Int(seconds))) * 1e6))
        setsockopt(fd, SOL_SOCKET, SO_RCVTIMEO, &time, socklen_t(MemoryLayout<timeval>.size))
        var sendTime = timeval(tv_sec: max(10, Int(seconds)), tv_usec: 0)
        setsockopt(fd, SOL_SOCKET, SO_SNDTIMEO, &sendTime, socklen_t(MemoryLayout<timeval>.size))
    }

    /// Writes every byte, or throws (the peer closed, or reset).
    public func write(_ bytes: [UInt8]) throws {
        var offset = 0
        while offset < bytes.count {
            let sent = bytes[offset...].withUnsafeBytes { send(fd, $0.baseAddress, $0.count, Int32(MSG_NOSIGNAL)) }
            guard sent > 0 else { throw Failure.io(errno) }
            offset += sent
        }
    }

    public func write(_ text: String) throws { try write(Array(text.utf8)) }

    /// What arrives next (at most `capacity` bytes): throws `.closed` at EOF, `.timeout` when
    /// nothing comes within the read timeout.
    public func receive(capacity: Int = 65_536) throws -> [UInt8] {
        var chunk = [UInt8](repeating: 0, count: capacity)
        let count = chunk.withUnsafeMutableBytes { recv(fd, $0.baseAddress, $0.count, 0) }
        if count > 0 { return Array(chunk[0..<count]) }
        if count == 0 { throw Failure.closed }
        throw errno == EAGAIN || errno == EWOULDBLOCK ? Failure.timeout : Failure.io(errno)
    }

    /// Reads one response into a parser; nil on timeout, error, or EOF before it is complete.
    public func readResponse(headOnly: Bool = false) -> ResponseParser? {
        var parser = ResponseParser()
        parser.headOnly = headOnly
        while !parser.isComplete {
            do {
                parser.feed(try receive())
            } catch Failure.closed {
                parser.endOfStream()
                break
            } catch {
                return nil
            }
        }
        return parser.isComplete ? parser : nil
    }

    /// Closes abruptly (RST), as a vanished client does.
    public func reset() {
        var linger = linger(l_onoff: 1, l_linger: 0)
        setsockopt(fd, SOL_SOCKET, SO_LINGER, &linger, socklen_t(MemoryLayout<linger>.size))
        shutdown(fd, Int32(SHUT_RDWR))
    }

    /// True when the server has already closed this idle connection (EOF or reset waiting to be
    /// read; nothing is consumed): a keep-alive client then opens a new one, as HTTP clients do
    /// with a pooled connection the server timed out.
    public var peerHasClosed: Bool {
        var byte: UInt8 = 0
        let n = recv(fd, &byte, 1, Int32(MSG_PEEK | MSG_DONTWAIT))
        return n == 0 || (n < 0 && errno != EAGAIN && errno != EWOULDBLOCK)
    }

    /// True when the server has closed this connection (EOF or reset within `timeout`);
    /// bytes that arrive first are skipped.
    public func isClosedByPeer(timeout: Double = 2) -> Bool {
        let deadline = monotonicNow() + timeout
        var byte = [UInt8](repeating: 0, count: 4096)
        while true {
            let left = deadline - monotonicNow()
            if left <= 0 { return false }
            var pfd = pollfd(fd: fd, events: Int16(POLLIN), revents: 0)
            guard poll(&pfd, 1, Int32(left * 1000) + 1) == 1 else { return false }
            let n = byte.withUnsafeMutableBytes { recv(fd, $0.baseAddress, $0.count, Int32(MSG_DONTWAIT)) }
            if n <= 0 { return n == 0 || (errno != EAGAIN && errno != EWOULDBLOCK) }
        }
    }
}

public struct TestSocketError: Error { public let message: String }

/// A connected TCP socket to 127.0.0.1:`port` (blocking), from `source` (another loopback
/// address, e.g. 127.0.0.2, to be another client) when given.
public func connectLoopback(port: UInt16, receiveBuffer: Int32? = nil, from source: String? = nil) throws -> Int32 {
    let fd = socket(AF_INET, Int32(SOCK_STREAM.rawValue), 0)
    guard fd >= 0 else { throw TestSocketError(message: "socket: \(String(cString: strerror(errno)))") }
    if var size = receiveBuffer {
        setsockopt(fd, SOL_SOCKET, SO_RCVBUF, &size, socklen_t(MemoryLayout<Int32>.size))
    }
    if let source {
        var local = sockaddr_in()
        local.sin_family = sa_family_t(AF_INET)
        local.sin_addr.s_addr = inet_addr(source)
        let bound = withUnsafePointer(to: &local) {
            $0.withMemoryRebound(to: sockaddr.self, capacity: 1) {
                bind(fd, $0, socklen_t(MemoryLayout<sockaddr_in>.size))
            }
        }
        guard bound == 0 else {
            let message = String(cString: strerror(errno))
            close(fd)
            throw TestSocketError(message: "bind \(source): \(message)")
        }
    }
    var address = sockaddr_in()
    address.sin_family = sa_family_t(AF_INET)
    address.sin_port = port.bigEndian
    address.sin_addr.s_addr = inet_addr("127.0.0.1")
    let result = withUnsafePointer(to: &address) {
        $0.withMemoryRebound(to: sockaddr.self, capacity: 1) {
            connect(fd, $0, socklen_t(MemoryLayout<sockaddr_in>.size))
        }
    }
    guard result == 0 else {
        let message = String(cString: strerror(errno))
        close(fd)
        throw TestSocketError(message: "connect: \(message)")
    }
    return fd
}
