import Foundation
#if canImport(Glibc)
import Glibc
#endif

/// A blocking TCP connection to the server under test, on loopback, with a read timeout.
final class TestSocket {
    enum Failure: Error { case connect(Int32), timeout, closed, io(Int32) }

    let fd: Int32
    private var buffer: [UInt8] = []

    init(port: UInt16, timeout: Double = 5) throws {
        fd = socket(AF_INET, Int32(SOCK_STREAM.rawValue), 0)
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
            let code = errno
            close(fd)
            throw Failure.connect(code)
        }
        setTimeout(timeout)
    }

    deinit { close(fd) }

    func setTimeout(_ seconds: Double) {
        var time = timeval(tv_sec: Int(seconds), tv_usec: Int((seconds - Double(Int(seconds))) * 1e6))
        setsockopt(fd, SOL_SOCKET, SO_RCVTIMEO, &time, socklen_t(MemoryLayout<timeval>.size))
    }

    func write(_ bytes: [UInt8]) throws {
        var offset = 0
        while offset < bytes.count {
            let sent = bytes[offset...].withUnsafeBytes { send(fd, $0.baseAddress, $0.count, Int32(MSG_NOSIGNAL)) }
            guard sent > 0 else { throw Failure.io(errno) }
            offset += sent
        }
    }

    func write(_ text: String) throws { try write(Array(text.utf8)) }

    /// Closes abruptly (RST), as a vanished client does.
    func reset() {
        var linger = linger(l_onoff: 1, l_linger: 0)
        setsockopt(fd, SOL_SOCKET, SO_LINGER, &linger, socklen_t(MemoryLayout<linger>.size))
        shutdown(fd, Int32(SHUT_RDWR))
    }

    private func fill() throws {
        var chunk = [UInt8](repeating: 0, count: 16 * 1024)
        let count = chunk.withUnsafeMutableBytes { recv(fd, $0.baseAddress, $0.count, 0) }
        if count > 0 {
            buffer += chunk[0..<count]
        } else if count == 0 {
            throw Failure.closed
        } else {
            throw errno == EAGAIN || errno == EWOULDBLOCK ? Failure.timeout : Failure.io(errno)
        }
    }

    /// One line without its CRLF or LF.
    func readLine() throws -> String {
        while true {
            if let index = buffer.firstIndex(of: 0x0A) {
                var line = Array(buffer[..<index])
                buffer.removeFirst(index + 1)
                if line.last == 0x0D { line.removeLast() }
                return String(decoding: line, as: UTF8.self)
            }
            try fill()
        }
    }

    func readBytes(_ count: Int) throws -> [UInt8] {
        while buffer.count < count { try fill() }
        defer { buffer.removeFirst(count) }
        return Array(buffer[..<count])
    }

    /// Everything until the peer closes.
    func readToEnd() -> [UInt8] {
        while (try? fill()) != nil {}
        defer { buffer.removeAll() }
        return buffer
    }
}
