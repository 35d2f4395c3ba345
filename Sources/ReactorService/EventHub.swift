#if canImport(FoundationEssentials)
import FoundationEssentials
#else
import Foundation
#endif
#if canImport(Glibc)
import Glibc
#endif
import MicroHTTP
@_spi(Lock) import ReactorCore

/// One session's events: its sequence, its last encoded state, its pulse counts, its
/// history for resumes and its subscribers. Each change is framed once here and the same
/// bytes are queued on every stream; only a `?fields=` stream gets its own framing, made
/// once per distinct field set.
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
    }

    // Recursive: a stream may report its end synchronously from inside `send` or `close`.
    private let lock = Lock.make(recursive: true)
    private var seq: UInt64 = 0
    private var stateJSON: [UInt8] = Array("{}".utf8)
    /// Each pulse's last update count, by name: a state has few pulses, so the first is kept
    /// inline and any others in an array (a dictionary cost every session ~120 bytes more).
    private var firstPulse: (name: String, count: UInt)?
    private var morePulses: [(name: String, count: UInt)] = []
    private var history: EventHistory
    private var subscribers: [ObjectIdentifier: Subscriber] = [:]
    /// Until the session is live, states only set the baseline: a new session is version 0.
    private var isLive = false
    private var isEnded = false
    private var lastActivity = ProcessClock.now
    private let metrics: ServiceMetrics

    init(historyLength: Int, metrics: ServiceMetrics) {
        history = EventHistory(capacity: historyLength)
        self.metrics = metrics
    }

    var snapshot: Snapshot { locked { Snapshot(version: seq, stateJSON: stateJSON) } }

    var subscriberCount: Int { locked { subscribers.count } }

    func goLive() { locked { isLive = true } }

    func touch() { locked { lastActivity = ProcessClock.now } }

    /// True when nobody listens and nothing happened since `cutoff`.
    func isIdle(since cutoff: Double) -> Bool {
        locked { subscribers.isEmpty && lastActivity < cutoff }
    }

    /// A new state of the reactor, already encoded. Called serially, from the reactor's pipeline.
    func publish(_ state: EncodedState) {
        locked {
            guard !isEnded else { return }
            defer {
                stateJSON = state.json
                for pulse in state.pulses { setPulseCount(pulse.updatedCount, for: pulse.name) }
            }
            guard isLive else { return }
            var events: [RecordedEvent] = []
            if state.json != stateJSON {
                seq += 1
                events.append(RecordedEvent(
                    seq: seq, kind: .state(json: state.json),
                    frame: EventFrames.state(seq: seq, json: state.json)))
            }
            for pulse in state.pulses where pulseCount(for: pulse.name) != pulse.updatedCount {
                seq += 1
                let value = StateEncoding.encodeValue(pulse.value)
                events.append(RecordedEvent(
                    seq: seq, kind: .pulse,
                    frame: EventFrames.pulse(seq: seq, name: pulse.name, valueJSON: value)))
            }
            // The streams' resumes go out together once all are queued (see batchingResumes).
            EventStream.batchingResumes {
                for event in events {
                    history.append(event)
                    broadcast(event)
                }
            }
        }
    }

    /// Adds a stream: `retry`, then what it missed since `lastEventID` when history covers
    /// it, else the current state.
    func subscribe(_ stream: EventStream, lastEventID: UInt64?, filter: FieldFilter?, retry: Frame) {
        let key = ObjectIdentifier(stream)
        let added: Bool = locked {
            guard !isEnded else {
                stream.close(finalFrame: EventFrames.end(reason: "deleted"))
                return false
            }
            stream.send(retry)
            var subscriber = Subscriber(stream: stream, filter: filter)
            var views = FilteredViews()
            if let lastEventID, let missed = history.events(after: lastEventID, latest: seq) {
                for event in missed { deliver(event, to: &subscriber, views: &views) }
            } else {
                let current = RecordedEvent(
                    seq: seq, kind: .state(json: stateJSON),
                    frame: EventFrames.state(seq: seq, json: stateJSON))
                deliver(current, to: &subscriber, views: &views)
            }
            subscribers[key] = subscriber
            lastActivity = ProcessClock.now
            return true
        }
        guard added else { return }
        metrics.subscribers.increment()
        stream.onClose { [weak self] _ in self?.unsubscribe(key) }
    }

    /// Ends every stream with `event: end`; later publishes and subscribes are refused.
    func end(reason: String) {
        let ended: [Subscriber] = locked {
            isEnded = true
            defer { subscribers.removeAll() }
            return Array(subscribers.values)
        }
        let frame = EventFrames.end(reason: reason)
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

    private typealias FilteredViews = [FieldFilter: (json: [UInt8], frame: Frame)]

    private func broadcast(_ event: RecordedEvent) {
        var views = FilteredViews()
        var delivered: Int64 = 0
        for key in subscribers.keys {
            guard var subscriber = subscribers[key] else { continue }
            if deliver(event, to: &subscriber, views: &views) { delivered += 1 }
            subscribers[key]?.lastFiltered = subscriber.lastFiltered
        }
        if delivered > 0 { metrics.eventsDelivered.increment(by: delivered) }
    }

    /// Queues one event on one stream, framing a filtered state at most once per field set.
    @discardableResult
    private func deliver(_ event: RecordedEvent, to subscriber: inout Subscriber,
                         views: inout FilteredViews) -> Bool {
        guard let filter = subscriber.filter, case let .state(json) = event.kind else {
            return subscriber.stream.send(event.frame)
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
        return subscriber.stream.send(view.frame)
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

/// Monotonic seconds, for idle times that wall-clock jumps must not shorten.
enum ProcessClock {
    static var now: Double {
        var time = timespec()
        clock_gettime(CLOCK_MONOTONIC, &time)
        return Double(time.tv_sec) + Double(time.tv_nsec) / 1e9
    }
}
