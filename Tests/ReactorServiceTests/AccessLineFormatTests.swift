import Logging
import MicroHTTP
import TestSupport
import XCTest

@testable import ReactorService
@testable import ReactorServiceCLI

/// The access line written straight into the buffered log (`AccessLineFormatter`) is, timestamp
/// aside, byte for byte the line swift-log's handlers make from `AccessLog`'s metadata.
final class AccessLineFormatTests: XCTestCase {
    private static let session = "c2_s1wYS8G_diM4EztB-Mg"

    /// Requests and replies that between them give every field, and text JSON must escape.
    private static var cases: [(request: Request, route: String, reply: Reply)] {
        let body = Array(#"{"session":"\#(session)","version":3,"state":{}}"#.utf8)
        return [
            (
                Request(method: .POST, path: "/action", peer: "127.0.0.1"), "/action",
                .response(Response(status: 200, body: body))
            ),
            (
                Request(
                    method: .GET, path: "/sessions/x\"y\\z\u{1}é",
                    query: ["access_token": "hunter2", "fields": "a\tb"],
                    peer: "10.0.0.2", client: "203.0.113.9", pathParameters: ["id": "x\"y"]),
                "/sessions/{id}", .response(Response(status: 404, body: []))
            ),
            (
                Request(method: .GET, path: "/sessions/s/events", peer: "::1", pathParameters: ["id": session]),
                "/sessions/{id}/events", .eventStream(headers: HTTPHeaders(), open: { _ in })
            ),
            (Request(method: .POST, path: "/sessions"), "/sessions", .deferred { _ in }),
        ]
    }

    /// The logger's own metadata: the service's `log=access`, and keys that sort before, among
    /// and after the line's (one, `path`, taken by the line's own value, as swift-log merges).
    private static let bases: [Logger.Metadata] = [
        [:],
        ["node": "n1", "aaa": "first", "path": "overridden", "zzz": .stringConvertible(42), "q\"uote": "v\"al"],
    ]

    /// Durations whose digits reach every place (and 999 µs: three digits past a byte).
    private static let durations: [UInt64] = [0, 1_234_567, 999_999, 12_345_678_901, 7_000]

    func testTextLinesAreSwiftLogsStreamHandlerLines() {
        for base in Self.bases {
            for ((request, route, reply), nanoseconds) in zip(
                Self.cases + Self.cases, Self.durations + Self.durations.reversed())
            {
                let reference = referenceLine(.text, base: base, request, route, reply, nanoseconds)
                let direct = directLine(.text, base: base, request, route, reply, nanoseconds)
                XCTAssertEqual(Self.cutTimestamp(direct, .text), Self.cutTimestamp(reference, .text))
                XCTAssertTrue(Self.isLocalTimestamp(direct.prefix { $0 != " " }), direct)
            }
        }
    }

    func testJSONLinesAreTheJSONHandlersLines() throws {
        for base in Self.bases {
            for ((request, route, reply), nanoseconds) in zip(
                Self.cases + Self.cases, Self.durations + Self.durations.reversed())
            {
                let reference = referenceLine(.json, base: base, request, route, reply, nanoseconds)
                let direct = directLine(.json, base: base, request, route, reply, nanoseconds)
                XCTAssertEqual(Self.cutTimestamp(direct, .json), Self.cutTimestamp(reference, .json))
                let object = try JSONSerialization.jsonObject(with: Data(direct.utf8)) as? [String: Any]
                let stamp = try XCTUnwrap(object?["timestamp"] as? String)
                XCTAssertNotNil(
                    stamp.range(of: #"^\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d\.\d{3}Z$"#, options: .regularExpression), stamp)
            }
        }
    }

    /// A JWT anywhere in a value (`Bearer eyJ…`, decoded from `Bearer%20` or `Bearer+`) is
    /// redacted; what is kept is percent-encoded again, so no decoded byte splits the line's fields.
    func testAQueryValueHoldingAJWTIsRedactedAndNoDecodedByteBreaksTheLine() {
        let jwt = "eyJhbGciOiJIUzI1NiJ9.eyJzdWIiOiJhIn0.c2lnbmF0dXJl"
        XCTAssertEqual(
            AccessLog.redactedQuery(["authorization": "Bearer \(jwt)", "auth": "Bearer+\(jwt)", "x[a": "k=\(jwt)"]),
            "auth=REDACTED&authorization=REDACTED&x=REDACTED")
        XCTAssertEqual(AccessLog.redactedQuery(["greeting": "heyJoe"]), "greeting=heyJoe", "not where a run starts")
        XCTAssertEqual(
            AccessLog.redactedQuery(["fields": "count,user", "q r": "a b\nc&d=e+f\"é"]),
            "fields=count,user&q%20r=a%20b%0Ac%26d%3De%2Bf%22%C3%A9")
        let request = Request(method: .GET, path: "/sessions/s", query: ["q": "a b\nc"], pathParameters: ["id": "s"])
        let line = directLine(
            .text, base: [:], request, "/sessions/{id}", .response(Response(status: 200, body: [])), 0)
        XCTAssertTrue(line.contains(" query=q=a%20b%0Ac route="), line)
        XCTAssertEqual(line.filter { $0 == "\n" }.count, 1, line)
    }

    /// The session an answer is about, found among its first 96 bytes, its id within 64 more.
    func testTheSessionIsFoundNearTheStartOfTheAnswer() {
        func found(_ body: String) -> String? { AccessLog.sessionID(in: Array(body.utf8)) }
        XCTAssertEqual(found(#"{"session":"abc","version":1}"#), "abc")
        XCTAssertEqual(found(#"{"version":1,"session":"a-b_c"}"#), "a-b_c")
        XCTAssertEqual(found(#"{"session":""}"#), "")
        XCTAssertNil(found(#"{"version":1}"#))
        XCTAssertNil(found(#"{"session":"unterminated"#))
        XCTAssertNil(found(#"{"session""#), "no room for an id")
        XCTAssertNil(found(String(repeating: " ", count: 90) + #""session":"late""#), "past the first 96 bytes")
        XCTAssertNil(found(#"{"session":""# + String(repeating: "x", count: 70) + #""}"#), "an id past 64 bytes")
    }

    func testADecodedPathOrSessionIdCannotBreakTheLine() {
        // libmicrohttpd decodes the path: `/sessions/a%0Astatus=200 x` arrives with a line break in it.
        let id = "a\nstatus=200 x"
        let request = Request(method: .GET, path: "/sessions/\(id)", pathParameters: ["id": id])
        for format in [LogFormat.text, .json] {
            let line = directLine(
                format, base: [:], request, "/sessions/{id}", .response(Response(status: 404, body: [])), 0)
            XCTAssertEqual(line.filter { $0 == "\n" }.count, 1, line)
            XCTAssertTrue(line.contains("/sessions/a%0Astatus%3D200%20x"), line)
        }
    }

    /// Only the answers of POST /sessions and POST /action name the session the request made or
    /// acted on: a page of `GET /sessions` names many, and the line none of them.
    func testAListOfSessionsIsNotTakenForTheRequestsSession() {
        let page = Array(#"{"sessions":[{"session":"\#(Self.session)","reactor":"counter"}],"next":null}"#.utf8)
        let request = Request(method: .GET, path: "/sessions", query: ["limit": "1"])
        for format in [LogFormat.text, .json] {
            for line in [
                directLine(format, base: [:], request, "/sessions", .response(Response(status: 200, body: page)), 0),
                referenceLine(format, base: [:], request, "/sessions", .response(Response(status: 200, body: page)), 0),
            ] {
                XCTAssertFalse(line.contains(Self.session), line)
            }
        }
    }

    /// The server's own handler takes the direct way; another handler (a test's capture, one
    /// with a metadata provider) keeps swift-log's.
    func testOnlyTheBufferedHandlerWithoutAProviderWritesDirectly() {
        let buffered = BufferedLogHandler(inner: JSONLogHandler(label: "reactord"), format: .json, label: "reactord")
        XCTAssertNotNil(AccessLog(logger: Logger(label: "reactord") { _ in buffered }, route: "/action").direct)
        var provided = buffered
        provided.metadataProvider = Logger.MetadataProvider { ["trace": "1"] }
        XCTAssertNil(AccessLog(logger: Logger(label: "reactord") { _ in provided }, route: "/action").direct)
        XCTAssertNil(
            AccessLog(
                logger: Logger(label: "reactord") { _ in EventCapture(events: TestSupport.Locked([])) },
                route: "/action"
            ).direct)
    }

    // MARK: - the two ways

    private func directLine(
        _ format: LogFormat, base: Logger.Metadata, _ request: Request, _ route: String,
        _ reply: Reply, _ nanoseconds: UInt64
    ) -> String {
        var logger = Logger(label: "reactord") { _ in
            BufferedLogHandler(inner: JSONLogHandler(label: "reactord"), format: format, label: "reactord")
        }
        for (key, value) in base { logger[metadataKey: key] = value }
        let log = AccessLog(logger: logger, route: route)
        let formatter = log.direct as! AccessLineFormatter
        return String(
            decoding: formatter.bytes(of: log.line(request, route: route, reply: reply, nanoseconds: nanoseconds)),
            as: UTF8.self)
    }

    private func referenceLine(
        _ format: LogFormat, base: Logger.Metadata, _ request: Request, _ route: String,
        _ reply: Reply, _ nanoseconds: UInt64
    ) -> String {
        let events = TestSupport.Locked<[LogEvent]>([])
        var logger = Logger(label: "reactord") { _ in EventCapture(events: events) }
        for (key, value) in base { logger[metadataKey: key] = value }
        let log = AccessLog(logger: logger, route: route)
        XCTAssertNil(log.direct)
        log.record(request, route: route, reply: reply, nanoseconds: nanoseconds)
        let event = events.value[0]
        var metadata = base
        metadata["log"] = "access"
        switch format {
        case .text:
            let text = TestSupport.Locked("")
            var handler = StreamLogHandler(label: "reactord", stream: Capture(text: text), metadataProvider: nil)
            handler.metadata = metadata
            handler.log(event: event)
            return text.value
        case .json:
            var handler = JSONLogHandler(label: "reactord")
            handler.metadata = metadata
            return handler.line(for: event)
        }
    }

    private static func cutTimestamp(_ line: String, _ format: LogFormat) -> String {
        switch format {
        case .text: return String(line.drop { $0 != " " })
        case .json:
            let prefix = #"{"timestamp":""#
            guard line.hasPrefix(prefix) else { return line }
            return String(line.dropFirst(prefix.count).drop { $0 != "\"" })
        }
    }

    /// `2026-11-26T17:02:03+0000`.
    private static func isLocalTimestamp(_ text: Substring) -> Bool {
        text.range(of: #"^\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d[+-]\d{4}$"#, options: .regularExpression) != nil
    }
}

private struct EventCapture: LogHandler {
    let events: TestSupport.Locked<[LogEvent]>
    var logLevel: Logger.Level = .trace
    var metadata: Logger.Metadata = [:]
    subscript(metadataKey key: String) -> Logger.Metadata.Value? {
        get { metadata[key] }
        set { metadata[key] = newValue }
    }
    func log(event: LogEvent) { events.update { $0.append(event) } }
}

private struct Capture: TextOutputStream, Sendable {
    let text: TestSupport.Locked<String>
    mutating func write(_ string: String) { text.update { $0 += string } }
}
