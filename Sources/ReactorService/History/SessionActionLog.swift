import ReactorStore

/// What the action log records of an action besides the versions it made.
struct ActionSource {
    /// The action's JSON as sent (sensitive fields are redacted when it is logged).
    let json: ArraySlice<UInt8>
    let subject: String?
    let idempotencyKey: String?
}

/// One session's action log as it is written: it numbers entries, tells which of them a new
/// event belongs to from the cause it came with (`ChangeCause`), and holds the entries until the
/// journal takes them with the change they describe (a durable store) or keeps the newest
/// (the memory store). Guarded by the hub's lock.
final class SessionActionLog {
    /// Shared by every session of the server (one reference per session, not its fields).
    let settings: ActionLogSettings
    /// This session's causes are `tagBase | number` (the low 32 bits of the entry's number), so
    /// an event caused by another session's action is never taken for one of this session's.
    private let tagBase: UInt64
    private(set) var lastNumber: UInt64
    /// The action running now (0: none), and the first version it made (0: none yet; a change
    /// is never version 0).
    private var running: UInt64 = 0
    private var runningFirstVersion: UInt64 = 0
    private var runningLastVersion: UInt64 = 0
    /// Not yet taken by the journal (durable store), or all that is kept (memory store).
    private(set) var entries: [LoggedAction] = []

    static let userCause = UInt64.max

    init(settings: ActionLogSettings, session key: SessionKey, lastNumber: UInt64) {
        self.settings = settings
        // 30 bits of the session's random id: never 0 (no cause), and the top bit clear, so never
        // all ones (the user).
        tagBase = ((key.high >> 34) | 1) << 32
        self.lastNumber = lastNumber
    }

    /// An action starts: the cause its changes carry.
    func begin() -> UInt64 {
        lastNumber += 1
        running = lastNumber
        runningFirstVersion = 0
        return tagBase | (lastNumber & 0xFFFF_FFFF)
    }

    /// The running action is done; the session is at `version` (its own last change's, or, when it
    /// changed nothing, this one, the version it ran at).
    func end(_ source: ActionSource, version: UInt64, redacting sensitive: Set<String>) {
        guard running != 0 else { return }
        let number = running
        let firstVersion = runningFirstVersion == 0 ? nil : runningFirstVersion
        let version = firstVersion == nil ? version : runningLastVersion
        running = 0
        let json = Self.bounded(
            sensitive.isEmpty ? Array(source.json) : SensitiveFields.redacting(sensitive, in: source.json))
        insert(
            LoggedAction(
                number: number, cause: .action, firstVersion: firstVersion, version: version, json: json,
                subject: source.subject, idempotencyKey: source.idempotencyKey, time: WallClock.now))
    }

    /// Events `first...last` were made, with `cause`. The running action's are its own versions
    /// while they follow on from one another; once another entry's came between (an earlier
    /// action's effect or the user, while its effect was still to come), its effect's later ones
    /// are entries of their own: an entry's `from...version` holds no version another entry made.
    func record(first: UInt64, last: UInt64, cause: UInt64) {
        if running != 0, cause == tagBase | (running & 0xFFFF_FFFF),
            runningFirstVersion == 0 || first == runningLastVersion + 1
        {
            if runningFirstVersion == 0 { runningFirstVersion = first }
            runningLastVersion = last
            return
        }
        let kind: LoggedAction.Cause = cause == Self.userCause ? .user : .effect
        let origin = kind == .effect && cause & ~0xFFFF_FFFF == tagBase ? number(ofTag: cause) : nil
        lastNumber += 1
        insert(
            LoggedAction(
                number: lastNumber, cause: kind, origin: origin, firstVersion: first, version: last,
                time: WallClock.now))
    }

    /// The entries written since the last take (durable store).
    func take() -> [LoggedAction] {
        defer { entries = [] }
        return entries
    }

    /// The kept entries after `version` (nil: from the first), at most `limit` (memory store),
    /// in the store's order and by its page rule (`ActionLogReading`).
    func page(after version: UInt64?, limit: Int) -> [LoggedAction] {
        let cutoff = settings.oldestKept
        let kept = entries.dropFirst(max(0, entries.count - settings.length)).filter { entry in
            version.map { entry.version > $0 } ?? true && entry.time >= cutoff
        }
        var page: [LoggedAction] = []
        for entry in kept.sorted(by: { ($0.version, $0.number) < ($1.version, $1.number) }) {
            if page.count >= limit, page.last?.version != entry.version { break }
            page.append(entry)
        }
        return page
    }

    /// The newest number whose low 32 bits are the tag's.
    private func number(ofTag tag: UInt64) -> UInt64 {
        let low = tag & 0xFFFF_FFFF
        let candidate = (lastNumber & ~0xFFFF_FFFF) | low
        return candidate <= lastNumber ? candidate : candidate &- (1 << 32)
    }

    /// In number order: an action's entry is made when it ends, after any that came meanwhile.
    private func insert(_ entry: LoggedAction) {
        var index = entries.count
        while index > 0, entries[index - 1].number > entry.number { index -= 1 }
        entries.insert(entry, at: index)
        if settings.keepsEntries { trim() }
    }

    /// Drops what is past the settings, in steps: moving a thousand entries on every action costs more than it saves.
    private func trim() {
        let cutoff = settings.oldestKept
        var drop = entries.count - settings.length >= Self.trimStep ? entries.count - settings.length : 0
        while drop < entries.count, entries[drop].time < cutoff { drop += 1 }
        if drop > 0 { entries.removeFirst(drop) }
    }

    private static let trimStep = 64

    /// Bytes of an action's JSON an entry keeps at most. A body may be as large as the body limit
    /// (1 MiB), most of it fields the reactor never reads: kept whole, a client could fill the disk
    /// through one session's log, and a page or an export read a gigabyte.
    static let largestAction = 16 << 10

    /// `json`, or, past `largestAction`, its `type` and `omittedBytes`: the size of the action left out.
    static func bounded(_ json: [UInt8]) -> [UInt8] {
        guard json.count > largestAction else { return json }
        var out = Array(#"{"type":"#.utf8)
        StateJSONEncoder.appendString(
            RequestJSONDecoder.TopLevelObject(parsing: json)?.string("type") ?? "", into: &out)
        out += Array(#","omittedBytes":\#(json.count)}"#.utf8)
        return out
    }
}

/// How much of each session's log is kept, and where.
final class ActionLogSettings: Sendable {
    /// Entries per session; 0: no log.
    let length: Int
    /// Seconds an entry is kept.
    let age: Double
    /// The memory store: each session keeps its log itself (else it goes to the store).
    let keepsEntries: Bool

    /// Entries logged before this time (seconds since 1970) are past their age: never shown, and forgotten.
    var oldestKept: Double { WallClock.now - age }

    init(length: Int, age: Double, keepsEntries: Bool) {
        self.length = length
        self.age = age
        self.keepsEntries = keepsEntries
    }
}
