/// Where sessions, their event history and the global user outlive the process: the one seam
/// between the service and a database. The service never sees SQL; an engine never sees a
/// reactor, only JSON documents and numbers.
///
/// Calls come from several threads, but `commit` from one at a time (the service's group
/// committer); an engine serialises the rest itself.
package protocol StoreEngine: AnyObject, Sendable, ActionLogReading {
    /// The store as an operator names it (`sqlite:/data/reactord.sqlite`), for logs.
    var name: String { get }

    /// The global user's JSON, or nil when none is set.
    func loadUser() throws(StoreError) -> [UInt8]?

    /// Why the store can no longer be used, found without a read (its file moved or deleted
    /// while open); nil when nothing is known wrong.
    func fileProblem() -> String?

    /// How many sessions the store holds.
    func sessionCount() throws(StoreError) -> Int

    /// How many sessions `owner` (an authenticated subject) holds in the store (indexed).
    func sessionCount(ownedBy owner: String) throws(StoreError) -> Int

    /// One session with the newest `historyLength` events of its history, or nil when the
    /// store has no such session.
    func session(_ id: String, historyLength: Int) throws(StoreError) -> StoredSession?

    /// Ids of sessions last active before `time` (seconds since 1970), at most `limit`.
    func sessions(lastActiveBefore time: Double, limit: Int) throws(StoreError) -> [String]

    /// The answer kept under `key` in `scope`, or nil when none is (expired ones may linger
    /// until they are forgotten).
    func answer(scope: String, key: String) throws(StoreError) -> StoredAnswer?

    /// How many answers the store keeps.
    func answerCount() throws(StoreError) -> Int

    /// Applies `changes` in order, all or none, durably before it returns. Each session keeps
    /// only its newest `historyLength` events and `actionLogLength` log entries (0: none are
    /// written). Returns the ids of the sessions whose changes the
    /// store refused: because this node no longer holds them (a shared store's fencing), or an
    /// expiry's delete of a session used since (`idleBefore`). The rest of the batch is committed.
    @discardableResult
    func commit(_ changes: [StoreChange], historyLength: Int, actionLogLength: Int) throws(StoreError) -> Set<String>

    /// Lets go of the database (and its lock); nothing may be called afterwards.
    func close()
}

extension StoreEngine {
    package func fileProblem() -> String? { nil }

    /// A commit that keeps no action log.
    @discardableResult
    package func commit(_ changes: [StoreChange], historyLength: Int) throws(StoreError) -> Set<String> {
        try commit(changes, historyLength: historyLength, actionLogLength: 0)
    }
}

/// A session as the store keeps it.
package struct StoredSession: Sendable {
    package var id: String
    package var kind: String
    /// The authenticated subject that created it; nil when it was created without one.
    package var owner: String?
    package var stateJSON: [UInt8]
    /// The id of its latest event.
    package var version: UInt64
    /// Seconds since 1970.
    package var createdAt: Double
    package var lastActive: Double
    /// The history kept for resumes, oldest first.
    package var events: [StoredEvent]
    /// The number of its action log's newest entry (0: none yet): the next one follows it.
    package var lastLoggedAction: UInt64

    package init(
        id: String, kind: String, owner: String? = nil, stateJSON: [UInt8], version: UInt64,
        createdAt: Double, lastActive: Double, events: [StoredEvent], lastLoggedAction: UInt64 = 0
    ) {
        self.id = id
        self.kind = kind
        self.owner = owner
        self.stateJSON = stateJSON
        self.version = version
        self.createdAt = createdAt
        self.lastActive = lastActive
        self.events = events
        self.lastLoggedAction = lastLoggedAction
    }
}

/// One event of a session's history: a state, or a pulse with its value.
package struct StoredEvent: Sendable, Equatable {
    package var seq: UInt64
    /// nil for a state event; the pulse's name for a pulse.
    package var pulse: String?
    /// The state's JSON, or the pulse's value as JSON.
    package var json: [UInt8]

    package init(seq: UInt64, pulse: String?, json: [UInt8]) {
        self.seq = seq
        self.pulse = pulse
        self.json = json
    }
}

/// One change to write.
package enum StoreChange: Sendable {
    /// A session's state after its latest events (`isNew`: its first write).
    case session(SessionWrite)
    /// A session is over: it, its history and its action log go. `reason` is what its subscribers are told
    /// (`event: end`), on any node of a shared store. `idleBefore` (an expiry): only if its last
    /// activity is still before that time (seconds since 1970); a session used since it was
    /// found expired stays.
    case delete(id: String, reason: String, idleBefore: Double? = nil)
    /// The global user's JSON, or nil to clear it.
    case user([UInt8]?)
    /// A request's answer under its idempotency key, kept with the changes before it in the batch
    /// (and dropped with its session's change when that one is refused). A key kept already
    /// keeps its first answer.
    case answer(StoredAnswer)
    /// Forgets at most `limit` answers that expired before `time` (seconds since 1970). SQLite
    /// forgets them oldest first and stops at the first one not expired, so an answer kept for
    /// longer than the ones after it (a TTL shortened since) holds those back until it expires.
    case forgetAnswers(expiredBefore: Double, limit: Int)
    /// Forgets at most `limit` action log entries logged before `time` (seconds since 1970); each
    /// session's newest entry stays, so that its numbering goes on after it.
    case forgetLoggedActions(before: Double, limit: Int)
    /// A session's last activity (seconds since 1970), written as it leaves memory: its writes
    /// carry it coarsely (`SessionWrite.lastActive`). Only ever moves the stored time later;
    /// nothing when the session is gone.
    case activity(id: String, lastActive: Double)
}

package struct SessionWrite: Sendable {
    package var id: String
    package var kind: String
    /// Written with the first write (`isNew`) only: a session's owner never changes.
    package var owner: String?
    package var isNew: Bool
    package var stateJSON: [UInt8]
    package var version: UInt64
    package var createdAt: Double
    /// Seconds since 1970; nil leaves the stored time as it is (it is written coarsely, so
    /// that most writes leave the index on it alone).
    package var lastActive: Double?
    /// The events since the last write, oldest first.
    package var events: [StoredEvent]
    /// The answers of the requests that made these changes, kept only if the write is.
    package var answers: [StoredAnswer]
    /// The action log's entries for these changes, oldest first.
    package var loggedActions: [LoggedAction]
    /// The version this write builds on, the last its writer knew stored. A shared store writes
    /// over that version only: a writer that read an older one (a hub let go, its write still in
    /// flight as the same node claimed the session again) is refused. Nil: over any version.
    package var base: UInt64?

    package init(
        id: String, kind: String, owner: String? = nil, isNew: Bool, stateJSON: [UInt8], version: UInt64,
        createdAt: Double, lastActive: Double?, events: [StoredEvent], answers: [StoredAnswer] = [],
        loggedActions: [LoggedAction] = [], base: UInt64? = nil
    ) {
        self.id = id
        self.kind = kind
        self.owner = owner
        self.isNew = isNew
        self.stateJSON = stateJSON
        self.version = version
        self.createdAt = createdAt
        self.lastActive = lastActive
        self.events = events
        self.answers = answers
        self.loggedActions = loggedActions
        self.base = base
    }
}

/// Why the store could not do what was asked (never a secret). `detail` is for the client's
/// problem document; `cause` adds what only an operator should read (the store's location,
/// the database's own message), and `description`, for logs, has both.
public enum StoreError: Error, Equatable, CustomStringConvertible {
    /// The disk (or the database's size limit) is full: 507 for the request.
    case full(String, cause: String = "")
    /// Any other failure to read or write: 503 for the request.
    case unavailable(String, cause: String = "")
    /// What is stored is damaged (a malformed database file, an impossible value in a row):
    /// retrying cannot help. A session read from it answers 409, a write 500.
    case damaged(String, cause: String = "")
    /// A shared store refused a session's change: another node holds it now (503; the
    /// client's retry reaches the holder).
    case notHeld(String)
    /// The store cannot be opened at all: reactord does not start.
    case cannotOpen(String)
    /// The connection was lost after the commit was sent and before it was confirmed: the change
    /// may or may not be stored (504 for the request: a retry under its key is safe, a plain one
    /// is not).
    case outcomeUnknown(String, cause: String = "")

    /// What went wrong, worded for any client: no location, address or database message.
    public var detail: String {
        switch self {
        case let .full(detail, _), let .unavailable(detail, _), let .damaged(detail, _), let .notHeld(detail),
            let .cannotOpen(detail), let .outcomeUnknown(detail, _):
            detail
        }
    }

    public var description: String {
        switch self {
        case let .full(detail, cause), let .unavailable(detail, cause), let .damaged(detail, cause),
            let .outcomeUnknown(detail, cause):
            cause.isEmpty ? detail : "\(detail) (\(cause))"
        case let .notHeld(detail), let .cannotOpen(detail): detail
        }
    }
}

/// A version or an event id as a row stores it: never negative, else the row is damaged
/// (clamped to 0, it would restart the session's event ids under its clients' feet).
func storedCount(_ value: Int64, _ name: String) throws(StoreError) -> UInt64 {
    guard value >= 0 else { throw .damaged("its stored row is damaged", cause: "\(name) \(value) is negative") }
    return UInt64(value)
}
