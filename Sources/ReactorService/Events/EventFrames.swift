import MicroHTTP

/// The SSE wire format of reactord, encoded once per event; the frame's bytes are then
/// shared by every stream that receives it. Payloads are single-line JSON, so one
/// `data:` line carries each.
enum EventFrames {
    static func state(seq: UInt64, json: [UInt8]) -> Frame {
        event("state", seq: seq, data: json)
    }

    static func pulse(seq: UInt64, name: String, valueJSON: [UInt8]) -> Frame {
        var data: [UInt8] = []
        data.reserveCapacity(name.utf8.count + valueJSON.count + 24)
        data.append(contentsOf: #"{"name":"#.utf8)
        StateJSONEncoder.appendString(name, into: &data)
        data.append(contentsOf: #","value":"#.utf8)
        data.append(contentsOf: valueJSON)
        data.append(UInt8(ascii: "}"))
        return event("pulse", seq: seq, data: data)
    }

    /// Sent before the server closes a stream on purpose; `reason` is `deleted`,
    /// `expired` or `shutdown`.
    static func end(reason: String) -> Frame {
        var bytes = Array("event: end\ndata: ".utf8)
        bytes += Array(#"{"reason":"#.utf8) + JSONText.string(reason) + [UInt8(ascii: "}")]
        bytes += Array("\n\n".utf8)
        return Frame(bytes)
    }

    /// The `retry:` field alone, without the blank line that would end a block: it opens the
    /// stream's first event, since a block holding only `retry:` reaches some clients (httpx-sse)
    /// as an empty message.
    static func retry(milliseconds: Int) -> Frame {
        Frame("retry: \(milliseconds)\n")
    }

    /// `event: NAME\nid: SEQ\ndata: DATA\n\n`, written into one buffer sized up front.
    private static func event(_ name: StaticString, seq: UInt64, data: [UInt8]) -> Frame {
        var bytes = [UInt8]()
        bytes.reserveCapacity(data.count + name.utf8CodeUnitCount + 40)
        bytes.append(contentsOf: "event: ".utf8)
        bytes.append(contentsOf: UnsafeBufferPointer(start: name.utf8Start, count: name.utf8CodeUnitCount))
        bytes.append(contentsOf: "\nid: ".utf8)
        StateJSONEncoder.appendUnsigned(seq, into: &bytes)
        bytes.append(contentsOf: "\ndata: ".utf8)
        bytes.append(contentsOf: data)
        bytes.append(contentsOf: "\n\n".utf8)
        return Frame(bytes)
    }
}
