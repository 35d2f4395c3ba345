import Foundation

#if canImport(Glibc)
import Glibc
#endif

/// A real TCP listener on 127.0.0.1 that answers each connection's request by the next step of a
/// script (the last step repeats): it drops the connection, keeps it silent, or answers. It
/// records every request it read, so a test sees what the client sent on each attempt, which
/// a server that hides its failures cannot show. One request per connection (`Connection: close`).
final class ScriptedServer: @unchecked Sendable {
    enum Step {
        /// Reads the whole request, then closes the connection without a byte of answer.
        case drop
        /// Reads the whole request, then resets the connection (RST).
        case reset
        /// Reads the whole request, then says nothing for this many seconds, then closes.
        case silent(Double)
        /// Sends the head and the first half of this 200 answer's body, then closes.
        case cut(String)
        /// Answers with this status, headers and body.
        case answer(Int, [String: String] = [:], String = "")
    }

    struct Request {
        let method: String
        let path: String
        /// Header names in lower case.
        let headers: [String: String]
        let body: Data
    }

    let port: UInt16
    private let listener: Int32
    private let lock = NSLock()
    private var script: [Step]
    private var recorded: [Request] = []

    /// Listens on `port` (0: any free port).
    init(_ script: [Step], port: UInt16 = 0) throws {
        precondition(!script.isEmpty)
        self.script = script
        let fd = socket(AF_INET, Int32(SOCK_STREAM.rawValue), 0)
        var on: Int32 = 1
        setsockopt(fd, SOL_SOCKET, SO_REUSEADDR, &on, socklen_t(MemoryLayout<Int32>.size))
        var address = sockaddr_in()
        address.sin_family = sa_family_t(AF_INET)
        address.sin_port = port.bigEndian
        address.sin_addr.s_addr = inet_addr("127.0.0.1")
        let bound = withUnsafePointer(to: &address) {
            $0.withMemoryRebound(to: sockaddr.self, capacity: 1) {
                bind(fd, $0, socklen_t(MemoryLayout<sockaddr_in>.size))
            }
        }
        guard bound == 0, listen(fd, 16) == 0 else {
            let message = String(cString: strerror(errno))
            close(fd)
            throw TestFailure("listen on 127.0.0.1:\(port): \(message)")
        }
        var length = socklen_t(MemoryLayout<sockaddr_in>.size)
        withUnsafeMutablePointer(to: &address) {
            $0.withMemoryRebound(to: sockaddr.self, capacity: 1) { _ = getsockname(fd, $0, &length) }
        }
        listener = fd
        self.port = UInt16(bigEndian: address.sin_port)
        let thread = Thread { [self] in acceptLoop() }
        thread.start()
    }

    /// The requests read so far, in the order they arrived.
    var requests: [Request] { lock.withLock { recorded } }

    var url: URL { URL(string: "http://127.0.0.1:\(port)")! }

    /// Stops listening: new connections are refused.
    func stop() {
        shutdown(listener, Int32(SHUT_RDWR))
        close(listener)
    }

    private func acceptLoop() {
        while true {
            let connection = accept(listener, nil, nil)
            guard connection >= 0 else { return }
            // Each on its own thread: a silent connection must not hold up the client's retry.
            Thread { [self] in serve(connection) }.start()
        }
    }

    private func serve(_ connection: Int32) {
        defer { close(connection) }
        var timeout = timeval(tv_sec: 5, tv_usec: 0)
        setsockopt(connection, SOL_SOCKET, SO_RCVTIMEO, &timeout, socklen_t(MemoryLayout<timeval>.size))
        guard let request = read(connection) else { return }
        let step: Step = lock.withLock {
            recorded.append(request)
            return script.count > 1 ? script.removeFirst() : script[0]
        }
        switch step {
        case .drop:
            return
        case .reset:
            var linger = linger(l_onoff: 1, l_linger: 0)
            setsockopt(connection, SOL_SOCKET, SO_LINGER, &linger, socklen_t(MemoryLayout<linger>.size))
        case let .silent(seconds):
            Thread.sleep(forTimeInterval: seconds)
        case let .cut(body):
            let head = "HTTP/1.1 200 OK\r\nContent-Length: \(body.utf8.count)\r\nContent-Type: application/json\r\n\r\n"
            write(Array((head + body).utf8.dropLast(body.utf8.count / 2)), to: connection)
        case let .answer(status, headers, body):
            var head = "HTTP/1.1 \(status) Scripted\r\nContent-Length: \(body.utf8.count)\r\nConnection: close\r\n"
            if !body.isEmpty, headers["Content-Type"] == nil { head += "Content-Type: application/json\r\n" }
            for (name, value) in headers { head += "\(name): \(value)\r\n" }
            write(Array((head + "\r\n" + body).utf8), to: connection)
        }
    }

    private func write(_ bytes: [UInt8], to connection: Int32) {
        var offset = 0
        while offset < bytes.count {
            let sent = bytes[offset...].withUnsafeBytes {
                send(connection, $0.baseAddress, $0.count, Int32(MSG_NOSIGNAL))
            }
            guard sent > 0 else { return }
            offset += sent
        }
    }

    /// One request: its head, then as many body bytes as `Content-Length` says.
    private func read(_ connection: Int32) -> Request? {
        var buffer = Data()
        var chunk = [UInt8](repeating: 0, count: 4096)
        let separator = Data("\r\n\r\n".utf8)
        var headEnd: Range<Data.Index>?
        var contentLength = 0
        while true {
            if headEnd == nil, let found = buffer.range(of: separator) {
                headEnd = found
                let head = String(decoding: buffer[..<found.lowerBound], as: UTF8.self)
                for line in head.split(separator: "\r\n").dropFirst()
                where line.lowercased().hasPrefix("content-length:") {
                    contentLength =
                        Int(line.dropFirst("content-length:".count).trimmingCharacters(in: .whitespaces)) ?? 0
                }
            }
            if let headEnd, buffer.count - headEnd.upperBound >= contentLength {
                let lines = String(decoding: buffer[..<headEnd.lowerBound], as: UTF8.self).split(separator: "\r\n")
                let first = lines.first?.split(separator: " ") ?? []
                guard first.count >= 2 else { return nil }
                var headers: [String: String] = [:]
                for line in lines.dropFirst() {
                    guard let colon = line.firstIndex(of: ":") else { continue }
                    headers[line[..<colon].lowercased()] = line[line.index(after: colon)...].trimmingCharacters(
                        in: .whitespaces)
                }
                let body = buffer[headEnd.upperBound..<(headEnd.upperBound + contentLength)]
                return Request(method: String(first[0]), path: String(first[1]), headers: headers, body: Data(body))
            }
            let count = chunk.withUnsafeMutableBytes { recv(connection, $0.baseAddress, $0.count, 0) }
            guard count > 0 else { return nil }
            buffer.append(contentsOf: chunk[0..<count])
        }
    }
}

struct TestFailure: Error, CustomStringConvertible {
    let description: String
    init(_ description: String) { self.description = description }
}
