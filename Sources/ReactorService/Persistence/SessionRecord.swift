import ReactorStore

#if canImport(FoundationEssentials)
import FoundationEssentials
#else
import Foundation
#endif
#if canImport(Glibc)
import Glibc
#endif

/// A durable session's side of its hub: its identity in the store, what clients may see
/// (the last committed state), and the events the journal has not committed yet. Guarded by
/// the hub's lock; the memory store has none. Not `Sendable`: reached only through its hub.
final class SessionRecord {
    let id: String
    let kind: String
    /// The subject that created it (kept with the session's first write); nil without authentication.
    let owner: String?
    let createdAt: Double
    let journal: Journal
    /// Not written yet: the first write inserts it.
    var isNew: Bool
    /// A new session's state at version 0, kept when it changes before its first write (the
    /// global user, an effect): that write stores it as version 0, the state its 201 showed.
    var firstState: [UInt8]?
    /// Queued in the journal for its next transaction.
    var isQueued = false
    /// The last activity time as stored, seconds since 1970, and how far behind it may be
    /// before a write carries it again (an eighth of the TTL: the expiry after a restart is
    /// that exact).
    var storedLastActive: Double
    let activityResolution: Double
    /// The next write carries the last activity, however recent the stored one (before an unload).
    var activityDue = false
    /// The last committed event and state: all that readers and new subscribers are shown.
    private(set) var published: (seq: UInt64, json: [UInt8])
    /// Numbered, not yet taken by the journal, and the requests waiting for them.
    var pending: [PendingEvent] = []
    /// Answers kept under idempotency keys, written with the changes they answer.
    var answers: [StoredAnswer] = []
    /// While a request's change and its answer are being made: the journal takes nothing, so
    /// that the two go in one transaction; `wantedWhileHeld`: the journal came meanwhile.
    var isHeld = false
    var wantedWhileHeld = false
    /// A change is made and the journal has not taken it yet: queued, or asked for while held
    /// (then `releaseWrites` queues it). A request that waits for its commit waits for the take.
    var awaitsTake: Bool { isQueued || wantedWhileHeld }
    var pendingWaiters: [Journal.Completion] = []
    /// Changes made (each queued write adds one), and how many of them are durable: a request
    /// waits for the write that carries its own.
    var madeMark: UInt64 = 0
    private(set) var committedMark: UInt64 = 0
    /// Taken by the journal's current transaction.
    var inFlight: InFlight?
    /// Why a change of this session was lost (it is then unloaded and ends).
    private(set) var lost: StoreError?
    /// What the service does when a change is lost: unload the session.
    var onLost: (@Sendable (_ neverStored: Bool) -> Void)?

    struct InFlight {
        let events: [PendingEvent]
        let seq: UInt64
        let json: [UInt8]
        let lastActive: Double?
        /// The `madeMark` it carries the changes up to.
        let mark: UInt64
        var waiters: [Journal.Completion]
    }

    init(id: String, kind: String, owner: String?, journal: Journal, stored: StoredSession?, ttl: Double) {
        self.id = id
        self.kind = kind
        self.owner = owner
        self.journal = journal
        // No TTL: nothing expires, so the activity is never worth a write of its own.
        activityResolution = ttl > 0 ? ttl / 8 : .infinity
        createdAt = stored?.createdAt ?? WallClock.now
        storedLastActive = stored?.lastActive ?? createdAt
        isNew = stored == nil
        published = (stored?.version ?? 0, stored?.stateJSON ?? Array("{}".utf8))
    }

    /// Moves what is pending in flight, as the write of the session at `state` and `version`.
    func take(state: [UInt8], version: UInt64, lastActive: Double, loggedActions: [LoggedAction]) -> SessionWrite {
        var events = pending.map(\.stored)
        // A new session's first state is its version 0 in the history, as a stream showed it.
        if isNew, let first = version == 0 ? state : firstState {
            events.insert(StoredEvent(seq: 0, pulse: nil, json: first), at: 0)
        }
        let inFlightEvents = pending
        pending = []
        let answers = self.answers
        self.answers = []
        let stale = isNew || activityDue || lastActive - storedLastActive > activityResolution
        activityDue = false
        inFlight = InFlight(
            events: inFlightEvents, seq: version, json: state, lastActive: stale ? lastActive : nil,
            mark: madeMark, waiters: pendingWaiters)
        pendingWaiters = []
        return SessionWrite(
            id: id, kind: kind, owner: owner, isNew: isNew, stateJSON: state, version: version,
            createdAt: createdAt, lastActive: stale ? lastActive : nil, events: events,
            answers: answers, loggedActions: loggedActions, base: isNew ? nil : published.seq)
    }

    /// The write in flight is durable: it becomes what clients see; returns it.
    func committed() -> InFlight? {
        guard let written = inFlight else { return nil }
        inFlight = nil
        isNew = false
        firstState = nil
        committedMark = written.mark
        if let lastActive = written.lastActive { storedLastActive = lastActive }
        published = (written.seq, written.json)
        return written
    }

    /// The write in flight was lost: everything pending goes with it.
    func lose(_ reason: StoreError) -> (
        waiters: [Journal.Completion], handler: (@Sendable (Bool) -> Void)?,
        neverStored: Bool
    ) {
        lost = reason
        defer {
            inFlight = nil
            pending = []
            answers = []
            pendingWaiters = []
            onLost = nil
        }
        return ((inFlight?.waiters ?? []) + pendingWaiters, onLost, isNew)
    }

    /// The session ended: its pending events are dropped; returns who waited for them.
    func dropPending() -> [Journal.Completion] {
        defer {
            pending = []
            pendingWaiters = []
        }
        return pendingWaiters
    }
}

/// An event numbered but not yet committed, with the form the store keeps it in.
struct PendingEvent {
    let event: RecordedEvent
    let stored: StoredEvent
}

/// Seconds since 1970, for times the store keeps across restarts.
enum WallClock {
    static var now: Double {
        var time = timespec()
        clock_gettime(CLOCK_REALTIME, &time)
        return Double(time.tv_sec) + Double(time.tv_nsec) / 1e9
    }
}
