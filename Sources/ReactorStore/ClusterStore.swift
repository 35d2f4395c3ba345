/// A store several nodes share (cluster mode): on top of `StoreEngine`, the leases that keep
/// one live reactor per session, the reads that let any node follow any session, and the
/// wake-ups that tell a node something changed. PostgreSQL does the hard part (transactions,
/// row locks, LISTEN/NOTIFY); nodes never talk to each other except to forward requests.
///
/// A node holds a session under a lease: a row with the holder, its address, an expiry on
/// the database's clock and a fencing token that grows on every takeover. `commit` writes a
/// session's changes only while this node's token is still the session's (the rest are
/// refused, see `StoreEngine.commit`); a new session's first write takes its lease.
package protocol ClusterStore: StoreEngine {
    /// This node's id (new at every start, so a restarted node holds nothing).
    var nodeID: String { get }
    /// Seconds a lease lasts without renewal.
    var leaseDuration: Double { get }

    /// Where other nodes forward requests for the sessions this node holds (`http://host:port`);
    /// set before the first session is claimed or created.
    func advertise(_ address: String)

    /// Takes `id`'s lease when nobody holds it, its holder's lease has passed, this node holds
    /// it already, or its holder advertised this node's own address and last renewed before
    /// this node started (this node before a restart: only one process listens on an address;
    /// one that renews still is another node given the same address, and keeps it), and
    /// returns the session with its newest `historyLength` events; or tells which live node
    /// holds it; or that no such session is stored. `onlyAtThisAddress`: only when its holder
    /// advertised this node's address (a request another node forwarded here); a session that is
    /// free is then `heldElsewhere` with an empty address, left for the forwarding node to take.
    func claim(_ id: String, historyLength: Int, onlyAtThisAddress: Bool) throws(StoreError) -> SessionClaim

    /// Whether this node holds `id` now, by its own monotonic clock: a lease counts until its
    /// expiry as last confirmed, less a safety margin, so a node frozen past it (SIGSTOP, a
    /// pause, a partition) stops serving from memory before another node can take over.
    func holds(_ id: String) -> Bool

    /// Renews every lease this node holds; returns the ids it turned out no longer to hold
    /// (taken over while it was frozen or cut off). Throws when the database cannot be
    /// reached; leases then run out by themselves.
    func renewLeases() throws(StoreError) -> [String]

    /// Gives up the leases on `ids` (unloaded or stopping), so another node takes them at once.
    func release(_ ids: [String])

    /// Takes a place for session `id` of `owner` when the owner has fewer than `limit` sessions
    /// stored or being made, on any node: counted and taken under a lock on the owner, so that
    /// creations on several nodes at once count each other. The place lasts until
    /// `releaseCreation` (once the session is stored, or not made), or a minute at most.
    func reserveCreation(_ id: String, owner: String, limit: Int) throws(StoreError) -> Bool

    /// Gives back `reserveCreation`'s place; false when the database could not be reached (the
    /// place runs out by itself).
    @discardableResult
    func releaseCreation(_ id: String) -> Bool

    /// `id`'s events after `seq`, oldest first, at most `limit`, with its state and version
    /// now; nil when the session is not stored (deleted or expired).
    func events(of id: String, after seq: UInt64, limit: Int) throws(StoreError) -> SessionEvents?

    /// Those of `ids` still stored: their versions, and whether a live node holds them (for a
    /// periodic check that catches a lost wake-up, and finds watched sessions nobody holds).
    func watched(_ ids: [String]) throws(StoreError) -> [String: WatchedSession]

    /// Marks `ids` as active now (they are watched on this node), so they do not expire.
    func touch(_ ids: [String]) throws(StoreError)

    /// The global user's changes after `version`, oldest first (the newest few hundred are kept).
    func userChanges(after version: UInt64) throws(StoreError) -> [UserChange]

    /// Claims `key` in `scope` for one run of `request` (its digest) under `token`, for a route
    /// no session's holder serialises (each node's ledger only serialises its own requests):
    /// nil when this run has it now (a placeholder row, taken over once a dead run's claim passed
    /// its `duration`), else what holds it: the kept answer, or another run's claim (`isClaim`).
    /// The run's kept answer replaces the claim in its commit (`StoredAnswer.claim`).
    func claimAnswer(scope: String, key: String, request: String, token: String, duration: Double) throws(StoreError)
        -> StoredAnswer?

    /// Gives up `token`'s claim on `key` (its run's answer is not kept): a repeat runs again.
    func releaseClaim(scope: String, key: String, token: String) throws(StoreError)

    /// Starts delivering wake-ups to `wake`, on the store's own listener thread, until `close`.
    func listen(_ wake: @escaping @Sendable (StoreWakeup) -> Void)
}

/// What `claim` found.
package enum SessionClaim: Sendable {
    /// This node holds it now.
    case taken(StoredSession)
    /// A live node holds it; requests go to `address`.
    case heldElsewhere(address: String)
    /// No such session is stored.
    case missing
}

/// A session's committed events after a point, and where it stands now.
package struct SessionEvents: Sendable {
    package var version: UInt64
    package var stateJSON: [UInt8]
    package var events: [StoredEvent]

    package init(version: UInt64, stateJSON: [UInt8], events: [StoredEvent]) {
        self.version = version
        self.stateJSON = stateJSON
        self.events = events
    }
}

/// One committed change of the global user: its JSON, or nil when it was cleared.
package struct UserChange: Sendable, Equatable {
    package var version: UInt64
    package var json: [UInt8]?

    package init(version: UInt64, json: [UInt8]?) {
        self.version = version
        self.json = json
    }
}

/// A notification from the shared store: a wake-up, never the truth (the tables are; a lost
/// wake-up only delays what the next read or periodic check finds).
package enum StoreWakeup: Sendable, Equatable {
    /// `session` committed events up to `seq`; `sentAt` is the committing node's clock
    /// (seconds since 1970), for the notification lag. `carried`: the events of that commit,
    /// oldest first, when they fit in the notification (empty: read them from the table).
    case events(session: String, seq: UInt64, sentAt: Double, carried: [StoredEvent])
    /// `session` was deleted or expired; its subscribers get `event: end` with `reason`.
    case ended(session: String, reason: String)
    /// The global user changed; its changes up to `version` are stored.
    case user(version: UInt64)
    /// The listener's connection was lost and is back: anything may have been missed.
    case reconnected
}

/// A session watched on a node that does not hold it, as the store has it now.
package struct WatchedSession: Sendable, Equatable {
    package var version: UInt64
    /// False once its holder let it go (it unloaded the session, or stopped) or its lease ran out.
    package var isHeld: Bool

    package init(version: UInt64, isHeld: Bool) {
        self.version = version
        self.isHeld = isHeld
    }
}
