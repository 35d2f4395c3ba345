#if canImport(Glibc)
import Glibc
#elseif canImport(Darwin)
import Darwin
#endif

/// A TCP connection reactord makes itself (a forward to another node, the healthcheck): to a
/// host by name or literal, IPv4 or IPv6, each of its addresses tried in turn, with `timeout` on
/// its sends and receives. The caller closes the descriptor.
public enum ClientSocket {
    public enum Failure: Error {
        /// The host does not resolve: getaddrinfo's reason.
        case unresolved(String)
        /// No address took the connection: the last one's reason (nil: none could be tried).
        case unreachable(String?)
    }

    public static func connect(host: String, port: UInt16, timeout: Double) -> Result<Int32, Failure> {
        var hints = addrinfo()
        hints.ai_socktype = Int32(SOCK_STREAM.rawValue)
        hints.ai_flags = AI_NUMERICSERV
        var found: UnsafeMutablePointer<addrinfo>?
        let resolved = getaddrinfo(host, String(port), &hints, &found)
        guard resolved == 0, let first = found else {
            return .failure(.unresolved(String(cString: gai_strerror(resolved))))
        }
        defer { freeaddrinfo(first) }
        var reason: String?
        var candidate: UnsafeMutablePointer<addrinfo>? = first
        while let info = candidate {
            candidate = info.pointee.ai_next
            let fd = socket(info.pointee.ai_family, info.pointee.ai_socktype, info.pointee.ai_protocol)
            guard fd >= 0 else { continue }
            _ = fcntl(fd, F_SETFD, FD_CLOEXEC)  // not inherited by a process this one starts
            setTimeouts(fd, timeout)
            if systemConnect(fd, info.pointee.ai_addr, info.pointee.ai_addrlen) == 0 { return .success(fd) }
            reason = String(cString: strerror(errno))
            close(fd)
        }
        return .failure(.unreachable(reason))
    }

    /// `seconds` as the descriptor's send and receive timeouts.
    public static func setTimeouts(_ fd: Int32, _ seconds: Double) {
        var time = timeval(tv_sec: Int(seconds), tv_usec: Int((seconds - seconds.rounded(.down)) * 1_000_000))
        setsockopt(fd, SOL_SOCKET, SO_RCVTIMEO, &time, socklen_t(MemoryLayout<timeval>.size))
        setsockopt(fd, SOL_SOCKET, SO_SNDTIMEO, &time, socklen_t(MemoryLayout<timeval>.size))
    }
}

#if canImport(Glibc)
private let systemConnect = Glibc.connect
#elseif canImport(Darwin)
private let systemConnect = Darwin.connect
#endif
