#if canImport(Glibc)
import Glibc
#endif

/// The descriptors the process may open, against those its connections need: past the limit
/// (`ulimit -n`), libmicrohttpd cannot accept, and connections wait unanswered in the kernel's
/// queue, with nothing logged.
enum OpenFileLimit {
    /// Descriptors beside the connections: the listener, the store's files, the log, pipes.
    static let besideConnections = 64

    /// The process's limit when it is below what `connectionLimit` connections need, else nil.
    static func short(of connectionLimit: Int) -> UInt64? {
        var limit = rlimit()
        guard getrlimit(Int32(RLIMIT_NOFILE.rawValue), &limit) == 0 else { return nil }
        let allowed = UInt64(limit.rlim_cur)
        return allowed < UInt64(connectionLimit + besideConnections) ? allowed : nil
    }
}
