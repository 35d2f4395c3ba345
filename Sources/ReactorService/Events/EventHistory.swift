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

    init(capacity: Int) { self.capacity = max(0, capacity) }

    mutating func append(_ event: RecordedEvent) {
        guard capacity > 0 else { return }
        if events.count < capacity {
            events.append(event)
        } else {
            events[start] = event
            start = (start + 1) % capacity
        }
    }

    /// The events after `seq`, or `nil` when history no longer covers all of them.
    func events(after seq: UInt64, latest: UInt64) -> [RecordedEvent]? {
        if seq == latest { return [] }
        guard seq < latest, let oldest = oldestSeq, oldest <= seq + 1 else { return nil }
        return ordered.filter { $0.seq > seq }
    }

    /// The JSON of the latest state event at or before `seq`, or nil when history no longer
    /// holds it (history is contiguous, so one found is the latest).
    func stateJSON(atOrBefore seq: UInt64) -> [UInt8]? {
        for event in ordered.reversed() where event.seq <= seq {
            if case let .state(json) = event.kind { return json }
        }
        return nil
    }

    private var oldestSeq: UInt64? { events.isEmpty ? nil : events[start].seq }

    private var ordered: ArraySlice<RecordedEvent> {
        ArraySlice(events[start...] + events[..<start])
    }
}
