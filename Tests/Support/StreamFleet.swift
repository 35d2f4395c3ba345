import Foundation

#if canImport(Glibc)
import Glibc
#endif

/// Many SSE subscribers on non-blocking sockets, driven by poll() from the test thread.
public final class StreamFleet {
    public struct Member {
        public var fd: Int32
        public var parser = ResponseParser()
        var scanned = 0
        public var events: [String] = []  // the data of each event, in order
        public var comments = 0
        public var ended = false  // EOF or error
    }
    public private(set) var members: [Member] = []

    public init(port: UInt16, count: Int, path: String) throws {
        members.reserveCapacity(count)
        for _ in 0..<count { try add(port: port, path: path) }
    }

    public func add(port: UInt16, path: String, receiveBuffer: Int32? = nil) throws {
        let fd = try connectLoopback(port: port, receiveBuffer: receiveBuffer)
        let request = Array("GET \(path) HTTP/1.1\r\nHost: test\r\nAccept: text/event-stream\r\n\r\n".utf8)
        _ = request.withUnsafeBytes { send(fd, $0.baseAddress!, $0.count, Int32(MSG_NOSIGNAL)) }
        _ = fcntl(fd, F_SETFL, fcntl(fd, F_GETFL) | O_NONBLOCK)
        members.append(Member(fd: fd))
    }

    /// Reads whatever arrives until `done()` or `timeout` seconds; returns `done()`.
    @discardableResult
    public func pump(timeout: Double, skipping skipped: Set<Int> = [], until done: (StreamFleet) -> Bool) -> Bool {
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
                        chunk.withUnsafeBytes {
                            members[index].parser.feed(UnsafeRawBufferPointer(rebasing: $0[0..<n]))
                        }
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

    public func closeAll() {
        for index in members.indices where members[index].fd >= 0 {
            close(members[index].fd)
            members[index].fd = -1
        }
    }

    deinit { closeAll() }
}

extension StreamFleet {
    /// Every member closed abruptly at once (RST), as when a mobile network drops them all.
    public func resetAll() {
        for index in members.indices where members[index].fd >= 0 {
            var option = linger(l_onoff: 1, l_linger: 0)
            setsockopt(members[index].fd, SOL_SOCKET, SO_LINGER, &option, socklen_t(MemoryLayout<linger>.size))
            close(members[index].fd)
            members[index].fd = -1
            members[index].ended = true
        }
    }
}
