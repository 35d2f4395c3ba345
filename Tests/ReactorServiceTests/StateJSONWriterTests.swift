import Foundation
import ReactorCore
import XCTest

@testable import ReactorService

/// `StateJSONWriter`, the streaming encoder states take first: JSONEncoder's bytes (sorted
/// keys, slashes unescaped) for what it covers, and a refusal, never other bytes, for what it
/// cannot follow (then the tree encoder decides).
final class StateJSONWriterTests: XCTestCase {
    private typealias Samples = StateJSONEncoderTests

    private func assertStreamed<T: Encodable>(_ value: T, file: StaticString = #filePath, line: UInt = #line) throws {
        let expected = try String(decoding: JSONText.makeEncoder().encode(value), as: UTF8.self)
        let streamed = try String(decoding: StateJSONWriter().encode(value), as: UTF8.self)
        XCTAssertEqual(streamed, expected, file: file, line: line)
    }

    func testWritesJSONEncodersBytesForPlainValues() throws {
        try assertStreamed(Samples.Everything())
        try assertStreamed(Samples.ExplicitOptionals())
        try assertStreamed(Samples.Inner())
        try assertStreamed([Samples.Inner(), Samples.Inner(b: 3, a: nil)])
        try assertStreamed(["k": Samples.Inner(), "a": Samples.Inner(b: 1, a: "/")])
        try assertStreamed([[String: [Int]]]([["z": [1], "y": []], [:]]))
        try assertStreamed(1)
        try assertStreamed("top")
        try assertStreamed(Optional<Int>.none)
        try assertStreamed([Samples.Inner?.none, Samples.Inner()])
    }

    /// Members written out of key order, and a key written twice: sorted, the last value kept.
    struct Unordered: Encodable {
        enum Keys: String, CodingKey { case b, a, c, aa }

        func encode(to encoder: any Encoder) throws {
            var container = encoder.container(keyedBy: Keys.self)
            try container.encode(Samples.Inner(), forKey: .c)
            try container.encode(1, forKey: .b)
            try container.encode([2, 3], forKey: .a)
            try container.encode("first", forKey: .aa)
            try container.encode("second", forKey: .aa)
            var again = encoder.container(keyedBy: Keys.self)  // the same object, asked for again
            try again.encodeNil(forKey: .b)
        }
    }

    func testSortsMembersAndKeepsTheLastOfARepeatedKey() throws {
        try assertStreamed(Unordered())
        try assertStreamed([Unordered(), Unordered()])
        XCTAssertEqual(
            String(decoding: try StateJSONWriter().encode(Unordered()), as: UTF8.self),
            #"{"a":[2,3],"aa":"second","b":null,"c":{"a":"x","b":2}}"#)
    }

    /// A super encoder asked for first, and a container asked of it.
    struct SuperFirst: Encodable {
        enum Keys: String, CodingKey { case a }

        func encode(to encoder: any Encoder) throws {
            var container = encoder.container(keyedBy: Keys.self)
            try Samples.Inner().encode(to: container.superEncoder())
            try container.encode(1, forKey: .a)
        }
    }

    /// Nested containers and super encoders are the tree encoder's: the writer refuses them, and
    /// `StateEncoding` still gives JSONEncoder's bytes.
    func testLeavesNestedContainersToTheTree() throws {
        XCTAssertThrowsError(try StateJSONWriter().encode(Samples.Handwritten()))
        XCTAssertThrowsError(try StateJSONWriter().encode(SuperFirst()))
        XCTAssertEqual(
            try StateEncoding.encode(SuperFirst()).json, Array(try JSONText.makeEncoder().encode(SuperFirst())))
        enum Shape: Encodable { case circle(radius: Double), none }
        XCTAssertThrowsError(try StateJSONWriter().encode(Shape.circle(radius: 2)))
        for value in [Shape.circle(radius: 2), .none] {
            XCTAssertEqual(try StateEncoding.encode(value).json, Array(try JSONText.makeEncoder().encode(value)))
        }
        // A refusal leaves the writer fit for the next state.
        try assertStreamed(Samples.Inner())
    }

    func testRecordsPulsesByName() throws {
        var state = Samples.WithPulses()
        state.message = "hello"
        state.group.count = 3
        let writer = StateJSONWriter()
        let json = try PulseRecording.recording(into: writer) { try writer.encode(state) }
        XCTAssertEqual(String(decoding: json, as: UTF8.self), #"{"group":{"count":3},"message":"hello"}"#)
        XCTAssertEqual(writer.pulses.map(\.name), ["message", "group.count"])
        XCTAssertEqual(writer.pulses.map(\.updatedCount), [1, 1])
        // Through StateEncoding, which takes this thread's writer.
        XCTAssertEqual(try StateEncoding.encode(state).pulses.map(\.name), ["message", "group.count"])
    }

    /// A pulse encoded by another encoder while a state streams (here JSONEncoder, inside the
    /// state's own `encode(to:)`) is that encoder's, not the state's.
    struct EncodesAnotherPulseInside: Encodable {
        @Pulse var mine = 1

        func encode(to encoder: any Encoder) throws {
            _ = try JSONEncoder().encode(Samples.WithPulses())
            var container = encoder.container(keyedBy: CodingKeys.self)
            try container.encode(_mine, forKey: .mine)
        }

        enum CodingKeys: String, CodingKey { case mine }
    }

    func testIgnoresPulsesOfOtherEncoders() throws {
        XCTAssertEqual(try StateEncoding.encode(EncodesAnotherPulseInside()).pulses.map(\.name), ["mine"])
    }
}
