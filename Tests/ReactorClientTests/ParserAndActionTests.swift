import Examples
import Foundation
import ReactorClient
import ReactorService
import XCTest

final class ServerSentEventParserTests: XCTestCase {
    func testEventsSplitAtAnyByteBoundary() {
        let text =
            "retry: 3000\n\n: keep-alive\nevent: state\nid: 1\ndata: {\"count\":1}\n\nevent: pulse\r\nid: 2\r\ndata: a\r\ndata: b\r\n\r\n"
        let bytes = Array(text.utf8)
        for split in 0...bytes.count {
            var parser = ServerSentEventParser()
            let events = parser.consume(bytes[..<split]) + parser.consume(bytes[split...])
            XCTAssertEqual(
                events,
                [
                    ServerSentEvent(event: "state", id: "1", data: #"{"count":1}"#),
                    ServerSentEvent(event: "pulse", id: "2", data: "a\nb"),
                ], "split at \(split)")
            XCTAssertEqual(parser.retry, 3000)
            XCTAssertEqual(parser.lastEventID, "2")
        }
    }

    func testLoneCRAndDefaultsAndIgnoredFields() {
        var parser = ServerSentEventParser(lastEventID: "7")
        let events = parser.consume(Array("\u{FEFF}data:x\rretry: soon\rid: a\0b\r\rdata\r\r".utf8))
        XCTAssertEqual(
            events,
            [
                ServerSentEvent(event: "message", id: "7", data: "x"),
                ServerSentEvent(event: "message", id: "7", data: ""),
            ])
        XCTAssertNil(parser.retry)
    }

    func testPartialBlockIsDroppedOnReset() {
        var parser = ServerSentEventParser()
        XCTAssertEqual(parser.consume(Array("id: 4\ndata: half".utf8)), [])
        parser.reset()
        XCTAssertEqual(parser.consume(Array("data: whole\n\n".utf8)), [ServerSentEvent(id: "4", data: "whole")])
    }
}

final class ActionEncodingTests: XCTestCase {
    private func json(_ value: some Encodable) throws -> [String: String] {
        let data = try JSONEncoder().encode(value)
        return try XCTUnwrap(JSONSerialization.jsonObject(with: data) as? [String: String])
    }

    func testActionFieldsWriterWritesTheWireForm() throws {
        XCTAssertEqual(try json(CounterAction.increase), ["type": "increase"])
        XCTAssertEqual(try json(CounterAction.alert("Hello")), ["type": "alert", "message": "Hello"])
    }

    func testTypedActionFlattensItsFields() throws {
        struct Alert: Encodable, Sendable { var message: String }
        XCTAssertEqual(try json(TypedAction("decrease")), ["type": "decrease"])
        XCTAssertEqual(try json(TypedAction("alert", Alert(message: "Hi"))), ["type": "alert", "message": "Hi"])
        XCTAssertEqual(try json(TypedAction("alert", ["message": "Yo"])), ["type": "alert", "message": "Yo"])
    }

    /// What the client writes is what the server's `ActionFields` reads.
    func testTheServerDecodesWhatTheClientEncodes() throws {
        let decoded = try JSONDecoder().decode(
            CounterReactor.Action.self,
            from: JSONEncoder().encode(CounterAction.alert("round trip")))
        guard case let .alert(message) = decoded else { return XCTFail("\(decoded)") }
        XCTAssertEqual(message, "round trip")
    }
}
