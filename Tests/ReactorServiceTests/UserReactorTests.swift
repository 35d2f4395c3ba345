import ReactorCore
import ReactorService
import XCTest

/// A reactor shaped like users' own (synthesized Codable, optional fields, integer fields),
/// served by a real server: the bugs users hit with theirs.
final class FormReactor: Reactor {
    /// An error of the reactor's own, thrown while decoding an action.
    struct Refusal: Error, CustomStringConvertible {
        var description: String { "this form refuses that action" }
    }

    enum Action: Decodable {
        case setCount(Int), setNote(String?), setLimits([Int]), setSmall(UInt8), setRatio(Float)

        init(from decoder: any Decoder) throws {
            let fields = try ActionFields(from: decoder)
            switch fields.type {
            case "setCount": self = .setCount(try fields.decode("count"))
            case "setNote": self = .setNote(try fields.decodeIfPresent("note"))
            case "setLimits": self = .setLimits(try fields.decode("limits"))
            case "setSmall": self = .setSmall(try fields.decode("small"))
            case "setRatio": self = .setRatio(try fields.decode("ratio"))
            case "refuse": throw Refusal()
            case "corrupt":
                throw DecodingError.dataCorrupted(.init(codingPath: [], debugDescription: "the form is torn"))
            default: throw fields.unknownType(expected: ["setCount", "setNote", "setLimits", "setSmall", "setRatio"])
            }
        }
    }

    /// Synthesized Encodable: a nil optional is left out of the JSON altogether.
    struct State: Encodable {
        var count = 0
        var note: String?
        var limits: [Int] = []
        var small: UInt8 = 0
        var ratio: Float = 0
    }

    let initialState = State()

    func reduce(state: State, mutation: Action) -> State {
        var state = state
        switch mutation {
        case let .setCount(count): state.count = count
        case let .setNote(note): state.note = note
        case let .setLimits(limits): state.limits = limits
        case let .setSmall(small): state.small = small
        case let .setRatio(ratio): state.ratio = ratio
        }
        return state
    }
}

final class UserReactorTests: XCTestCase {
    private var fixture: ServerFixture!
    private var session = ""

    override func setUpWithError() throws {
        fixture = try ServerFixture()
        fixture.server.register("form") { _ in FormReactor() }
        let created = try fixture.client.request("POST", "/sessions", body: #"{"reactor":"form"}"#)
        XCTAssertEqual(created.status, 201, created.text)
        session = try XCTUnwrap(created.object["session"] as? String)
    }

    override func tearDown() {
        fixture.stop()
        fixture = nil
    }

    // MARK: a non-integer number for an integer field: 422 naming it (was 400 "not valid JSON")

    func testNonIntegerNumberForAnIntegerFieldIs422NamingIt() throws {
        for literal in ["1.5", "-0.5", "1e30", "99999999999999999999", "1.5e-3"] {
            assertProblem(
                try fixture.send(session, #"{"type":"setCount","count":\#(literal)}"#), 422,
                mentions: ["action.count", "integer", literal])
        }
        assertProblem(
            try fixture.send(session, #"{"type":"setLimits","limits":[1,2.5]}"#), 422,
            mentions: ["action.limits[1]", "integer"])
        assertProblem(
            try fixture.send(session, #"{"type":"setSmall","small":256}"#), 422,
            mentions: ["action.small", "UInt8"])
        // A number Float cannot hold: JSON all the same, so 422 (JSONDecoder calls it "not valid JSON").
        for route in ["/action", "/sessions/\(session)/actions"] {
            let body = #"{"type":"setRatio","ratio":1e300}"#
            assertProblem(
                try fixture.client.request(
                    "POST", route, body: route == "/action" ? #"{"session":"\#(session)","action":\#(body)}"# : body),
                422, mentions: ["does not fit"])
        }
        // The reactor's own decoding error, in its words.
        assertProblem(
            try fixture.send(session, #"{"type":"refuse"}"#), 422, mentions: ["this form refuses that action"])
        let torn = try fixture.client.request("POST", "/sessions/\(session)/actions", body: #"{"type":"corrupt"}"#)
        assertProblem(torn, 422, mentions: ["the form is torn"])
        // Not JSON at all is still 400.
        assertProblem(try fixture.send(session, #"{"type":"setCount","count":1.}"#), 400, mentions: ["JSON"])
        // What JSONDecoder takes as an integer still works, and nothing above changed the state.
        let state = try fixture.client.request("GET", "/sessions/\(session)")
        XCTAssertEqual(state.object["version"] as? Int, 0)
        let ok = try fixture.send(session, #"{"type":"setCount","count":7}"#)
        XCTAssertEqual(ok.status, 200, ok.text)
        XCTAssertEqual((ok.object["state"] as? [String: Any])?["count"] as? Int, 7)
    }

    // MARK: ?fields= naming a field that is nil now (was 400 "unknown state field")

    func testFieldsMayNameAFieldThatIsNilNow() throws {
        let initial = try fixture.client.request("GET", "/sessions/\(session)")
        XCTAssertNil((initial.object["state"] as? [String: Any])?["note"], "nil is left out of the JSON")
        let stream = try fixture.subscribe(session, query: "?fields=note,count")
        let first = try XCTUnwrap(stream.next(), "a stream opens")
        XCTAssertEqual(first.event, "state")
        XCTAssertEqual(first.state as NSDictionary, ["count": 0])
        XCTAssertEqual(try fixture.send(session, #"{"type":"setNote","note":"hi"}"#).status, 200)
        XCTAssertEqual(try fixture.send(session, #"{"type":"setLimits","limits":[3]}"#).status, 200)  // not selected
        XCTAssertEqual(try fixture.send(session, #"{"type":"setNote","note":null}"#).status, 200)
        let states = stream.drain().filter { $0.event == "state" }.map { $0.state as NSDictionary }
        XCTAssertEqual(states, [["count": 0, "note": "hi"], ["count": 0]])
        // A name the State type does not have is still refused, naming what exists (nil ones too).
        assertProblem(
            try fixture.client.request("GET", "/sessions/\(session)/events?fields=nope"), 400,
            mentions: ["'nope'", "note", "count"])
    }

    // MARK: a filtered stream resumed with Last-Event-ID gets every missed change of its fields

    func testFilteredResumeReplaysEveryMissedChange() throws {
        let stream = try fixture.subscribe(session, query: "?fields=count")
        XCTAssertEqual(stream.next()?.id, "0")
        stream.reset()
        for count in 1...4 {
            XCTAssertEqual(try fixture.send(session, #"{"type":"setCount","count":\#(count)}"#).status, 200)
            XCTAssertEqual(try fixture.send(session, #"{"type":"setNote","note":"n\#(count)"}"#).status, 200)
        }
        // Events 1...8: the counts are 1, 3, 5, 7; the notes (2, 4, 6, 8) do not change `count`.
        let resumed = try fixture.subscribe(session, query: "?fields=count", headers: ["Last-Event-ID": "0"])
        let events = resumed.drain().filter { $0.event == "state" }
        XCTAssertEqual(
            events.map { $0.state as NSDictionary }, [["count": 1], ["count": 2], ["count": 3], ["count": 4]])
        XCTAssertEqual(events.map(\.id), ["1", "3", "5", "7"])
        // From the middle, too; and live events after the replay are still filtered against it.
        let fromThree = try fixture.subscribe(session, query: "?fields=count", headers: ["Last-Event-ID": "3"])
        XCTAssertEqual(fromThree.drain().filter { $0.event == "state" }.map(\.id), ["5", "7"])
        XCTAssertEqual(try fixture.send(session, #"{"type":"setNote","note":"later"}"#).status, 200)
        XCTAssertEqual(try fixture.send(session, #"{"type":"setCount","count":9}"#).status, 200)
        XCTAssertEqual(fromThree.drain().map { $0.state as NSDictionary }, [["count": 9]])
    }
}
