/// The live sessions, in shards each behind its own lock, so actions on different sessions
/// never wait for one another. Only creating a session touches the shared count, which with a
/// durable store of this process's own also counts the stored sessions not loaded yet; in a
/// cluster (`countsStored` false) it counts this node's loaded sessions only, the store being
/// everyone's.
final class SessionTable: @unchecked Sendable {
    private static let shardCount = 16
    private let shards: [Locked<[SessionKey: any Session]>]
    private let count = Locked(0)
    let capacity: Int
    /// Set before the server listens, never changed after.
    var countsStored = true

    init(capacity: Int) {
        self.capacity = capacity
        shards = (0..<Self.shardCount).map { _ in Locked([:]) }
    }

    var sessionCount: Int { count.current }

    /// Counts `stored` sessions that live in a durable store and are not loaded yet.
    func addStored(_ stored: Int) {
        guard countsStored else { return }
        count.withLock { $0 += stored }
    }

    /// Claims a place for a new session; `false` when the table is full.
    func reserve() -> Bool {
        count.withLock { count in
            guard count < capacity else { return false }
            count += 1
            return true
        }
    }

    /// Gives back a place claimed with `reserve()` that was not used.
    func cancelReservation() { count.withLock { $0 -= 1 } }

    /// Puts a session in the table: a new one (its place reserved), or one `restored` from the store.
    func insert(_ session: any Session, restored: Bool = false) {
        shard(session.key).withLock { $0[session.key] = session }
        if restored && !countsStored { count.withLock { $0 += 1 } }
    }

    func session(_ id: String) -> (any Session)? {
        guard let key = SessionKey(id) else { return nil }
        return shard(key).withLock { $0[key] }
    }

    func remove(_ id: String) -> (any Session)? {
        guard let key = SessionKey(id) else { return nil }
        let removed = shard(key).withLock { $0.removeValue(forKey: key) }
        if removed != nil { count.withLock { $0 -= 1 } }
        return removed
    }

    /// Takes `session` out of memory, if it is still there; it stays counted (it is stored)
    /// unless `forget`.
    func unload(_ session: any Session, forget: Bool) {
        let removed = shard(session.key).withLock { sessions in
            guard sessions[session.key] === session else { return false }
            sessions[session.key] = nil
            return true
        }
        if removed && (forget || !countsStored) { count.withLock { $0 -= 1 } }
    }

    /// One session fewer that was stored but not loaded (it expired there).
    func forgetStored() {
        guard countsStored else { return }
        count.withLock { $0 -= 1 }
    }

    /// The loaded sessions, for a sweep.
    var loaded: [any Session] { shards.flatMap { shard in shard.withLock { Array($0.values) } } }

    /// Removes and returns the sessions nobody listens to that saw nothing since `cutoff`.
    func removeIdle(since cutoff: Double) -> [any Session] {
        var removed: [any Session] = []
        for shard in shards {
            removed += shard.withLock { sessions in
                let idle = sessions.values.filter { $0.hub.isIdle(since: cutoff) }
                for session in idle { sessions.removeValue(forKey: session.key) }
                return idle
            }
        }
        if !removed.isEmpty { count.withLock { $0 -= removed.count } }
        return removed
    }

    func removeAll() -> [any Session] {
        let removed = shards.flatMap { shard in
            shard.withLock { sessions in
                defer { sessions.removeAll() }
                return Array(sessions.values)
            }
        }
        count.withLock { $0 -= removed.count }
        return removed
    }

    /// Sessions and subscribers by reactor kind, for /metrics: one pass, one shard locked at a time.
    func census() -> [String: (sessions: Int, subscribers: Int)] {
        var counts: [String: (sessions: Int, subscribers: Int)] = [:]
        for shard in shards {
            let sessions = shard.withLock { Array($0.values) }
            for session in sessions {
                let subscribers = session.hub.subscriberCount
                counts[session.kind, default: (0, 0)].sessions += 1
                counts[session.kind, default: (0, 0)].subscribers += subscribers
            }
        }
        return counts
    }

    /// The key's bits are random: its low bits pick the shard, no hashing needed.
    private func shard(_ key: SessionKey) -> Locked<[SessionKey: any Session]> {
        shards[Int(key.low % UInt64(Self.shardCount))]
    }
}
