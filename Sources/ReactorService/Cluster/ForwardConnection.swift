import MicroHTTP

#if canImport(Glibc)
import Glibc
#endif

/// One blocking HTTP/1.1 connection to another node: a request out, a Content-Length (or
/// close-delimited) answer back. Only reactord's own answers come over it, so that is all it reads.
final class ForwardConnection {
    struct OpenError: Error {
        let reason: String
    }

    enum Exchange {
        case answered(Response, keepAlive: Bool)
        /// The request could not be sent whole: the holder cannot have acted on it.
        case notSent(String)
        /// Sent, no whole answer. `answerStarted`: some of it had arrived (or the wait timed out,
        /// so the request was surely read). `timedOut`: the holder kept the connection, silent.
        case failed(String, answerStarted: Bool, timedOut: Bool = false)
    }

    private let fd: Int32
    /// What `recv` reads into: allocated once for the connection's life, never zeroed.
    private let chunk = UnsafeMutableRawBufferPointer.allocate(byteCount: 16 * 1024, alignment: 1)
    /// The answer read so far; its storage is kept from one exchange to the next.
    private var received: [UInt8] = []

    private init(fd: Int32) { self.fd = fd }

    deinit { chunk.deallocate() }

    /// `host:port` of an advertised `http://host:port` address.
    static func hostPort(_ address: String) -> Substring {
        var rest = Substring(address)
        for scheme in ["http://", "https://"] where rest.hasPrefix(scheme) { rest = rest.dropFirst(scheme.count) }
        if let slash = rest.firstIndex(of: "/") { rest = rest[..<slash] }
        return rest
    }

    /// The host (an IPv6 literal without its brackets) and port of an advertised address; nil
    /// when it has no port.
    static func endpoint(_ address: String) -> (host: String, port: UInt16)? {
        let target = hostPort(address)
        guard let colon = target.lastIndex(of: ":"), let port = UInt16(target[target.index(after: colon)...]) else {
            return nil
        }
        var host = String(target[..<colon])
        if host.hasPrefix("[") && host.hasSuffix("]") { host = String(host.dropFirst().dropLast()) }
        return (host, port)
    }

    static func open(_ address: String, timeout: Double) -> Result<ForwardConnection, OpenError> {
        guard let (host, port) = endpoint(address) else {
            return .failure(OpenError(reason: "its address \(address) has no port"))
        }
        let target = hostPort(address)
        switch ClientSocket.connect(host: host, port: port, timeout: timeout) {
        case let .success(fd):
            var on: Int32 = 1
            setsockopt(fd, Int32(IPPROTO_TCP), TCP_NODELAY, &on, socklen_t(MemoryLayout<Int32>.size))
            return .success(ForwardConnection(fd: fd))
        case .failure(.unresolved):
            return .failure(OpenError(reason: "its host \(host) does not resolve"))
        case let .failure(.unreachable(why)):
            return .failure(
                OpenError(
                    reason: why.map { "connecting to \(target) failed: \($0)" } ?? "no address of \(target) answers"))
        }
    }

    func close() { Glibc.close(fd) }

    /// Whether an HTTP server answers at `address` (`GET /healthz`, any status) within
    /// `timeout`. A connection alone proves nothing: a process killed with SIGKILL keeps its
    /// listening socket, whose backlog completes handshakes, until the kernel closes its files.
    static func answers(_ address: String, timeout: Double) -> Bool {
        guard case let .success(probe) = open(address, timeout: timeout) else { return false }
        defer { probe.close() }
        let request = "GET /healthz HTTP/1.1\r\nHost: \(hostPort(address))\r\nConnection: close\r\n\r\n"
        if case .answered = probe.exchange(Array(request.utf8), timeout: timeout) { return true }
        return false
    }

    /// Whether the holder has closed this kept-alive connection (or died: the kernel closes a
    /// dead process's sockets), seen before anything is sent on it.
    var isClosedByPeer: Bool {
        var event = pollfd(fd: fd, events: Int16(POLLIN), revents: 0)
        guard poll(&event, 1, 0) > 0 else { return false }
        var byte: UInt8 = 0
        return recv(fd, &byte, 1, Int32(MSG_PEEK) | Int32(MSG_DONTWAIT)) <= 0
    }

    func exchange(_ request: [UInt8], timeout: Double) -> Exchange {
        var sent = 0
        while sent < request.count {
            let count = request[sent...].withUnsafeBytes { send(fd, $0.baseAddress, $0.count, Int32(MSG_NOSIGNAL)) }
            if count <= 0 {
                if count < 0 && errno == EINTR { continue }
                return .notSent("sending to the holder failed: \(String(cString: strerror(errno)))")
            }
            sent += count
        }
        received.removeAll(keepingCapacity: true)
        // Kept for the next exchange only while small: one large answer (a history page) would
        // otherwise stay allocated for the connection's life.
        defer { if received.capacity > 64 * 1024 { received = [] } }
        var head: AnswerHead?
        var bodyStart = 0
        while true {
            if head == nil, let end = Self.headEnd(received) {
                guard let parsed = AnswerHead(received[..<end]) else {
                    return .failed("the holder's answer is not HTTP", answerStarted: true)
                }
                head = parsed
                bodyStart = end + 4
            }
            if let head, let length = head.contentLength, received.count - bodyStart >= length {
                // A 304's body is never sent: of the 200's length, it gives the relayed 304 the
                // Content-Length the holder's has.
                let body =
                    head.notModifiedLength.map { [UInt8](repeating: 0, count: $0) }
                    ?? Array(received[bodyStart..<(bodyStart + length)])
                return .answered(
                    Response(status: head.status, headers: head.headers, body: body), keepAlive: head.keepAlive)
            }
            let count = recv(fd, chunk.baseAddress, chunk.count, 0)
            if count > 0 {
                received.append(contentsOf: UnsafeRawBufferPointer(rebasing: chunk[..<count]))
                continue
            }
            if count < 0 && errno == EINTR { continue }
            if count == 0, let head, head.contentLength == nil {
                let body = Array(received[bodyStart...])
                return .answered(Response(status: head.status, headers: head.headers, body: body), keepAlive: false)
            }
            let timedOut = count < 0 && (errno == EAGAIN || errno == EWOULDBLOCK)
            let why =
                count == 0
                ? "the holder closed the connection"
                : timedOut
                    ? "the holder did not answer within \(Int(timeout)) s"
                    : "reading the holder's answer failed: \(String(cString: strerror(errno)))"
            // A timeout means the request was read (or is queued to be): its fate is unknown.
            return .failed(why, answerStarted: head != nil || !received.isEmpty || count < 0, timedOut: timedOut)
        }
    }

    private static func headEnd(_ bytes: [UInt8]) -> Int? {
        guard bytes.count >= 4 else { return nil }
        for index in 0...(bytes.count - 4)
        where bytes[index] == 13 && bytes[index + 1] == 10 && bytes[index + 2] == 13 && bytes[index + 3] == 10 {
            return index
        }
        return nil
    }

}

/// The status line and header fields of an answer, read as bytes: only reactord's own answers
/// come this way, and a String's Character walk would cost more than the relay itself.
struct AnswerHead {
    let status: Int
    let headers: HTTPHeaders
    let contentLength: Int?
    let keepAlive: Bool
    /// A 304's Content-Length: the length of the 200 it stands for (RFC 9110 §8.6), up to 16 MiB.
    let notModifiedLength: Int?

    /// The fields a client of the forwarding node needs; the rest (Date, Connection,
    /// Content-Length) are the forwarding node's own to set.
    private static let relayed: [[UInt8]] = [
        "content-type", "retry-after", "location", "www-authenticate", "allow", "etag",
        "reactord-not-applied", "idempotent-replayed",
    ].map { Array($0.utf8) }
    private static let contentLengthName = Array("content-length".utf8)
    private static let connectionName = Array("connection".utf8)
    private static let closeValue = Array("close".utf8)

    init?(_ bytes: ArraySlice<UInt8>) {
        var lines = Self.lines(bytes)
        // "HTTP/1.x SSS reason": the version, then a three-digit status.
        let statusLine = lines.removeFirst()
        let version = Array("HTTP/1.".utf8)
        guard statusLine.count >= 12, statusLine.prefix(7).elementsEqual(version),
            statusLine[statusLine.startIndex + 8] == UInt8(ascii: " "),
            let status = Self.integer(statusLine.dropFirst(9).prefix(3)),
            statusLine.count == 12 || statusLine[statusLine.startIndex + 12] == UInt8(ascii: " ")
        else { return nil }
        var headers = HTTPHeaders()
        var length: Int?
        var close = statusLine[statusLine.startIndex + 7] == UInt8(ascii: "0")
        for line in lines {
            guard let colon = line.firstIndex(of: UInt8(ascii: ":")) else { continue }
            let name = line[..<colon]
            let value = Self.trimmed(line[(colon + 1)...])
            if HTTPHeaders.sameName(name, Self.contentLengthName) {
                length = Self.integer(value)
            } else if HTTPHeaders.sameName(name, Self.connectionName) {
                close = HTTPHeaders.sameName(value, Self.closeValue)
            } else if Self.relayed.contains(where: { HTTPHeaders.sameName(name, $0) }) {
                headers.add(String(decoding: name, as: UTF8.self), String(decoding: value, as: UTF8.self))
            }
        }
        self.status = status
        self.headers = headers
        // A 304's Content-Length is the 200's.
        contentLength = Response.isBodiless(status) ? 0 : length
        notModifiedLength = status == 304 ? length.map { min($0, 1 << 24) } : nil
        keepAlive = !close && contentLength != nil
    }

    /// The CRLF-separated lines of a head (without its blank last line).
    private static func lines(_ bytes: ArraySlice<UInt8>) -> [ArraySlice<UInt8>] {
        var lines: [ArraySlice<UInt8>] = []
        var start = bytes.startIndex
        var index = start
        while index + 1 < bytes.endIndex {
            if bytes[index] == 13 && bytes[index + 1] == 10 {
                lines.append(bytes[start..<index])
                index += 2
                start = index
            } else {
                index += 1
            }
        }
        lines.append(bytes[start..<bytes.endIndex])
        return lines
    }

    private static func trimmed(_ bytes: ArraySlice<UInt8>) -> ArraySlice<UInt8> {
        var value = bytes
        while let first = value.first, first == 32 || first == 9 { value.removeFirst() }
        while let last = value.last, last == 32 || last == 9 { value.removeLast() }
        return value
    }

    /// Decimal digits only (no sign, no spaces), as Content-Length and the status are written.
    private static func integer(_ bytes: ArraySlice<UInt8>) -> Int? {
        guard !bytes.isEmpty, bytes.count <= 18 else { return nil }
        var value = 0
        for byte in bytes {
            guard byte >= 48 && byte <= 57 else { return nil }
            value = value * 10 + Int(byte - 48)
        }
        return value
    }
}
