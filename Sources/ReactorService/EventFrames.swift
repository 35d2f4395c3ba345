import MicroHTTP

/// The SSE wire format of reactord, encoded once per event; the frame's bytes are then
/// shared by every stream that receives it. Payloads are single-line JSON, so one
/// `data:` line carries each.
enum EventFrames {
    static func state(seq: UInt64, json: [UInt8]) -> Frame {
        event("state", seq: seq, data: json)
    }

    static func pulse(seq: UInt64, name: String, valueJSON: [UInt8]) -> Frame {
        var data = Array(#"{"name":"#.utf8)
        data += JSONText.string(name)
        data += Array(#","value":"#.utf8)
        data += valueJSON
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

    static func retry(milliseconds: Int) -> Frame {
        Frame("retry: \(milliseconds)\n\n")
    }

    private static func event(_ name: String, seq: UInt64, data: [UInt8]) -> Frame {
        var bytes = [UInt8]()
        bytes.reserveCapacity(data.count + 40)
        bytes += Array("event: \(name)\nid: \(seq)\ndata: ".utf8)
        bytes += data
        bytes += Array("\n\n".utf8)
        return Frame(bytes)
    }
}
