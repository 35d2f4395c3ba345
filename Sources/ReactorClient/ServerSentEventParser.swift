/// One Server-Sent Event as the WHATWG rules dispatch it.
public struct ServerSentEvent: Sendable, Equatable {
    /// `event:`; `"message"` when the block names none.
    public var event: String
    /// `id:` of this block, or the last id seen before it (the stream's last event id).
    public var id: String?
    /// The `data:` lines, joined by `\n`.
    public var data: String

    /// An event of type `event` with `id` and `data`.
    public init(event: String = "message", id: String? = nil, data: String = "") {
        self.event = event
        self.id = id
        self.data = data
    }
}

/// An incremental `text/event-stream` parser (WHATWG HTML §9.2.6): feed it bytes as they
/// arrive, in chunks of any size; it returns the events those bytes complete. Lines end in
/// LF, CR LF or CR; `:` starts a comment; a blank line dispatches; a block without `data`
/// dispatches nothing; an `id` containing NUL is ignored; `retry` takes digits only.
/// A partial block at the end of a connection is dropped, as browsers do.
public struct ServerSentEventParser: Sendable {
    /// The last event id seen, kept across connections: send it as `Last-Event-ID`.
    public private(set) var lastEventID: String?
    /// The last valid `retry:` in milliseconds.
    public private(set) var retry: Int?

    private var line: [UInt8] = []
    private var sawCR = false
    private var isFirstLine = true
    private var eventType = ""
    private var data: [UInt8] = []
    private var hasData = false

    /// A parser that starts from `lastEventID` (a resumed stream's), or from none.
    public init(lastEventID: String? = nil) {
        self.lastEventID = lastEventID
    }

    /// Parses `bytes`, returning the events they complete, in order.
    public mutating func consume<Bytes: Sequence>(_ bytes: Bytes) -> [ServerSentEvent] where Bytes.Element == UInt8 {
        var events: [ServerSentEvent] = []
        for byte in bytes {
            switch byte {
            case 0x0A where sawCR:
                sawCR = false
            case 0x0A, 0x0D:
                sawCR = byte == 0x0D
                if let event = endLine() { events.append(event) }
            default:
                sawCR = false
                line.append(byte)
            }
        }
        return events
    }

    /// A new connection: forget any half-received block and line (not the last event id).
    public mutating func reset() {
        line.removeAll()
        sawCR = false
        isFirstLine = true
        eventType = ""
        data.removeAll()
        hasData = false
    }

    private mutating func endLine() -> ServerSentEvent? {
        defer { line.removeAll(keepingCapacity: true) }
        if isFirstLine {
            isFirstLine = false
            if line.starts(with: [0xEF, 0xBB, 0xBF]) { line.removeFirst(3) }
        }
        if line.isEmpty { return dispatch() }
        if line[0] == UInt8(ascii: ":") { return nil }
        let field: ArraySlice<UInt8>
        var value: ArraySlice<UInt8>
        if let colon = line.firstIndex(of: UInt8(ascii: ":")) {
            field = line[..<colon]
            value = line[(colon + 1)...]
            if value.first == UInt8(ascii: " ") { value = value.dropFirst() }
        } else {
            field = line[...]
            value = []
        }
        switch String(decoding: field, as: UTF8.self) {
        case "event":
            eventType = String(decoding: value, as: UTF8.self)
        case "data":
            if hasData { data.append(0x0A) }
            data.append(contentsOf: value)
            hasData = true
        case "id":
            if !value.contains(0) { lastEventID = String(decoding: value, as: UTF8.self) }
        case "retry":
            if !value.isEmpty, value.allSatisfy({ (0x30...0x39).contains($0) }),
                let milliseconds = Int(String(decoding: value, as: UTF8.self))
            {
                retry = milliseconds
            }
        default:
            break
        }
        return nil
    }

    private mutating func dispatch() -> ServerSentEvent? {
        defer {
            eventType = ""
            data.removeAll(keepingCapacity: true)
            hasData = false
        }
        guard hasData else { return nil }
        return ServerSentEvent(
            event: eventType.isEmpty ? "message" : eventType, id: lastEventID,
            data: String(decoding: data, as: UTF8.self))
    }
}
