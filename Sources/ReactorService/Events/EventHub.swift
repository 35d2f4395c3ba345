import ConcurrencyPrimitives
import MicroHTTP
import ReactorCore
import ReactorStore

#if canImport(FoundationEssentials)
import FoundationEssentials
#else
import Foundation
#endif
#if canImport(Glibc)
import Glibc
#endif

/// One session's events: its sequence, its last encoded state, its pulse counts, its
/// history for resumes and its subscribers. Each change is framed once here and the same
/// bytes are queued on every stream; only a `?fields=` stream gets its own framing, made
/// once per distinct field set.
///
/// With a durable store (`record` set) events are published in two steps: `publish` numbers
/// them and holds them as pending; once the journal has committed them (`didCommit`) they
/// join the history and reach the streams. Subscribers and readers see only what is
/// committed, so no client ever sees an event a crash could take back.
// why: its state is behind a recursive `Mutex` (a stream may report its end from inside `send`), which `Locked` cannot be.
final class EventHub: @unchecked Sendable {
    struct Snapshot {
        let version: UInt64
        let stateJSON: [UInt8]
    }

    private struct Subscriber {
        let stream: EventStream
        let filter: FieldFilter?
        /// The filtered state last sent, so a filtered stream only hears of its fields' changes.
        var lastFiltered: [UInt8]?
        /// The `retry:` line, until it goes out in front of the stream's first event.
        var retry: Frame?
    }

    // Recursive: a stream may report its end synchronously from inside `send` or `close`.
    private let lock = Mutex(recursive: true)
    /// The reactor's latest event and state.
    private var seq: UInt64 = 0
    private var stateJSON: [UInt8] = Array("{}".utf8)
    /// With a durable store: the session as the journal writes it, with its unwritten events
    /// (all of it guarded by `lock`). One reference here, so the memory store pays 8 bytes.
    private let record: SessionRecord?
    /// Each pulse's last update count, by name: a state has few pulses, so the first is kept
    /// inline and any others in an array (a dictionary cost every session ~120 bytes more).
    private var firstPulse: (name: String, count: UInt)?
    private var morePulses: [(name: String, count: UInt)] = []
    private var history: EventHistory
    private var subscribers: [ObjectIdentifier: Subscriber] = [:]
    /// Until the session is live, states only set the baseline: a new session is version 0.
    private var isLive = false
    private var isEnded = false
    /// Ended with the session living on in the store (unloaded, or let go without `event: end`):
    /// a subscribe is turned back to look it up again.
    private var livesOn = false
    private var lastActivity = ProcessClock.now
    private let metrics: ServiceMetrics
    /// The session's action log, when it keeps one (a follower's hub does not).
    private let actionLog: SessionActionLog?

    /// `record`: the session's place in a durable store (nil: memory only). `restoring`: the
    /// session as the store kept it, whose version and history continue here.
    init(
        historyLength: Int, metrics: ServiceMetrics, record: SessionRecord? = nil,
        restoring stored: StoredSession? = nil, actionLog: SessionActionLog? = nil
    ) {
        history = EventHistory(capacity: historyLength)
        self.metrics = metrics
        self.record = record
        self.actionLog = actionLog
        if let stored {
            seq = stored.version
            stateJSON = stored.stateJSON
            for event in Self.unbrokenTail(of: stored.events, endingAt: stored.version) {
                history.append(RecordedEvent(stored: event))
            }
        }
    }

    /// The stored events a resume may trust: the run of consecutive ids that ends at the session's
    /// version. A run with `--history 0` writes no events but leaves older ones, and those (9 and
    /// 10, the session at 13) made a resume from 8 skip 11 to 13.
    static func unbrokenTail(of events: [StoredEvent], endingAt version: UInt64) -> ArraySlice<StoredEvent> {
        guard let last = events.last, last.seq == version else { return [] }
        var start = events.count - 1
        while start > 0, events[start - 1].seq &+ 1 == events[start].seq { start -= 1 }
        return events[start...]
    }

    /// The latest state, which may not be committed yet: for the answer to the action that
    /// made it, sent only once it is.
    var latest: Snapshot { locked { Snapshot(version: seq, stateJSON: stateJSON) } }

    /// The state clients may see: the latest committed one.
    var snapshot: Snapshot { locked { Snapshot(version: publishedSeq, stateJSON: publishedJSON) } }

    /// What clients may see: the latest committed event and state (the latest, in memory).
    private var publishedSeq: UInt64 { record?.published.seq ?? seq }
    private var publishedJSON: [UInt8] { record?.published.json ?? stateJSON }

    var subscriberCount: Int { locked { subscribers.count } }

    /// A durable session not written yet (its first write is queued or in flight).
    var isNewSession: Bool { locked { record?.isNew ?? false } }

    /// From now on a changed state is an event. A restored session whose state changed while its
    /// reactor was built (the current user changed while it was stored) publishes that change
    /// now, as its next event, written like any other: else its answers would show a state the
    /// store and its streams never got, under the stored version.
    func goLive() {
        let changedWhileRestoring: [UInt8]? = locked {
            isLive = true
            defer { history.begin(with: stateJSON) }
            guard let record, !record.isNew, record.published.json != stateJSON else { return nil }
            defer { stateJSON = record.published.json }
            return stateJSON
        }
        if let changedWhileRestoring {
            ChangeCause.with(SessionActionLog.userCause) {
                publish(EncodedState(json: changedWhileRestoring, pulses: []))
            }
        }
    }

    func touch() { locked { lastActivity = ProcessClock.now } }

    /// Until `releaseWrites`, the journal takes no change of this session: a request's change
    /// and the answer kept for it under its idempotency key go in one transaction.
    func holdWrites() { locked { record?.isHeld = true } }

    /// An action starts: until `releaseWrites`, the journal takes no change of this session, so
    /// that the action's log entry goes in the same transaction as its change. Returns the
    /// cause its changes carry (0 when the session keeps no log).
    func beginAction() -> UInt64 {
        locked {
            guard let actionLog else { return 0 }
            record?.isHeld = true
            return actionLog.begin()
        }
    }

    /// Ends `holdWrites` (or `beginAction`), adding `answer` to the changes to write, and the log
    /// entry of the action that ran, from `source` (its fields in `redacted` hidden).
    func releaseWrites(
        adding answer: StoredAnswer?, logging source: ActionSource? = nil, redacting redacted: Set<String> = []
    ) {
        locked {
            if let source { actionLog?.end(source, version: seq, redacting: redacted) }
            guard let record else { return }
            record.isHeld = false
            if let answer { record.answers.append(answer) }
            guard record.wantedWhileHeld || answer != nil || source != nil else { return }
            record.wantedWhileHeld = false
            markDirty(record)
        }
    }

    /// The memory store's log of this session: entries after `version`, at most `limit` (see
    /// `ActionLogReading`).
    func loggedActions(after version: UInt64?, limit: Int) -> [LoggedAction] {
        locked { actionLog?.page(after: version, limit: limit) ?? [] }
    }

    /// The state at `version`, from what this hub holds (the memory store's history).
    func state(at version: UInt64) -> StateAtVersion {
        locked {
            if version == publishedSeq { return .found(publishedJSON) }
            if version > publishedSeq { return .notYet(current: publishedSeq) }
            if let json = history.stateJSON(atOrBefore: version) { return .found(json) }
            return .notRetained(oldest: history.oldestKnownState ?? publishedSeq)
        }
    }

    /// True when nobody listens and nothing happened since `cutoff`.
    func isIdle(since cutoff: Double) -> Bool {
        locked { subscribers.isEmpty && lastActivity < cutoff }
    }

    /// When nobody listens: the time of the last activity, to pick the least recently used.
    var idleSince: Double? { locked { subscribers.isEmpty ? lastActivity : nil } }

    /// Ends the hub so that its session can leave memory, when nobody listens, nothing happened
    /// since `cutoff` and everything is written: true then. Its last activity goes to the store
    /// first when the stored one is further behind than writes let it be (the record's
    /// resolution, an eighth of the TTL: the store expires it by that time, unloaded).
    func endForUnload(idleSince cutoff: Double) -> Bool {
        locked {
            guard !isEnded, subscribers.isEmpty, lastActivity < cutoff else { return false }
            if let record {
                guard !record.isNew, !record.isQueued, record.inFlight == nil, record.pending.isEmpty,
                    record.lost == nil
                else { return false }
                if lastActiveWallTime - record.storedLastActive > record.activityResolution {
                    record.activityDue = true
                    markDirty(record)
                    return false
                }
            }
            isEnded = true
            livesOn = true
            return true
        }
    }

    /// Seconds since 1970 of the last activity; now while anyone listens.
    private var lastActiveWallTime: Double {
        subscribers.isEmpty ? WallClock.now - (ProcessClock.now - lastActivity) : WallClock.now
    }

    /// With a durable store, queues a write of the last activity when the stored one is behind
    /// by more than the record's resolution, so a session that is only watched does not expire
    /// after a restart.
    func refreshStoredActivity() {
        locked {
            guard let record, !isEnded, lastActiveWallTime - record.storedLastActive > record.activityResolution else {
                return
            }
            markDirty(record)
        }
    }

    /// A new state of the reactor, already encoded. Called serially, from the reactor's pipeline.
    func publish(_ state: EncodedState) {
        locked {
            guard !isEnded else { return }
            defer {
                stateJSON = state.json
                for pulse in state.pulses { setPulseCount(pulse.updatedCount, for: pulse.name) }
            }
            guard isLive else {
                if let record, record.isNew { markDirty(record) }  // the new session's first write
                return
            }
            var events: [RecordedEvent] = []
            var stored: [StoredEvent] = []  // with a durable store: the same events as it keeps them
            if state.json != stateJSON {
                seq += 1
                events.append(
                    RecordedEvent(
                        seq: seq, kind: .state(json: state.json),
                        frame: EventFrames.state(seq: seq, json: state.json)))
                if record != nil { stored.append(StoredEvent(seq: seq, pulse: nil, json: state.json)) }
            }
            for pulse in state.pulses where pulseCount(for: pulse.name) != pulse.updatedCount {
                seq += 1
                let value = StateEncoding.encodeValue(pulse.value)
                events.append(
                    RecordedEvent(
                        seq: seq, kind: .pulse,
                        frame: EventFrames.pulse(seq: seq, name: pulse.name, valueJSON: value)))
                if record != nil { stored.append(StoredEvent(seq: seq, pulse: pulse.name, json: value)) }
            }
            if let actionLog, let first = events.first {
                actionLog.record(first: first.seq, last: seq, cause: ChangeCause.current)
            }
            if let record {
                guard !events.isEmpty else { return }
                record.pending += zip(events, stored).map { PendingEvent(event: $0, stored: $1) }
                markDirty(record)
                return
            }
            publish(events)
        }
    }

    /// A follower's hub (cluster mode: the session lives on another node): events that node
    /// committed, as the store gave them back, and where the session stands after them.
    func follow(_ events: [StoredEvent], version: UInt64, stateJSON state: [UInt8]) {
        locked {
            guard !isEnded, version > seq else { return }
            let fresh = events.filter { $0.seq > seq }
            seq = version
            stateJSON = state
            publish(fresh.map(RecordedEvent.init(stored:)))
        }
    }

    /// Appends committed (or, in memory, new) events to the history and queues them on
    /// every stream; the streams' resumes go out together once all are queued.
    private func publish(_ events: [RecordedEvent]) {
        // Nobody to wake: no batch to open.
        if subscribers.isEmpty { return record(events) }
        EventStream.batchingResumes { record(events) }
    }

    private func record(_ events: [RecordedEvent]) {
        for event in events {
            history.append(event)
            broadcast(event)
        }
    }

    private func markDirty(_ record: SessionRecord) {
        guard !record.isQueued else { return }
        record.isQueued = true
        record.journal.markDirty(self)
    }

    /// Adds a stream: what it missed since `lastEventID` when history covers it, else the
    /// current state; `retry` opens the first event it gets (a resume that missed nothing
    /// gets it with the next one).
    /// False, leaving the stream alone, when the session left memory meanwhile but lives on: the
    /// caller looks it up again, which loads it.
    func subscribe(_ stream: EventStream, lastEventID: UInt64?, filter: FieldFilter?, retry: Frame) -> Bool {
        let key = ObjectIdentifier(stream)
        var livesOn = false
        let added: Bool = locked {
            guard !isEnded else {
                livesOn = self.livesOn
                if !livesOn { stream.close(finalFrame: EventFrames.end(reason: "deleted")) }
                return false
            }
            var subscriber = Subscriber(stream: stream, filter: filter, retry: retry)
            if let lastEventID, let missed = history.events(after: lastEventID, latest: publishedSeq) {
                // A filtered stream compares with what the client had at `lastEventID`, when
                // history still holds that state, so an unchanged field is not sent again.
                if let filter, let had = history.stateJSON(atOrBefore: lastEventID) {
                    subscriber.lastFiltered = filter.apply(to: had)
                }
                for event in missed {
                    // A view is one event's: a cache shared across events sent the first
                    // event's fields for every later one, so only the first change arrived.
                    var views = FilteredViews()
                    deliver(event, to: &subscriber, views: &views)
                }
            } else {
                var views = FilteredViews()
                let current = RecordedEvent(
                    seq: publishedSeq, kind: .state(json: publishedJSON),
                    frame: EventFrames.state(seq: publishedSeq, json: publishedJSON))
                deliver(current, to: &subscriber, views: &views)
            }
            subscribers[key] = subscriber
            lastActivity = ProcessClock.now
            return true
        }
        guard added else { return !livesOn }
        metrics.subscribers.increment()
        stream.onClose { [weak self] _ in self?.unsubscribe(key) }
        return true
    }

    /// Ends every stream, with `event: end` when `reason` is given (the session is over),
    /// else with a plain close that clients answer by reconnecting and resuming; later
    /// publishes and subscribes are refused.
    func end(reason: String?) {
        let (ended, waiters): ([Subscriber], [Journal.Completion]) = locked {
            isEnded = true
            // Not over (a lease lost, a commit lost, a stop): a subscribe coming now looks it up again.
            if reason == nil { livesOn = true }
            defer { subscribers.removeAll() }
            return (Array(subscribers.values), record?.dropPending() ?? [])
        }
        for waiter in waiters { waiter(.unavailable("the session ended before its last change was stored")) }
        let frame = reason.map(EventFrames.end(reason:))
        for subscriber in ended { subscriber.stream.close(finalFrame: frame) }
        if !ended.isEmpty { metrics.subscribers.decrement(by: Double(ended.count)) }
    }

    private func unsubscribe(_ key: ObjectIdentifier) {
        let removed: Bool = locked {
            lastActivity = ProcessClock.now
            return subscribers.removeValue(forKey: key) != nil
        }
        if removed { metrics.subscribers.decrement() }
    }

    /// Calls `body` once, when the journal loses a change of this session (a failed commit),
    /// telling whether the session was never stored at all.
    func onLost(_ body: @escaping @Sendable (_ neverStored: Bool) -> Void) { locked { record?.onLost = body } }

    /// Calls `completion` once every change made so far is durable (nil), or lost (why), on
    /// the journal's thread; at once, on this thread, when there is nothing to wait for.
    func whenCommitted(_ completion: @escaping Journal.Completion) {
        let now: StoreError?? = locked {
            guard let record else { return .some(nil) }
            if let lost = record.lost { return .some(lost) }
            if record.isQueued {
                record.pendingWaiters.append(completion)
            } else if record.inFlight != nil {
                record.inFlight?.waiters.append(completion)
            } else {
                return .some(nil)
            }
            return .none
        }
        if case let .some(result) = now { completion(result) }
    }

    private typealias FilteredViews = [FieldFilter: (json: [UInt8], frame: Frame)]

    private func broadcast(_ event: RecordedEvent) {
        var views = FilteredViews()
        var delivered: Int64 = 0
        for key in subscribers.keys {
            guard var subscriber = subscribers[key] else { continue }
            if deliver(event, to: &subscriber, views: &views) { delivered += 1 }
            subscribers[key] = subscriber
        }
        if delivered > 0 { metrics.eventsDelivered.increment(by: delivered) }
    }

    /// Queues one event on one stream, framing a filtered state at most once per field set.
    @discardableResult
    private func deliver(
        _ event: RecordedEvent, to subscriber: inout Subscriber,
        views: inout FilteredViews
    ) -> Bool {
        guard let filter = subscriber.filter, case let .state(json) = event.kind else {
            return send(event.frame, to: &subscriber)
        }
        let view: (json: [UInt8], frame: Frame)
        if let cached = views[filter] {
            view = cached
        } else {
            let json = filter.apply(to: json)
            view = (json, EventFrames.state(seq: event.seq, json: json))
            views[filter] = view
        }
        guard view.json != subscriber.lastFiltered else { return false }
        subscriber.lastFiltered = view.json
        return send(view.frame, to: &subscriber)
    }

    /// Queues `frame`, behind the `retry:` line if the stream has not had it yet: in one frame,
    /// so that no heartbeat comes between the two and ends the block early.
    private func send(_ frame: Frame, to subscriber: inout Subscriber) -> Bool {
        guard let retry = subscriber.retry else { return subscriber.stream.send(frame) }
        subscriber.retry = nil
        return subscriber.stream.send(Frame(retry.bytes + frame.bytes))
    }

    private func pulseCount(for name: String) -> UInt? {
        if let firstPulse, firstPulse.name == name { return firstPulse.count }
        for entry in morePulses where entry.name == name { return entry.count }
        return nil
    }

    private func setPulseCount(_ count: UInt, for name: String) {
        if firstPulse == nil || firstPulse?.name == name {
            firstPulse = (name, count)
            return
        }
        for index in morePulses.indices where morePulses[index].name == name {
            morePulses[index].count = count
            return
        }
        morePulses.append((name, count))
    }

    private func locked<T>(_ body: () throws -> T) rethrows -> T {
        lock.lock()
        defer { lock.unlock() }
        return try body()
    }
}

extension EventHub: Journaled {
    func takeChange() -> SessionWrite? {
        locked {
            guard let record else { return nil }
            record.isQueued = false
            if record.isHeld {
                record.wantedWhileHeld = true
                return nil
            }
            // An ended session writes nothing more: a deleted one is gone, and an unloaded one
            // (a lost commit) must not store the state whose change was lost.
            guard !isEnded else { return nil }
            return record.take(
                state: stateJSON, version: seq, lastActive: lastActiveWallTime,
                loggedActions: actionLog?.take() ?? [])
        }
    }

    func didCommit() {
        let waiters: [Journal.Completion] = locked {
            guard let record, let written = record.committed() else { return [] }
            if !isEnded { publish(written.events.map(\.event)) }
            return written.waiters
        }
        for waiter in waiters { waiter(nil) }
    }

    func commitFailed(_ reason: StoreError) {
        let lost = locked { record?.lose(reason) }
        lost?.handler?(lost?.neverStored ?? false)
        for waiter in lost?.waiters ?? [] { waiter(reason) }
    }
}

/// Monotonic seconds, for idle times that wall-clock jumps must not shorten.
enum ProcessClock {
    static var now: Double {
        var time = timespec()
        clock_gettime(CLOCK_MONOTONIC, &time)
        return Double(time.tv_sec) + Double(time.tv_nsec) / 1e9
    }
}
