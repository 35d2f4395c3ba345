import MicroHTTP

/// The descriptors the process may open, against those its connections need: past the limit
/// (`ulimit -n`), libmicrohttpd cannot accept, and connections wait unanswered in the kernel's
/// queue, with nothing logged.
extension OpenFileLimit {
    /// Descriptors beside the connections: the listener, the store's files, the log, pipes.
    static let besideConnections = 64

    /// The process's limit when it is below what `connectionLimit` connections need, else nil.
    static func short(of connectionLimit: Int) -> UInt64? {
        guard let allowed = current()?.soft else { return nil }
        return allowed < UInt64(connectionLimit + besideConnections) ? allowed : nil
    }
}
