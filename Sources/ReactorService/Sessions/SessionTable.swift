import ConcurrencyPrimitives

/// The loaded sessions, in shards each behind its own lock, so actions on different sessions
/// never wait for one another. Two counts: the sessions loaded (`capacity` bounds them) and,
/// with a durable store, the sessions stored, loaded or not (`storedCapacity` bounds them; in a
/// cluster the store is everyone's, and the count is refreshed from it).
final class SessionTable: Sendable {
    private static let shardCount = 16
    private let shards: [Locked<[SessionKey: any Session]>]
    private let inMemory: Places
    /// Nil until `setStored` (sessions are not stored: the memory store).
    private let storedCount = Locked<Int?>(nil)
    var capacity: Int { inMemory.capacity }
    let storedCapacity: Int

    init(capacity: Int, storedCapacity: Int) {
        inMemory = Places(capacity: capacity)
        self.storedCapacity = storedCapacity
        shards = (0..<Self.shardCount).map { _ in Locked([:]) }
    }

    /// The sessions there are: stored with a durable store, else loaded.
    var sessionCount: Int { storedCount.current ?? inMemory.taken }
    var loadedSessionCount: Int { inMemory.taken }
    var storedSessionCount: Int? { storedCount.current }

    /// The stored count as the store has it now; from the first call on, sessions are stored (a
    /// durable store: set before the server listens).
    func setStored(_ stored: Int) { storedCount.withLock { $0 = stored } }

    /// Claims a place in memory for a new or loaded session; `false` when every place is taken.
    func reserve() -> Bool { inMemory.take() }

    /// Gives back a place claimed with `reserve()` that was not used.
    func cancelReservation() { inMemory.giveBack() }

    /// Claims a place in the store for a new session; `false` when it holds `storedCapacity`.
    func reserveStored() -> Bool {
        storedCount.withLock { count in
            guard let stored = count else { return true }
            guard stored < storedCapacity else { return false }
            count = stored + 1
            return true
        }
    }

    /// One stored session fewer: deleted, expired, or its first write lost.
    func forgetStored() {
        storedCount.withLock { count in count = count.map { max(0, $0 - 1) } }
    }

    /// Puts a session in the table, its place reserved.
    func insert(_ session: any Session) {
        shard(session.key).withLock { $0[session.key] = session }
    }

    func session(_ id: String) -> (any Session)? {
        guard let key = SessionKey(id) else { return nil }
        return shard(key).withLock { $0[key] }
    }

    func remove(_ id: String) -> (any Session)? {
        guard let key = SessionKey(id) else { return nil }
        let removed = shard(key).withLock { $0.removeValue(forKey: key) }
        if removed != nil { inMemory.giveBack() }
        return removed
    }

    /// Takes `session` out of memory, if it is still there: true then.
    @discardableResult
    func unload(_ session: any Session) -> Bool {
        let removed = shard(session.key).withLock { sessions in
            guard sessions[session.key] === session else { return false }
            sessions[session.key] = nil
            return true
        }
        if removed { inMemory.giveBack() }
        return removed
    }

    /// The loaded sessions, for a sweep.
    var loaded: [any Session] { shards.flatMap { shard in shard.withLock { Array($0.values) } } }

    /// Removes and returns the sessions nobody listens to that saw nothing since `cutoff` (the
    /// memory store's expiry: they are gone for good).
    func removeIdle(since cutoff: Double) -> [any Session] {
        removeEach { $0.hub.isIdle(since: cutoff) }
    }

    /// Unloads and returns the sessions idle since `cutoff` (see `Session.unload`).
    func unloadIdle(since cutoff: Double) -> [any Session] {
        removeEach { $0.unload(idleSince: cutoff, closingStreams: false) }
    }

    /// Unloads up to `count` of the idle sessions least recently used, to make room; returns them.
    func unloadLeastRecentlyUsed(_ count: Int, now: Double) -> [any Session] {
        var candidates: [(since: Double, session: any Session)] = []
        for shard in shards {
            for session in shard.withLock({ Array($0.values) }) {
                if let since = session.hub.idleSince { candidates.append((since, session)) }
            }
        }
        candidates.sort { $0.since < $1.since }
        var unloaded: [any Session] = []
        for candidate in candidates where unloaded.count < count {
            if unload(candidate.session, ifIdleSince: now) { unloaded.append(candidate.session) }
        }
        return unloaded
    }

    /// Unloads `session` if it is still in memory and idle since `cutoff` (see `Session.unload`).
    func unload(_ session: any Session, ifIdleSince cutoff: Double, closingStreams: Bool = false) -> Bool {
        let removed = shard(session.key).withLock { sessions in
            guard sessions[session.key] === session, session.unload(idleSince: cutoff, closingStreams: closingStreams)
            else { return false }
            sessions[session.key] = nil
            return true
        }
        if removed { inMemory.giveBack() }
        return removed
    }

    func removeAll() -> [any Session] {
        removeEach { _ in true }
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

    /// Removes the sessions `leaves` says go, deciding under their shard's lock (so a request
    /// finds a session either in the table or, once out, in the store).
    private func removeEach(_ leaves: (any Session) -> Bool) -> [any Session] {
        var removed: [any Session] = []
        for shard in shards {
            removed += shard.withLock { sessions in
                let leaving = sessions.values.filter(leaves)
                for session in leaving { sessions.removeValue(forKey: session.key) }
                return leaving
            }
        }
        if !removed.isEmpty { inMemory.giveBack(removed.count) }
        return removed
    }

    /// The key's bits are random: its low bits pick the shard, no hashing needed.
    private func shard(_ key: SessionKey) -> Locked<[SessionKey: any Session]> {
        shards[Int(key.low % UInt64(Self.shardCount))]
    }
}
