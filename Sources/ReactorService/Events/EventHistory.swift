import MicroHTTP
import ReactorStore

/// One event as a session keeps it for resumes. State events keep their JSON too,
/// so a stream filtered by `?fields=` can be replayed from them.
struct RecordedEvent {
    enum Kind { case state(json: [UInt8]), pulse }
    let seq: UInt64
    let kind: Kind
    let frame: Frame
}

extension RecordedEvent {
    /// An event as a durable store gave it back, framed as it was first sent.
    init(stored: StoredEvent) {
        seq = stored.seq
        if let name = stored.pulse {
            kind = .pulse
            frame = EventFrames.pulse(seq: stored.seq, name: name, valueJSON: stored.json)
        } else {
            kind = .state(json: stored.json)
            frame = EventFrames.state(seq: stored.seq, json: stored.json)
        }
    }
}

/// A bounded ring of a session's latest events, oldest first.
struct EventHistory {
    private var events: [RecordedEvent] = []
    private var start = 0
    let capacity: Int

    /// The state just before the oldest event held (the latest state while none is held), and
    /// its version, when known: what a stream that resumes from there had, for a filtered
    /// stream's first compare.
    private var stateBeforeOldest: (seq: UInt64, json: [UInt8])?

    init(capacity: Int) { self.capacity = max(0, capacity) }

    /// The state the session goes live with, at `seq`, before any event is held.
    mutating func begin(with stateJSON: [UInt8], at seq: UInt64) {
        if events.isEmpty { stateBeforeOldest = (seq, stateJSON) }
    }

    mutating func append(_ event: RecordedEvent) {
        guard capacity > 0 else { return passOver(event) }
        if events.count < capacity {
            events.append(event)
        } else {
            passOver(events[start])
            events[start] = event
            start = (start + 1) % capacity
        }
    }

    /// `event` is no longer held: the state before the oldest is the one at its version (a
    /// pulse leaves the state as it was).
    private mutating func passOver(_ event: RecordedEvent) {
        switch event.kind {
        case let .state(json): stateBeforeOldest = (event.seq, json)
        case .pulse: stateBeforeOldest = stateBeforeOldest.map { (event.seq, $0.json) }
        }
    }

    /// The events after `seq`, or `nil` when history no longer covers all of them.
    func events(after seq: UInt64, latest: UInt64) -> [RecordedEvent]? {
        if seq == latest { return [] }
        guard seq < latest, let oldest = oldestSeq, oldest <= seq + 1 else { return nil }
        return ordered.filter { $0.seq > seq }
    }

    /// The state at `seq`: the latest state event at or before it (history is contiguous, so one
    /// found is the latest), else the state before the oldest event; nil when not known.
    func stateJSON(atOrBefore seq: UInt64) -> [UInt8]? {
        for event in ordered.reversed() where event.seq <= seq {
            if case let .state(json) = event.kind { return json }
        }
        guard let before = stateBeforeOldest, seq >= before.seq else { return nil }
        return before.json
    }

    private var oldestSeq: UInt64? { events.isEmpty ? nil : events[start].seq }

    /// The oldest version whose state `stateJSON(atOrBefore:)` knows, when any event is held.
    var oldestKnownState: UInt64? {
        guard oldestSeq != nil else { return nil }
        if let before = stateBeforeOldest { return before.seq }
        for event in ordered { if case .state = event.kind { return event.seq } }
        return nil
    }

    private var ordered: ArraySlice<RecordedEvent> {
        ArraySlice(events[start...] + events[..<start])
    }
}
