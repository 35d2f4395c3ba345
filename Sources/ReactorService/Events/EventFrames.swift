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

    /// `event: NAME\nid: SEQ\ndata: DATA\n\n`, written into one buffer sized up front, by
    /// copies of raw bytes: appending a string's `utf8` cost ~170 instructions a piece (and
    /// `Array(unsafeUninitializedCapacity:)` ~530 of runtime lookups, against `reserveCapacity`).
    private static func event(_ name: StaticString, seq: UInt64, data: [UInt8]) -> Frame {
        var digits: (UInt64, UInt64, UInt64) = (0, 0, 0)  // UInt64.max has 20 digits
        let digitCount = withUnsafeMutableBytes(of: &digits) { Self.decimal(seq, into: $0) }
        var bytes = [UInt8]()
        bytes.reserveCapacity(7 + name.utf8CodeUnitCount + 5 + digitCount + 7 + data.count + 2)
        Self.eventField.withUnsafeBufferPointer { bytes.append(contentsOf: $0) }
        bytes.append(contentsOf: UnsafeBufferPointer(start: name.utf8Start, count: name.utf8CodeUnitCount))
        Self.idField.withUnsafeBufferPointer { bytes.append(contentsOf: $0) }
        withUnsafeBytes(of: &digits) { raw in
            bytes.append(
                contentsOf: UnsafeBufferPointer(rebasing: raw.bindMemory(to: UInt8.self)[(24 - digitCount)...]))
        }
        Self.dataField.withUnsafeBufferPointer { bytes.append(contentsOf: $0) }
        data.withUnsafeBufferPointer { bytes.append(contentsOf: $0) }
        Self.blankLine.withUnsafeBufferPointer { bytes.append(contentsOf: $0) }
        return Frame(bytes)
    }

    private static let eventField: [UInt8] = Array("event: ".utf8)
    private static let idField: [UInt8] = Array("\nid: ".utf8)
    private static let dataField: [UInt8] = Array("\ndata: ".utf8)
    private static let blankLine: [UInt8] = Array("\n\n".utf8)

    /// `value`'s digits at the end of `buffer` (24 bytes); their count.
    private static func decimal(_ value: UInt64, into buffer: UnsafeMutableRawBufferPointer) -> Int {
        var rest = value
        var count = 0
        repeat {
            buffer[23 - count] = UInt8(ascii: "0") &+ UInt8(rest % 10)
            rest /= 10
            count += 1
        } while rest > 0
        return count
    }
}
