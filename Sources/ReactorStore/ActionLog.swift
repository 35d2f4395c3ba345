/// One entry of a session's action log: an action a client sent, or a change that came without
/// one (an effect's later mutations, the global user), with the versions it made. Written in
/// the same transaction as the change it describes.
package struct LoggedAction: Sendable, Equatable {
    package enum Cause: String, Sendable {
        /// An action a client sent, with the versions its synchronous mutations made.
        case action
        /// Mutations an action's effect made after the action's own run, or during it once another
        /// entry's version came after the action's (`origin` names it).
        case effect
        /// Mutations the global user's change made (`currentUser`).
        case user
    }

    /// Its place in the session's log, from 1, without gaps.
    package var number: UInt64
    package var cause: Cause
    /// For an effect: the number of the action it came from; nil when none is known (a
    /// publisher the reactor started by itself).
    package var origin: UInt64?
    /// The first version (event id) it made; nil when it changed nothing.
    package var firstVersion: UInt64?
    /// The session's version after it.
    package var version: UInt64
    /// The action's JSON as sent, sensitive fields redacted; nil for effects and the user.
    package var json: [UInt8]?
    /// The authenticated subject that sent it; nil without authentication, effects and the user.
    package var subject: String?
    package var idempotencyKey: String?
    /// Seconds since 1970.
    package var time: Double

    package init(
        number: UInt64, cause: Cause, origin: UInt64? = nil, firstVersion: UInt64?, version: UInt64,
        json: [UInt8]? = nil, subject: String? = nil, idempotencyKey: String? = nil, time: Double
    ) {
        self.number = number
        self.cause = cause
        self.origin = origin
        self.firstVersion = firstVersion
        self.version = version
        self.json = json
        self.subject = subject
        self.idempotencyKey = idempotencyKey
        self.time = time
    }
}

/// What the store knows of a session's state at one version.
package enum StateAtVersion: Sendable, Equatable {
    case found([UInt8])
    /// Older than the history keeps: `oldest` is the oldest version whose state is kept.
    case notRetained(oldest: UInt64)
    /// Later than the session's version, `current`.
    case notYet(current: UInt64)
    /// No such session is stored.
    case noSession
}

/// A session as a list of sessions shows it.
package struct SessionSummary: Sendable, Equatable {
    package var id: String
    package var kind: String
    package var owner: String?
    package var version: UInt64
    /// Seconds since 1970.
    package var createdAt: Double
    package var lastActive: Double

    package init(id: String, kind: String, owner: String?, version: UInt64, createdAt: Double, lastActive: Double) {
        self.id = id
        self.kind = kind
        self.owner = owner
        self.version = version
        self.createdAt = createdAt
        self.lastActive = lastActive
    }
}

/// The log reads every engine answers.
package protocol ActionLogReading {
    /// `session`'s log entries whose `version` is after `version` (nil: from the first, those
    /// that changed nothing at version 0 included), by version and then number (an entry made
    /// while an action ran comes before that action's, which ends later): at most `limit`, except
    /// that a page never ends between two entries of the same version (entries that changed
    /// nothing share the version before them), so paging by the last one's version misses nothing.
    /// Only entries logged at `time` or later (seconds since 1970): a store keeps a session's
    /// newest entry past its age, for its numbering, but never shows it.
    func loggedActions(of session: String, after version: UInt64?, loggedSince time: Double, limit: Int)
        throws(StoreError) -> [LoggedAction]

    /// The state `session` had at `version`: the current one, or one kept in its event history.
    func state(of session: String, at version: UInt64) throws(StoreError) -> StateAtVersion

    /// Stored sessions with an id after `id` (in byte order), at most `limit`.
    func sessions(after id: String, limit: Int) throws(StoreError) -> [SessionSummary]
}

extension ActionLogReading {
    /// Every entry after `version`, whatever its age.
    package func loggedActions(of session: String, after version: UInt64?, limit: Int) throws(StoreError)
        -> [LoggedAction]
    {
        try loggedActions(of: session, after: version, loggedSince: -.infinity, limit: limit)
    }
}
