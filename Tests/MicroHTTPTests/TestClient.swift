import XCTest
#if canImport(Glibc)
import Glibc
#endif

/// A blocking test client on one socket (keep-alive: several requests on it).
final class TestClient {
    let fd: Int32

    init(port: UInt16, receiveTimeout: Double = 10) throws {
        fd = try connectLoopback(port: port)
        var timeout = timeval(tv_sec: Int(receiveTimeout), tv_usec: 0)
        setsockopt(fd, SOL_SOCKET, SO_RCVTIMEO, &timeout, socklen_t(MemoryLayout<timeval>.size))
    }

    deinit { close(fd) }

    func send(_ text: String) { send(Array(text.utf8)) }
    func send(_ bytes: [UInt8]) {
        var sent = 0
        while sent < bytes.count {
            let n = bytes.withUnsafeBytes { Glibc.send(fd, $0.baseAddress! + sent, bytes.count - sent, Int32(MSG_NOSIGNAL)) }
            if n <= 0 { return }
            sent += n
        }
    }

    /// Reads one complete response (nil on timeout or a connection closed before it).
    func readResponse(headOnly: Bool = false) -> ResponseParser? {
        var parser = ResponseParser()
        parser.headOnly = headOnly
        var chunk = [UInt8](repeating: 0, count: 65_536)
        while !parser.isComplete {
            let n = chunk.withUnsafeMutableBytes { recv(fd, $0.baseAddress!, $0.count, 0) }
            if n == 0 { parser.endOfStream(); break }
            if n < 0 { return nil }
            chunk.withUnsafeBytes { parser.feed(UnsafeRawBufferPointer(rebasing: $0[0..<n])) }
        }
        return parser.isComplete ? parser : nil
    }

    func request(_ method: String, _ target: String, headers: [String] = [], body: String? = nil) -> ResponseParser? {
        var text = "\(method) \(target) HTTP/1.1\r\nHost: test\r\n"
        for header in headers { text += header + "\r\n" }
        if let body { text += "Content-Length: \(body.utf8.count)\r\n" }
        text += "\r\n" + (body ?? "")
        send(text)
        return readResponse(headOnly: method == "HEAD")
    }

    /// True when the server has closed this connection (EOF within `timeout`).
    func isClosedByPeer(timeout: Double = 2) -> Bool {
        var pfd = pollfd(fd: fd, events: Int16(POLLIN), revents: 0)
        guard poll(&pfd, 1, Int32(timeout * 1000)) == 1 else { return false }
        var byte: UInt8 = 0
        return recv(fd, &byte, 1, Int32(MSG_DONTWAIT)) <= 0
    }
}

struct TestSocketError: Error { let message: String }

func connectLoopback(port: UInt16, receiveBuffer: Int32? = nil) throws -> Int32 {
    let fd = socket(AF_INET, Int32(SOCK_STREAM.rawValue), 0)
    guard fd >= 0 else { throw TestSocketError(message: "socket: \(String(cString: strerror(errno)))") }
    if var size = receiveBuffer {
        setsockopt(fd, SOL_SOCKET, SO_RCVBUF, &size, socklen_t(MemoryLayout<Int32>.size))
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
