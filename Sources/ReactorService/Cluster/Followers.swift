import ConcurrencyPrimitives
import ReactorCore
import ReactorStore

/// The event streams this node serves for sessions another node holds: one hub per followed
/// session, fed with what the holder committed: the events a wake-up carries when they follow
/// on from the hub's last one, else read from the store after it. The table is the truth: a
/// lost wake-up is caught by the periodic `check`, so it delays an event, never loses it.
final class Followers: Sendable {
    private final class Follower: Sendable {
        struct State {
            /// Nil until the session is read from the store.
            var hub: EventHub?
            var kind = ""
            var owner: String?
            /// Checks in a row that found no subscriber (see `check`).
            var unwatchedChecks = 0
            var lastTouch = 0.0
        }
        let state = Locked(State())
    }

    private let store: any ClusterStore
    private let historyLength: Int
    private let metrics: ServiceMetrics
    private let clusterMetrics: ClusterMetrics
    private let touchInterval: Double
    private let followers = Locked<[String: Follower]>([:])

    init(
        store: any ClusterStore, historyLength: Int, ttl: Double, metrics: ServiceMetrics,
        clusterMetrics: ClusterMetrics
    ) {
        self.store = store
        self.historyLength = historyLength
        self.metrics = metrics
        self.clusterMetrics = clusterMetrics
        // As often as the holder writes a watched session's activity (SessionRecord's resolution).
        touchInterval = ttl > 0 ? ttl / 8 : .infinity  // no TTL: nothing to keep from expiring
    }

    /// The hub to subscribe to for session `id`, its kind and owner; read from the store on first use.
    func hub(for id: String) -> Result<(hub: EventHub, kind: String, owner: String?), SessionLookupError> {
        // The follower is in the table before it reads the store: a wake-up processed meanwhile
        // waits for its lock, then reads on from what the first read saw.
        let follower = followers.withLock { table in
            if let known = table[id] { return known }
            let made = Follower()
            table[id] = made
            return made
        }
        return follower.state.withLock { state in
            if let hub = state.hub { return .success((hub, state.kind, state.owner)) }
            let stored: StoredSession?
            do throws(StoreError) {
                stored = try store.session(id, historyLength: historyLength)
            } catch {
                forget(id, follower)
                return .failure(.reading(error))
            }
            guard let stored else {
                forget(id, follower)
                return .failure(.unknown)
            }
            let hub = EventHub(historyLength: historyLength, metrics: metrics, restoring: stored)
            state.hub = hub
            state.kind = stored.kind
            state.owner = stored.owner
            return .success((hub, stored.kind, stored.owner))
        }
    }

    /// The holder committed events of `id` up to `seq` (at `sentAt`, its clock). When the
    /// notification `carried` them and they follow on from the hub's last event, they are
    /// published as they came; else (too large to carry, or one was missed) read from the table.
    func wake(_ id: String, seq: UInt64, carried: [StoredEvent], sentAt: Double) {
        guard let follower = followers.withLock({ $0[id] }) else { return }
        let followed = follower.state.withLock { follower in
            guard let hub = follower.hub, let first = carried.first, first.seq == hub.snapshot.version + 1,
                carried.last?.seq == seq
            else { return false }
            let state = carried.last(where: { $0.pulse == nil })?.json ?? hub.snapshot.stateJSON
            hub.follow(carried, version: seq, stateJSON: state)
            return true
        }
        if followed {
            clusterMetrics.followedFromNotification.increment()
        } else if !catchUp(id, follower) {
            return
        }
        clusterMetrics.notifyLag.record(max(0, WallClock.now - sentAt))
    }

    /// `id` is over: its streams get `event: end` with `reason`.
    func end(_ id: String, reason: String) {
        guard let follower = followers.withLock({ $0.removeValue(forKey: id) }) else { return }
        follower.state.withLock { $0.hub }?.end(reason: reason)
    }

    /// The periodic pass: reads on where the store is ahead (a lost wake-up), ends the streams
    /// of sessions gone from the store, keeps watched sessions from expiring, and drops
    /// followers nobody has watched for two passes (one pass could fall between a stream
    /// finding the hub and reserving its place in it). Returns the watched sessions no node
    /// holds (their holder let them go): a follower only relays what a holder commits, so until
    /// one of them is taken again, no change of the global user reaches it.
    @discardableResult
    func check() -> [String] {
        let all = followers.withLock { $0 }
        guard !all.isEmpty else { return [] }
        let found: [String: WatchedSession]
        do throws(StoreError) {
            found = try store.watched(Array(all.keys))
        } catch {
            return []
        }
        var watched: [String] = []
        var unheld: [String] = []
        let now = WallClock.now
        for (id, follower) in all {
            guard let stored = found[id] else {
                end(id, reason: "deleted")
                continue
            }
            let (hub, drop, touch): (EventHub?, Bool, Bool) = follower.state.withLock { follower in
                guard let hub = follower.hub else { return (nil, false, false) }
                follower.unwatchedChecks = hub.isUnwatched ? follower.unwatchedChecks + 1 : 0
                let due = follower.unwatchedChecks == 0 && now - follower.lastTouch >= touchInterval
                if due { follower.lastTouch = now }
                return (hub, follower.unwatchedChecks >= 2, due)
            }
            guard let hub else { continue }
            if drop {
                forget(id, follower)
                // Ended as let go: a stream that found it just now looks the session up again
                // (a new follower) instead of subscribing to a hub nothing feeds.
                hub.end(reason: nil)
                continue
            }
            if touch { watched.append(id) }
            if !stored.isHeld && hub.subscriberCount > 0 { unheld.append(id) }
            if stored.version > hub.snapshot.version { _ = catchUp(id, follower) }
        }
        if !watched.isEmpty { try? store.touch(watched) }
        return unheld
    }

    /// The sessions whose streams this node serves now.
    var watchedIDs: Set<String> {
        let all = followers.withLock { $0 }
        return Set(all.filter { _, follower in follower.state.withLock { ($0.hub?.subscriberCount ?? 0) > 0 } }.keys)
    }

    /// Ends every stream without `event: end` (this node is stopping: clients resume elsewhere).
    func closeAll() {
        let all = followers.withLock { table in
            defer { table.removeAll() }
            return Array(table.values)
        }
        for follower in all { follower.state.withLock { $0.hub }?.end(reason: nil) }
    }

    /// Reads `id`'s events after its hub's last one and publishes them; true when any came.
    private func catchUp(_ id: String, _ follower: Follower) -> Bool {
        follower.state.withLock { entry in
            guard let hub = entry.hub else { return false }
            var published = false
            while true {
                let after = hub.snapshot.version
                let read: SessionEvents?
                do throws(StoreError) {
                    read = try store.events(of: id, after: after, limit: historyLength)
                } catch {
                    return published  // the periodic check tries again
                }
                guard let read else {
                    forget(id, follower)
                    hub.end(reason: "deleted")
                    return published
                }
                guard read.version > after else { return published }
                // A read cut short by `limit` goes on from its last event, not from the newest version.
                if read.events.count == historyLength, let last = read.events.last, last.seq < read.version {
                    let state = read.events.last(where: { $0.pulse == nil })?.json ?? hub.snapshot.stateJSON
                    hub.follow(read.events, version: last.seq, stateJSON: state)
                    published = true
                    continue
                }
                hub.follow(read.events, version: read.version, stateJSON: read.stateJSON)
                clusterMetrics.followedFromTable.increment()
                return true
            }
        }
    }

    private func forget(_ id: String, _ follower: Follower) {
        followers.withLock { table in if table[id] === follower { table[id] = nil } }
    }
}
