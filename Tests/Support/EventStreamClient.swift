import Foundation

/// One Server-Sent Event as a client parses it (WHATWG rules: `field: value` lines, a blank
/// line dispatches, `:` starts a comment, `retry` alone dispatches nothing).
public struct TestEvent: Equatable {
    public var event = "message"
    public var id: String?
    public var data = ""
    /// The `retry:` sent in this event's own block, if any.
    public var retry: Int?

    public init() {}

    public var object: [String: Any] {
        (try? JSONSerialization.jsonObject(with: Data(data.utf8))) as? [String: Any] ?? [:]
    }
}

/// A subscriber on its own connection: reads the chunked body through `ResponseParser` and
/// parses it into events.
public final class EventStreamClient {
    public let status: Int
    public let headers: [String: String]
    public let socket: TestSocket
    private var parser = ResponseParser()
    private var consumed = 0  // bytes of parser.body already moved to `pending`
    private var pending: [UInt8] = []
    private var current = TestEvent()
    private var hasFields = false
    public private(set) var comments: [String] = []
    /// The last `retry:` the server sent; a block of only `retry` dispatches no event.
    public private(set) var retry: Int?
    /// Blocks that held a `retry:` and no other field: some clients (httpx-sse) hand each to
    /// their user as an empty message.
    public private(set) var retryOnlyBlocks = 0
    public private(set) var ended = false

    public init(port: UInt16, path: String, headers: [String: String] = [:], timeout: Double = 5) throws {
        socket = try TestSocket(port: port, timeout: timeout)
        var head = "GET \(path) HTTP/1.1\r\nHost: 127.0.0.1:\(port)\r\nAccept: text/event-stream\r\n"
        for (name, value) in headers { head += "\(name): \(value)\r\n" }
        try socket.write(head + "\r\n")
        while parser.status == nil {
            do {
                parser.feed(try socket.receive())
            } catch TestSocket.Failure.closed {
                parser.endOfStream()
                if parser.status == nil { throw TestSocket.Failure.closed }
            }
        }
        status = parser.status ?? 0
        self.headers = TestResponse(parser).headers
        if parser.isComplete { ended = true }
        takeBody()
    }

    /// The next event, or `nil` when the stream ends or nothing comes within the timeout.
    public func next(timeout: Double = 5) -> TestEvent? {
        // A deadline, not only a read timeout: heartbeat comments arrive more often than the
        // timeout and would otherwise keep this waiting forever for an event that never comes.
        let deadline = monotonicNow() + timeout
        while true {
            if let event = parsePending() { return event }
            guard !ended else { return nil }
            let left = deadline - monotonicNow()
            if left <= 0 { return nil }
            socket.setTimeout(max(left, 0.001))
            do {
                parser.feed(try socket.receive())
                takeBody()
                if parser.isComplete { ended = true }
            } catch {
                if case TestSocket.Failure.timeout = error { return nil }
                ended = true
            }
        }
    }

    /// Events until `count` of them or the timeout, skipping none.
    public func take(_ count: Int, timeout: Double = 5) -> [TestEvent] {
        var events: [TestEvent] = []
        let deadline = Date().addingTimeInterval(timeout)
        while events.count < count, Date() < deadline, let event = next(timeout: deadline.timeIntervalSinceNow) {
            events.append(event)
        }
        return events
    }

    /// Every event that arrives until `quiet` seconds pass with none.
    public func drain(quiet: Double = 0.3) -> [TestEvent] {
        var events: [TestEvent] = []
        while let event = next(timeout: quiet) { events.append(event) }
        return events
    }

    public func reset() { socket.reset() }

    private func takeBody() {
        if parser.body.count > consumed {
            pending += parser.body[consumed...]
            consumed = parser.body.count
        }
    }

    private func parsePending() -> TestEvent? {
        while let newline = pending.firstIndex(of: 0x0A) {
            var line = Array(pending[..<newline])
            pending.removeFirst(newline + 1)
            if line.last == 0x0D { line.removeLast() }
            let text = String(decoding: line, as: UTF8.self)
            if text.isEmpty {
                defer {
                    current = TestEvent()
                    hasFields = false
                }
                if hasFields { return current }
                if current.retry != nil { retryOnlyBlocks += 1 }
                continue
            }
            if text.hasPrefix(":") {
                comments.append(String(text.dropFirst()).trimmingCharacters(in: .whitespaces))
                continue
            }
            let field: Substring
            var value: Substring
            if let colon = text.firstIndex(of: ":") {
                field = text[..<colon]
                value = text[text.index(after: colon)...]
                if value.first == " " { value = value.dropFirst() }
            } else {
                field = Substring(text)
                value = ""
            }
            if field == "retry" {
                retry = Int(value)
                current.retry = retry
                continue
            }
            hasFields = true
            switch field {
            case "event": current.event = String(value)
            case "id": current.id = String(value)
            case "data": current.data += current.data.isEmpty ? String(value) : "\n" + value
            default: break
            }
        }
        return nil
    }
}
