import XCTest
#if canImport(Glibc)
import Glibc
#endif

/// Incremental HTTP/1.1 response parser for the tests: Content-Length, chunked, or
/// close-delimited bodies.
struct ResponseParser {
    private(set) var status: Int?
    private(set) var headers: [(String, String)] = []
    private(set) var body: [UInt8] = []
    private(set) var isComplete = false
    private var buffer: [UInt8] = []
    private var position = 0
    private var chunked = false
    private var contentLength: Int?
    private var chunkRemaining: Int?   // nil: a chunk-size line is due
    private var needChunkCRLF = false
    /// A response to HEAD: the head is all there is.
    var headOnly = false

    func header(_ name: String) -> String? {
        headers.first { $0.0.lowercased() == name.lowercased() }?.1
    }
    var bodyText: String { String(decoding: body, as: UTF8.self) }

    mutating func feed(_ bytes: UnsafeRawBufferPointer) {
        buffer.append(contentsOf: bytes)
        parse()
    }
    mutating func feed(_ bytes: [UInt8]) { bytes.withUnsafeBytes { feed($0) } }

    mutating func endOfStream() {
        if status != nil && !chunked && contentLength == nil { isComplete = true }
    }

    private func find(_ pattern: [UInt8], from start: Int) -> Int? {
        buffer.withUnsafeBufferPointer { bytes -> Int? in
            guard bytes.count >= pattern.count else { return nil }
            var i = start
            outer: while i + pattern.count <= bytes.count {
                for k in 0..<pattern.count where bytes[i + k] != pattern[k] {
                    i += 1
                    continue outer
                }
                return i
            }
            return nil
        }
    }

    private mutating func parse() {
        if status == nil {
            guard let end = find([13, 10, 13, 10], from: 0) else { return }
            let head = String(decoding: buffer[0..<end], as: UTF8.self)
            var lines = head.components(separatedBy: "\r\n")
            let statusLine = lines.removeFirst().split(separator: " ")
            status = statusLine.count > 1 ? Int(statusLine[1]) : 0
            for line in lines {
                guard let colon = line.firstIndex(of: ":") else { continue }
                headers.append((String(line[..<colon]),
                                line[line.index(after: colon)...].trimmingCharacters(in: .whitespaces)))
            }
            chunked = header("Transfer-Encoding")?.lowercased().contains("chunked") ?? false
            contentLength = header("Content-Length").flatMap { Int($0) }
            position = end + 4
            if headOnly || (!chunked && contentLength == 0) { isComplete = true }
        }
        while !isComplete {
            if chunked {
                if needChunkCRLF {
                    guard buffer.count - position >= 2 else { break }
                    position += 2
                    needChunkCRLF = false
                }
                if let remaining = chunkRemaining {
                    let available = min(remaining, buffer.count - position)
                    guard available > 0 else { break }
                    body.append(contentsOf: buffer[position..<position + available])
                    position += available
                    if remaining == available {
                        chunkRemaining = nil
                        needChunkCRLF = true
                    } else {
                        chunkRemaining = remaining - available
                    }
                } else {
                    guard let lineEnd = find([13, 10], from: position) else { break }
                    let sizeText = String(decoding: buffer[position..<lineEnd], as: UTF8.self)
                        .split(separator: ";").first.map(String.init) ?? ""
                    let size = Int(sizeText.trimmingCharacters(in: .whitespaces), radix: 16) ?? 0
                    position = lineEnd + 2
                    if size == 0 { isComplete = true } else { chunkRemaining = size }
                }
            } else {
                body.append(contentsOf: buffer[position...])
                position = buffer.count
                if let contentLength, body.count >= contentLength { isComplete = true }
                break
            }
        }
        if position > 65_536 {
            buffer.removeFirst(position)
            position = 0
        }
    }
}

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

/// Many SSE subscribers on non-blocking sockets, driven by poll() from the test thread.
final class StreamFleet {
    struct Member {
        var fd: Int32
        var parser = ResponseParser()
        var scanned = 0
        var events: [String] = []       // the data of each event, in order
        var comments = 0
        var ended = false               // EOF or error
    }
    private(set) var members: [Member] = []

    init(port: UInt16, count: Int, path: String) throws {
        members.reserveCapacity(count)
        for _ in 0..<count { try add(port: port, path: path) }
    }

    func add(port: UInt16, path: String, receiveBuffer: Int32? = nil) throws {
        let fd = try connectLoopback(port: port, receiveBuffer: receiveBuffer)
        let request = Array("GET \(path) HTTP/1.1\r\nHost: test\r\nAccept: text/event-stream\r\n\r\n".utf8)
        _ = request.withUnsafeBytes { send(fd, $0.baseAddress!, $0.count, Int32(MSG_NOSIGNAL)) }
        _ = fcntl(fd, F_SETFL, fcntl(fd, F_GETFL) | O_NONBLOCK)
        members.append(Member(fd: fd))
    }

    /// Reads whatever arrives until `done()` or `timeout` seconds; returns `done()`.
    @discardableResult
    func pump(timeout: Double, skipping skipped: Set<Int> = [], until done: (StreamFleet) -> Bool) -> Bool {
        let start = monotonicNow()
        var pollSet = members.enumerated().map { index, member in
            pollfd(fd: skipped.contains(index) || member.ended ? -1 : member.fd, events: Int16(POLLIN), revents: 0)
        }
        var chunk = [UInt8](repeating: 0, count: 65_536)
        while !done(self) {
            let left = timeout - (monotonicNow() - start)
            if left <= 0 { return false }
            let ready = poll(&pollSet, nfds_t(pollSet.count), Int32(min(left, 0.1) * 1000) + 1)
            if ready <= 0 { continue }
            for index in pollSet.indices where pollSet[index].revents != 0 {
                pollSet[index].revents = 0
                while true {
                    let n = chunk.withUnsafeMutableBytes { recv(members[index].fd, $0.baseAddress!, $0.count, 0) }
                    if n > 0 {
                        chunk.withUnsafeBytes { members[index].parser.feed(UnsafeRawBufferPointer(rebasing: $0[0..<n])) }
                        continue
                    }
                    if n == 0 || (errno != EAGAIN && errno != EWOULDBLOCK) {
                        members[index].ended = true
                        pollSet[index].fd = -1
                    }
                    break
                }
                scanEvents(index)
            }
        }
        return true
    }

    private func scanEvents(_ index: Int) {
        var start = members[index].scanned
        var found: [(Int, Int)] = []
        members[index].parser.body.withUnsafeBufferPointer { body in
            var i = start
            while i + 1 < body.count {
                if body[i] == 10 && body[i + 1] == 10 {
                    found.append((start, i))
                    start = i + 2
                    i = start
                } else {
                    i += 1
                }
            }
        }
        for (from, to) in found {
            let text = String(decoding: members[index].parser.body[from..<to], as: UTF8.self)
            var data: [String] = []
            for line in text.split(separator: "\n", omittingEmptySubsequences: false) {
                if line.hasPrefix("data: ") { data.append(String(line.dropFirst(6))) }
                if line.hasPrefix(":") { members[index].comments += 1 }
            }
            if !data.isEmpty { members[index].events.append(data.joined(separator: "\n")) }
        }
        members[index].scanned = start
    }

    func closeAll() {
        for index in members.indices where members[index].fd >= 0 {
            close(members[index].fd)
            members[index].fd = -1
        }
    }

    deinit { closeAll() }
}

func monotonicNow() -> Double {
    var time = timespec()
    clock_gettime(CLOCK_MONOTONIC, &time)
    return Double(time.tv_sec) + Double(time.tv_nsec) / 1e9
}

/// Polls `condition` every 10 ms for up to `timeout` seconds.
@discardableResult
func waitUntil(timeout: Double, _ condition: () -> Bool) -> Bool {
    let start = monotonicNow()
    while !condition() {
        if monotonicNow() - start > timeout { return false }
        usleep(10_000)
    }
    return true
}

enum ProcessStats {
    /// User + system CPU seconds of this process (server and test share it).
    static func cpuSeconds() -> Double {
        guard let text = try? String(contentsOfFile: "/proc/self/stat", encoding: .utf8),
              let close = text.lastIndex(of: ")") else { return 0 }
        let fields = text[text.index(after: close)...].split(separator: " ")
        // After "(comm)": state is field 3; utime and stime are fields 14 and 15.
        let utime = Double(fields[11]) ?? 0, stime = Double(fields[12]) ?? 0
        return (utime + stime) / Double(sysconf(Int32(_SC_CLK_TCK)))
    }

    static func openDescriptors() -> Int {
        (try? FileManager.default.contentsOfDirectory(atPath: "/proc/self/fd").count) ?? -1
    }
}
