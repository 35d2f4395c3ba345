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
        /// so the request was surely read).
        case failed(String, answerStarted: Bool)
    }

    private let fd: Int32

    private init(fd: Int32) { self.fd = fd }

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
        var hints = addrinfo()
        hints.ai_socktype = Int32(SOCK_STREAM.rawValue)
        var found: UnsafeMutablePointer<addrinfo>?
        guard getaddrinfo(host, String(port), &hints, &found) == 0, let first = found else {
            return .failure(OpenError(reason: "its host \(host) does not resolve"))
        }
        defer { freeaddrinfo(found) }
        var reason = "no address of \(target) answers"
        var candidate: UnsafeMutablePointer<addrinfo>? = first
        while let info = candidate {
            candidate = info.pointee.ai_next
            let fd = socket(info.pointee.ai_family, Int32(SOCK_STREAM.rawValue) | Int32(SOCK_CLOEXEC.rawValue), 0)
            guard fd >= 0 else { continue }
            setTimeouts(fd, timeout)
            if connect(fd, info.pointee.ai_addr, info.pointee.ai_addrlen) == 0 {
                var on: Int32 = 1
                setsockopt(fd, Int32(IPPROTO_TCP), TCP_NODELAY, &on, socklen_t(MemoryLayout<Int32>.size))
                return .success(ForwardConnection(fd: fd))
            }
            reason = "connecting to \(target) failed: \(String(cString: strerror(errno)))"
            Glibc.close(fd)
        }
        return .failure(OpenError(reason: reason))
    }

    func close() { Glibc.close(fd) }

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
        var buffer: [UInt8] = []
        var chunk = [UInt8](repeating: 0, count: 16 * 1024)
        var head: AnswerHead?
        while true {
            if head == nil, let end = Self.headEnd(buffer) {
                guard let parsed = AnswerHead(buffer[..<end]) else {
                    return .failed("the holder's answer is not HTTP", answerStarted: true)
                }
                head = parsed
                buffer.removeFirst(end + 4)
            }
            if let head, let length = head.contentLength, buffer.count >= length {
                let response = Response(status: head.status, headers: head.headers, body: Array(buffer.prefix(length)))
                return .answered(response, keepAlive: head.keepAlive)
            }
            let count = chunk.withUnsafeMutableBytes { recv(fd, $0.baseAddress, $0.count, 0) }
            if count > 0 {
                buffer += chunk[..<count]
                continue
            }
            if count < 0 && errno == EINTR { continue }
            if count == 0, let head, head.contentLength == nil {
                return .answered(Response(status: head.status, headers: head.headers, body: buffer), keepAlive: false)
            }
            let why =
                count == 0
                ? "the holder closed the connection"
                : (errno == EAGAIN || errno == EWOULDBLOCK)
                    ? "the holder did not answer within \(Int(timeout)) s"
                    : "reading the holder's answer failed: \(String(cString: strerror(errno)))"
            // A timeout means the request was read (or is queued to be): its fate is unknown.
            return .failed(why, answerStarted: head != nil || !buffer.isEmpty || count < 0)
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

    private static func setTimeouts(_ fd: Int32, _ seconds: Double) {
        var time = timeval(tv_sec: Int(seconds), tv_usec: Int((seconds - seconds.rounded(.down)) * 1_000_000))
        setsockopt(fd, SOL_SOCKET, SO_RCVTIMEO, &time, socklen_t(MemoryLayout<timeval>.size))
        setsockopt(fd, SOL_SOCKET, SO_SNDTIMEO, &time, socklen_t(MemoryLayout<timeval>.size))
    }
}

/// The status line and header fields of an answer.
private struct AnswerHead {
    let status: Int
    let headers: HTTPHeaders
    let contentLength: Int?
    let keepAlive: Bool

    /// The fields a client of the forwarding node needs; the rest (Date, Connection,
    /// Content-Length) are the forwarding node's own to set.
    private static let relayed: Set<String> = [
        "content-type", "retry-after", "location", "www-authenticate", "allow", "etag",
        "reactord-not-applied", "idempotent-replayed",
    ]

    init?(_ bytes: ArraySlice<UInt8>) {
        let lines = String(decoding: bytes, as: UTF8.self).split(separator: "\r\n", omittingEmptySubsequences: false)
        let statusLine = lines.first?.split(separator: " ", maxSplits: 2) ?? []
        guard statusLine.count >= 2, statusLine[0].hasPrefix("HTTP/1."), let status = Int(statusLine[1]) else {
            return nil
        }
        var headers = HTTPHeaders()
        var length: Int?
        var close = statusLine[0] == "HTTP/1.0"
        for line in lines.dropFirst() {
            guard let colon = line.firstIndex(of: ":") else { continue }
            let name = line[..<colon].lowercased()
            let value = line[line.index(after: colon)...].trimmingWhitespace()
            if name == "content-length" { length = Int(value) }
            if name == "connection" { close = value.lowercased() == "close" }
            if Self.relayed.contains(name) { headers.add(String(line[..<colon]), value) }
        }
        self.status = status
        self.headers = headers
        contentLength = length ?? ((status == 204 || status == 304) ? 0 : nil)
        keepAlive = !close && contentLength != nil
    }
}
