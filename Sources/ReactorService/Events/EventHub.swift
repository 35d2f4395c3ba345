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
///
/// Streams are sent to and closed outside the lock (a stream may report its end from inside
/// `send` or `close`, which comes back here): the work is queued under the lock and carried out,
/// in that order, by one thread at a time (`deliver`), so each stream gets its frames in order.
final class EventHub: Sendable {
    struct Snapshot {
        let version: UInt64
        let stateJSON: [UInt8]
        /// With a durable store, the count of changes made up to this state (see
        /// `whenCommitted(through:_:)`); 0 otherwise.
        var mark: UInt64 = 0
    }

    fileprivate struct Subscriber {
        let stream: EventStream
        let filter: FieldFilter?
        /// The filtered state last sent, so a filtered stream only hears of its fields' changes.
        var lastFiltered: [UInt8]?
        /// The `retry:` line, until it goes out in front of the stream's first event.
        var retry: Frame?

        /// `end`, behind the `retry:` line when it is the stream's first event, as any first event is.
        func lastFrame(_ end: Frame) -> Frame { retry.map { Frame($0.bytes + end.bytes) } ?? end }
    }

    /// What is to be done to a stream once the lock is released.
    fileprivate enum StreamWork {
        /// `counted`: a broadcast event, counted as delivered when the stream queues it.
        case send(EventStream, Frame, counted: Bool)
        case close(EventStream, final: Frame?)

        var byteCount: Int {
            switch self {
            case let .send(_, frame, _): frame.bytes.count
            case let .close(_, final): final?.bytes.count ?? 0
            }
        }
    }

    /// Everything that changes, behind the hub's lock.
    fileprivate struct State {
        /// The reactor's latest event and state.
        var seq: UInt64 = 0
        var stateJSON: [UInt8] = Array("{}".utf8)
        /// With a durable store: the session as the journal writes it, with its unwritten events.
        /// One reference here, so the memory store pays 8 bytes.
        let record: SessionRecord?
        /// Each pulse's last update count, by name: a state has few pulses, so the first is kept
        /// inline and any others in an array (a dictionary cost every session ~120 bytes more).
        var firstPulse: (name: String, count: UInt)?
        var morePulses: [(name: String, count: UInt)] = []
        var history: EventHistory
        var subscribers: [ObjectIdentifier: Subscriber] = [:]
        /// Until the session is live, states only set the baseline: a new session is version 0.
        var isLive = false
        /// Whether the reactor has given a state yet (see `publish(_:onlyIfFirst:)`).
        var hasPublished = false
        var isEnded = false
        /// Ended with the session living on in the store (unloaded, or let go without `event: end`):
        /// a subscribe is turned back to look it up again.
        var livesOn = false
        /// A loaded session that no action, read or subscriber has used since: its last activity
        /// is still the stored one (a read of its history loads it without using it).
        var isUnusedSinceLoad = false
        /// A thread is carrying out the outbox: another that adds to it leaves the work to it.
        /// (Beside the other flags: a word they share, not one of its own.)
        var isDelivering = false
        /// Streams found for this session and not yet subscribed (`reserveSubscriber`): they
        /// keep it in memory as a subscriber does. (Beside the flags, in the word they share.)
        var reservations: UInt16 = 0
        var lastActivity = ProcessClock.now
        /// The session's action log, when it keeps one (a follower's hub does not).
        let actionLog: SessionActionLog?
        /// Stream work made under the lock, in order, not yet taken by the delivering thread.
        var outbox: [StreamWork] = []
    }

    private let state: Guarded<State>
    private let metrics: ServiceMetrics

    /// `record`: the session's place in a durable store (nil: memory only). `restoring`: the
    /// session as the store kept it, whose version and history continue here.
    init(
        historyLength: Int, metrics: ServiceMetrics, record: sending SessionRecord? = nil,
        restoring stored: StoredSession? = nil, actionLog: sending SessionActionLog? = nil
    ) {
        var state = State(record: record, history: EventHistory(capacity: historyLength), actionLog: actionLog)
        if let stored {
            state.isUnusedSinceLoad = true
            state.seq = stored.version
            state.stateJSON = stored.stateJSON
            for event in Self.unbrokenTail(of: stored.events, endingAt: stored.version) {
                state.history.append(RecordedEvent(stored: event))
            }
        }
        self.state = Guarded(state)
        self.metrics = metrics
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
    var latest: Snapshot {
        locked { Snapshot(version: $0.seq, stateJSON: $0.stateJSON, mark: $0.record?.madeMark ?? 0) }
    }

    /// The state clients may see: the latest committed one.
    var snapshot: Snapshot { locked { Snapshot(version: $0.publishedSeq, stateJSON: $0.publishedJSON) } }

    var subscriberCount: Int { locked { $0.subscribers.count } }
    /// No subscriber, and no stream on its way to subscribing (`reserveSubscriber`).
    var isUnwatched: Bool { locked { $0.isUnwatched } }

    /// A durable session not written yet (its first write is queued or in flight).
    var isNewSession: Bool { locked { $0.record?.isNew ?? false } }

    /// From now on a changed state is an event. A restored session whose state changed while its
    /// reactor was built (the current user changed while it was stored) publishes that change
    /// now, as its next event, written like any other: else its answers would show a state the
    /// store and its streams never got, under the stored version.
    func goLive() {
        let changedWhileRestoring: [UInt8]? = locked { state in
            state.isLive = true
            defer { state.history.begin(with: state.stateJSON, at: state.seq) }
            guard let record = state.record, !record.isNew, record.published.json != state.stateJSON else {
                return nil
            }
            defer { state.stateJSON = record.published.json }
            return state.stateJSON
        }
        if let changedWhileRestoring {
            ChangeCause.with(SessionActionLog.userCause) {
                publish(EncodedState(json: changedWhileRestoring, pulses: []))
            }
        }
    }

    func touch() { locked { $0.used() } }

    /// Loaded from the store and not used since (see `State.isUnusedSinceLoad`).
    var isUnusedSinceLoad: Bool { locked { $0.isUnusedSinceLoad } }

    /// Until `releaseWrites`, the journal takes no change of this session: a request's change
    /// and the answer kept for it under its idempotency key go in one transaction.
    func holdWrites() { locked { $0.record?.isHeld = true } }

    /// An action starts: until `releaseWrites`, the journal takes no change of this session, so
    /// that the action's log entry goes in the same transaction as its change. Returns the
    /// cause its changes carry (0 when the session keeps no log).
    func beginAction() -> UInt64 {
        locked { state in
            guard let actionLog = state.actionLog else { return 0 }
            state.record?.isHeld = true
            return actionLog.begin()
        }
    }

    /// Ends `holdWrites` (or `beginAction`), adding `answer` to the changes to write, and the log
    /// entry of the action that ran, from `source` (its fields in `redacted` hidden).
    func releaseWrites(
        adding answer: StoredAnswer?, logging source: ActionSource? = nil, redacting redacted: Set<String> = []
    ) {
        locked { state in
            if let source { state.actionLog?.end(source, version: state.seq, redacting: redacted) }
            guard let record = state.record else { return }
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
        locked { $0.actionLog?.page(after: version, limit: limit) ?? [] }
    }

    /// The state at `version`, from what this hub holds (the memory store's history).
    func state(at version: UInt64) -> StateAtVersion {
        locked { state in
            if version == state.publishedSeq { return .found(state.publishedJSON) }
            if version > state.publishedSeq { return .notYet(current: state.publishedSeq) }
            if let json = state.history.stateJSON(atOrBefore: version) { return .found(json) }
            return .notRetained(oldest: state.history.oldestKnownState ?? state.publishedSeq)
        }
    }

    /// True when nobody listens and nothing happened since `cutoff`.
    func isIdle(since cutoff: Double) -> Bool {
        locked { $0.isUnwatched && $0.lastActivity < cutoff }
    }

    /// When nobody listens: the time of the last activity, to pick the least recently used.
    var idleSince: Double? { locked { $0.isUnwatched ? $0.lastActivity : nil } }

    /// Ends the hub so that its session can leave memory, when nobody listens, nothing happened
    /// since `cutoff` and everything is written: true then. Its last activity follows it to the
    /// store, however recent (its writes carry it only to an eighth of the TTL, and the store
    /// expires it by the stored time once it is out of memory).
    ///
    /// `closingStreams`: its subscribers do not keep it (a hand-over to the node their requests
    /// reach now); their streams close without `event: end`, and their clients resume there.
    func endForUnload(idleSince cutoff: Double, closingStreams: Bool = false) -> Bool {
        let closed: Int? = locked { state in
            guard !state.isEnded, closingStreams || state.isUnwatched, state.lastActivity < cutoff else { return nil }
            if let record = state.record {
                guard !record.isNew, !record.isQueued, record.inFlight == nil, record.pending.isEmpty,
                    record.lost == nil
                else { return nil }
                let lastActive = state.lastActiveWallTime
                if lastActive > record.storedLastActive, record.activityResolution.isFinite {
                    record.journal.write([.activity(id: record.id, lastActive: lastActive)]) { _ in }
                }
            }
            state.isEnded = true
            // A stream reserved or subscribing now looks the session up again.
            state.livesOn = true
            return state.closeSubscribers(final: nil)
        }
        guard let closed else { return false }
        if closed > 0 { metrics.subscribers.decrement(by: Double(closed)) }
        return true
    }

    /// With a durable store, queues a write of the last activity when the stored one is behind
    /// by more than the record's resolution, so a session that is only watched does not expire
    /// after a restart. `exactly`: when it is behind at all (the server stops: a read's activity
    /// would otherwise be lost with the process).
    func refreshStoredActivity(exactly: Bool = false) {
        locked { state in
            guard let record = state.record, !state.isEnded else { return }
            let behind = state.lastActiveWallTime - record.storedLastActive
            guard behind > (exactly ? 0 : record.activityResolution) else { return }
            if exactly { record.activityDue = true }
            markDirty(record)
        }
    }

    /// Whether the reactor has given this hub a state yet.
    var hasPublished: Bool { locked { $0.hasPublished } }

    /// A new state of the reactor, already encoded. Called serially, from the reactor's pipeline;
    /// `onlyIfFirst`: the session's state until its reactor gives one (see `ReactorSession.init`),
    /// dropped if the reactor has given one meanwhile.
    func publish(_ encoded: EncodedState, onlyIfFirst: Bool = false) {
        // A pulse's value is the state's (not Sendable): it is encoded out here, before the lock,
        // for each pulse whose count differs from the last one seen. Whether it makes an event is
        // decided below, in the same section as the state's, so both see one `isLive`. (Publishes
        // of one hub come one at a time, from its reactor's gate: the counts do not move between.)
        var changedPulses: [(name: String, count: UInt, json: [UInt8])] = []
        for pulse in encoded.pulses {
            let name = pulse.name
            let count = pulse.updatedCount
            if locked({ state in state.pulseCount(for: name) != count }) {
                changedPulses.append((name, count, StateEncoding.encodeValue(pulse.value)))
            }
        }
        let json = encoded.json
        locked { state in
            guard !state.isEnded, !(onlyIfFirst && state.hasPublished) else { return }
            defer {
                state.hasPublished = true
                state.stateJSON = json
                for pulse in changedPulses { state.setPulseCount(pulse.count, for: pulse.name) }
            }
            guard state.isLive else {
                if let record = state.record, record.isNew { markDirty(record) }  // the new session's first write
                return
            }
            var events: [RecordedEvent] = []
            var stored: [StoredEvent] = []  // with a durable store: the same events as it keeps them
            if json != state.stateJSON {
                state.seq += 1
                events.append(
                    RecordedEvent(
                        seq: state.seq, kind: .state(json: json),
                        frame: EventFrames.state(seq: state.seq, json: json)))
                if state.record != nil { stored.append(StoredEvent(seq: state.seq, pulse: nil, json: json)) }
            }
            for (name, _, value) in changedPulses {
                state.seq += 1
                events.append(
                    RecordedEvent(
                        seq: state.seq, kind: .pulse,
                        frame: EventFrames.pulse(seq: state.seq, name: name, valueJSON: value)))
                if state.record != nil { stored.append(StoredEvent(seq: state.seq, pulse: name, json: value)) }
            }
            if let actionLog = state.actionLog, let first = events.first {
                actionLog.record(first: first.seq, last: state.seq, cause: ChangeCause.current)
            }
            if let record = state.record {
                guard !events.isEmpty else { return }
                if record.isNew, events[0].seq == 1 { record.firstState = state.stateJSON }
                record.pending += zip(events, stored).map { PendingEvent(event: $0, stored: $1) }
                markDirty(record)
                return
            }
            state.append(events)
        }
    }

    /// A follower's hub (cluster mode: the session lives on another node): events that node
    /// committed, as the store gave them back, and where the session stands after them.
    func follow(_ events: [StoredEvent], version: UInt64, stateJSON json: [UInt8]) {
        locked { state in
            guard !state.isEnded, version > state.seq else { return }
            let fresh = events.filter { $0.seq > state.seq }
            state.seq = version
            state.stateJSON = json
            state.append(fresh.map(RecordedEvent.init(stored:)))
        }
    }

    private func markDirty(_ record: SessionRecord) {
        record.madeMark &+= 1
        guard !record.isQueued else { return }
        record.isQueued = true
        record.journal.markDirty(self)
    }

    /// Keeps the session in memory, as a subscriber would, until the stream found for it
    /// subscribes with the reservation or is dropped unopened: between a stream's lookup and its
    /// opening (a hop between threads) an unload would leave it nothing to subscribe to, with its
    /// `200` already sent. Nil when the session has left already: look it up again.
    func reserveSubscriber() -> SubscriberReservation? {
        let reserved = locked { state in
            guard !state.isEnded, state.reservations < .max else { return false }
            state.reservations += 1
            return true
        }
        return reserved ? SubscriberReservation(self) : nil
    }

    fileprivate func cancelReservation() {
        locked { $0.reservations -= 1 }
    }

    /// Adds a stream: what it missed since `lastEventID` when history covers it, else the
    /// current state; `retry` opens the first event it gets (a resume that missed nothing
    /// gets it with the next one). `reservation`, this hub's, is used up.
    /// False, leaving the stream alone, when the session left memory meanwhile but lives on
    /// (unloaded without a reservation, or let go): the caller looks it up again, which loads it.
    func subscribe(
        _ stream: EventStream, lastEventID: UInt64?, filter: FieldFilter?, retry: Frame,
        reservation: SubscriberReservation? = nil
    ) -> Bool {
        let key = ObjectIdentifier(stream)
        let outcome: Subscription = locked { state in
            if let reservation, reservation.hub === self, reservation.useUp() { state.reservations -= 1 }
            guard !state.isEnded else { return state.livesOn ? .sessionLeft : .sessionOver }
            var subscriber = Subscriber(stream: stream, filter: filter, retry: retry)
            if let lastEventID, let missed = state.history.events(after: lastEventID, latest: state.publishedSeq) {
                // A filtered stream compares with what the client had at `lastEventID`, when
                // history still holds that state, so an unchanged field is not sent again.
                if let filter, let had = state.history.stateJSON(atOrBefore: lastEventID) {
                    subscriber.lastFiltered = filter.apply(to: had)
                }
                // A resume that missed more than the stream's queue holds would overflow it before
                // its first byte went out, and so would every retry: it gets the oldest of them and
                // the stream ends, so that each reconnection with the last id it saw gets further.
                // Each part is at most half the queue, or one event larger than that alone.
                let budget = stream.queueLimit / 2
                var queued = 0
                for event in missed {
                    let before = state.outbox.count
                    // A view is one event's: a cache shared across events sent the first
                    // event's fields for every later one, so only the first change arrived.
                    var views = FilteredViews()
                    state.deliver(event, to: &subscriber, views: &views)
                    let added = state.outbox[before...].reduce(0) { $0 + $1.byteCount }
                    if queued > 0, queued + added > budget {
                        state.outbox.removeSubrange(before...)
                        state.outbox.append(.close(stream, final: nil))
                        return .replayedInPart
                    }
                    queued += added
                }
            } else {
                var views = FilteredViews()
                let current = RecordedEvent(
                    seq: state.publishedSeq, kind: .state(json: state.publishedJSON),
                    frame: EventFrames.state(seq: state.publishedSeq, json: state.publishedJSON))
                state.deliver(current, to: &subscriber, views: &views)
            }
            state.subscribers[key] = subscriber
            state.used()
            return .added
        }
        switch outcome {
        case .added:
            metrics.subscribers.increment()
            stream.onClose { [weak self] _ in self?.unsubscribe(key) }
            return true
        case .replayedInPart:
            return true
        case .sessionOver:
            stream.close(finalFrame: Frame(retry.bytes + EventFrames.end(reason: "deleted").bytes))
            return true
        case .sessionLeft:
            return false
        }
    }

    /// What `subscribe` did with a stream.
    private enum Subscription {
        case added
        /// It was sent the oldest of what it missed and ends: it reconnects for the rest.
        case replayedInPart
        /// Deleted: the stream ends with `event: end`.
        case sessionOver
        /// Unloaded meanwhile but stored: the stream is left alone, to be added where it is loaded.
        case sessionLeft
    }

    /// Ends every stream, with `event: end` when `reason` is given (the session is over),
    /// else with a plain close that clients answer by reconnecting and resuming; later
    /// publishes and subscribes are refused.
    func end(reason: String?) {
        let frame = reason.map(EventFrames.end(reason:))
        let (ended, waiters): (Int, [Journal.Completion]) = locked { state in
            state.isEnded = true
            // Not over (a lease lost, a commit lost, a stop): a subscribe coming now looks it up again.
            if reason == nil { state.livesOn = true }
            return (state.closeSubscribers(final: frame), state.record?.dropPending() ?? [])
        }
        for waiter in waiters { waiter(.unavailable("the session ended before its last change was stored")) }
        if ended > 0 { metrics.subscribers.decrement(by: Double(ended)) }
    }

    /// Ends one stream with `event: end` (its token expired), behind what is queued for it. One
    /// this hub no longer has (its session let go of it) is closed as it is.
    func end(_ stream: EventStream, reason: String) {
        let end = EventFrames.end(reason: reason)
        let removed: Bool = locked { state in
            guard let subscriber = state.subscribers.removeValue(forKey: ObjectIdentifier(stream)) else { return false }
            state.outbox.append(.close(stream, final: subscriber.lastFrame(end)))
            return true
        }
        if removed { metrics.subscribers.decrement() } else { stream.close(finalFrame: end) }
    }

    private func unsubscribe(_ key: ObjectIdentifier) {
        let removed: Bool = locked { state in
            state.used()
            return state.subscribers.removeValue(forKey: key) != nil
        }
        if removed { metrics.subscribers.decrement() }
    }

    /// Calls `body` once, when the journal loses a change of this session (a failed commit),
    /// telling whether the session was never stored at all.
    func onLost(_ body: @escaping @Sendable (_ neverStored: Bool) -> Void) {
        // Its first write (a new session's, or a restored one's changed state) may have failed
        // already, before the session was put where this is set.
        let lostAlready: Bool? = locked { state in
            guard let record = state.record else { return nil }
            if record.lost != nil { return record.isNew }
            record.onLost = body
            return nil
        }
        if let neverStored = lostAlready { body(neverStored) }
    }

    /// Calls `completion` once the changes up to `mark` (a request's own, from its `Snapshot`;
    /// nil: every change made so far) are durable (nil), or lost (why), on the journal's thread;
    /// at once, on this thread, when there is nothing to wait for. The write that carries them
    /// decides, not a later one, which may fail after it committed.
    func whenCommitted(through mark: UInt64? = nil, _ completion: @escaping Journal.Completion) {
        let now: StoreError?? = locked { state in
            guard let record = state.record else { return .some(nil) }
            let mark = mark ?? record.madeMark
            if record.committedMark >= mark { return .some(nil) }
            if let inFlight = record.inFlight, inFlight.mark >= mark {
                record.inFlight?.waiters.append(completion)
                return .none
            }
            if let lost = record.lost { return .some(lost) }
            // Not `isQueued` alone: while another action holds the writes, the journal's take
            // unqueues the record (`wantedWhileHeld`).
            if !state.isEnded, record.awaitsTake {
                record.pendingWaiters.append(completion)
                return .none
            }
            // Ended before the journal took it (a delete, a lease lost, a stop): never written.
            return .some(.unavailable("the session ended before its change was stored"))
        }
        if case let .some(result) = now { completion(result) }
    }

    fileprivate typealias FilteredViews = [FieldFilter: (json: [UInt8], frame: Frame)]

    /// Runs `body` under the lock, then carries out the stream work it queued, unless another
    /// thread is carrying out this hub's work already (it takes this too, in order).
    private func locked<T: Sendable>(_ body: (inout sending State) -> T) -> T {
        var work: [StreamWork] = []
        let result = state.withLock { state in
            let result = body(&state)
            if !state.outbox.isEmpty, !state.isDelivering {
                state.isDelivering = true
                swap(&work, &state.outbox)
            }
            return result
        }
        if !work.isEmpty { deliver(work) }
        return result
    }

    /// Sends and closes, with the lock released, then whatever was queued meanwhile, until
    /// nothing is left; the one thread that does so for this hub (`isDelivering`).
    private func deliver(_ first: [StreamWork]) {
        var work = first
        repeat {
            var delivered: Int64 = 0
            // Resumes go out together once all are queued.
            if work.count > 1 {
                EventStream.batchingResumes { delivered = Self.carryOut(work) }
            } else {
                delivered = Self.carryOut(work)
            }
            if delivered > 0 { metrics.eventsDelivered.increment(by: delivered) }
            work.removeAll(keepingCapacity: true)
        } while state.withLock { state in
            // Either way the emptied array goes back to the hub with its capacity.
            swap(&work, &state.outbox)
            if work.isEmpty { state.isDelivering = false }
            return !work.isEmpty
        }
    }

    /// How many broadcast events were queued on open streams.
    private static func carryOut(_ work: [StreamWork]) -> Int64 {
        var delivered: Int64 = 0
        for item in work {
            switch item {
            case let .send(stream, frame, counted): if stream.send(frame), counted { delivered += 1 }
            case let .close(stream, frame): stream.close(finalFrame: frame)
            }
        }
        return delivered
    }
}

/// A stream's claim on its session's place in memory until it subscribes (`EventHub.reserveSubscriber`);
/// given back when it is dropped unused (a stream that never opened).
final class SubscriberReservation: Sendable {
    let hub: EventHub
    private let isUsed = Locked(false)

    fileprivate init(_ hub: EventHub) { self.hub = hub }

    /// True the first time: the hub then counts it as used.
    fileprivate func useUp() -> Bool {
        isUsed.withLock { used in
            defer { used = true }
            return !used
        }
    }

    deinit {
        if useUp() { hub.cancelReservation() }
    }
}

extension EventHub.State {
    /// No subscriber, and no stream on its way to subscribing.
    var isUnwatched: Bool { subscribers.isEmpty && reservations == 0 }

    /// What clients may see: the latest committed event and state (the latest, in memory).
    fileprivate var publishedSeq: UInt64 { record?.published.seq ?? seq }
    fileprivate var publishedJSON: [UInt8] { record?.published.json ?? stateJSON }

    /// Closes every subscriber's stream, behind whatever is still queued for it, after `final`
    /// when there is one; returns how many there were.
    fileprivate mutating func closeSubscribers(final: Frame?) -> Int {
        for subscriber in subscribers.values {
            outbox.append(.close(subscriber.stream, final: final.map(subscriber.lastFrame)))
        }
        defer { subscribers.removeAll() }
        return subscribers.count
    }

    fileprivate mutating func used() {
        lastActivity = ProcessClock.now
        isUnusedSinceLoad = false
    }

    /// Seconds since 1970 of the last activity; now while anyone listens.
    fileprivate var lastActiveWallTime: Double {
        if !subscribers.isEmpty { return WallClock.now }
        if isUnusedSinceLoad, let record { return record.storedLastActive }
        return WallClock.now - (ProcessClock.now - lastActivity)
    }

    /// Appends committed (or, in memory, new) events to the history and queues them on
    /// every stream.
    fileprivate mutating func append(_ events: [RecordedEvent]) {
        for event in events {
            history.append(event)
            broadcast(event)
        }
    }

    private mutating func broadcast(_ event: RecordedEvent) {
        var views = EventHub.FilteredViews()
        for key in subscribers.keys {
            guard var subscriber = subscribers[key] else { continue }
            deliver(event, to: &subscriber, views: &views, counted: true)
            subscribers[key] = subscriber
        }
    }

    /// Queues one event for one stream, framing a filtered state at most once per field set.
    fileprivate mutating func deliver(
        _ event: RecordedEvent, to subscriber: inout EventHub.Subscriber,
        views: inout EventHub.FilteredViews, counted: Bool = false
    ) {
        guard let filter = subscriber.filter, case let .state(json) = event.kind else {
            return send(event.frame, to: &subscriber, counted: counted)
        }
        let view: (json: [UInt8], frame: Frame)
        if let cached = views[filter] {
            view = cached
        } else {
            let json = filter.apply(to: json)
            view = (json, EventFrames.state(seq: event.seq, json: json))
            views[filter] = view
        }
        guard view.json != subscriber.lastFiltered else { return }
        subscriber.lastFiltered = view.json
        send(view.frame, to: &subscriber, counted: counted)
    }

    /// Queues `frame`, behind the `retry:` line if the stream has not had it yet: in one frame,
    /// so that no heartbeat comes between the two and ends the block early.
    private mutating func send(_ frame: Frame, to subscriber: inout EventHub.Subscriber, counted: Bool) {
        guard let retry = subscriber.retry else {
            return outbox.append(.send(subscriber.stream, frame, counted: counted))
        }
        subscriber.retry = nil
        outbox.append(.send(subscriber.stream, Frame(retry.bytes + frame.bytes), counted: counted))
    }

    fileprivate func pulseCount(for name: String) -> UInt? {
        if let firstPulse, firstPulse.name == name { return firstPulse.count }
        for entry in morePulses where entry.name == name { return entry.count }
        return nil
    }

    fileprivate mutating func setPulseCount(_ count: UInt, for name: String) {
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
}

extension EventHub: Journaled {
    func takeChange() -> SessionWrite? {
        locked { state in
            guard let record = state.record else { return nil }
            record.isQueued = false
            if record.isHeld {
                record.wantedWhileHeld = true
                return nil
            }
            // An ended session writes nothing more: a deleted one is gone, and an unloaded one
            // (a lost commit) must not store the state whose change was lost, nor may one whose
            // commit was lost before its unload ends it.
            guard !state.isEnded, record.lost == nil else { return nil }
            return record.take(
                state: state.stateJSON, version: state.seq, lastActive: state.lastActiveWallTime,
                loggedActions: state.actionLog?.take() ?? [])
        }
    }

    func didCommit() {
        let waiters: [Journal.Completion] = locked { state in
            guard let record = state.record, let written = record.committed() else { return [] }
            if !state.isEnded { state.append(written.events.map(\.event)) }
            return written.waiters
        }
        for waiter in waiters { waiter(nil) }
    }

    func commitFailed(_ reason: StoreError) {
        let lost = locked { $0.record?.lose(reason) }
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
