import Foundation

#if canImport(Glibc)
import Glibc
#endif

/// Connections from 127.0.0.1 that each send a head one byte at a time and never finish it,
/// reopening when the server cuts them, on a thread of their own until `stop()`.
public final class SlowlorisAttack: @unchecked Sendable {
    private let state = Locked((opened: 0, stopped: false))
    public var opened: Int { state.value.opened }

    public init(port: UInt16, connections: Int) {
        Thread.detachNewThread { [self] in
            var sockets: [Int32] = []
            defer { for socket in sockets { close(socket) } }
            let head = Array("GET /ping HTTP/1.1\r\nHost: test\r\nX-Slow: ".utf8)
            var sent = 0
            while !state.value.stopped {
                while sockets.count < connections, let fd = try? connectLoopback(port: port) {
                    var nonBlocking = fcntl(fd, F_GETFL)
                    nonBlocking |= O_NONBLOCK
                    _ = fcntl(fd, F_SETFL, nonBlocking)
                    sockets.append(fd)
                    state.update { $0.opened += 1 }
                }
                // One byte on every connection, then a pause; a cut one is replaced.
                let byte = sent < head.count ? head[sent] : UInt8(ascii: "a")
                sent += 1
                sockets.removeAll { fd in
                    var one = byte
                    if send(fd, &one, 1, Int32(MSG_NOSIGNAL)) == 1 { return false }
                    close(fd)
                    return true
                }
                usleep(200_000)
            }
        }
    }

    public func stop() {
        state.update { $0.stopped = true }
        usleep(300_000)
    }
}
