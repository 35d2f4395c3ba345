import ConcurrencyPrimitives

/// The action-log reads a node runs at once, at most `limit`: a page reads up to 1,000 entries
/// and an export holds up to 64 MiB, so that many at once would take the process's memory.
final class LogReadLimit: Sendable {
    let limit: Int
    private let running = Locked(0)

    init(limit: Int) { self.limit = limit }

    /// True when a read may start now; it then calls `finished()`.
    func start() -> Bool {
        running.withLock { running in
            guard running < limit else { return false }
            running += 1
            return true
        }
    }

    func finished() { running.withLock { $0 -= 1 } }
}
