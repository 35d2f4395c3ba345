import Foundation
import ReactorCore
import XCTest

@testable import ReactorService

/// `StateJSONEncoder` must give `JSONEncoder`'s bytes (sorted keys, slashes unescaped) for every
/// value, and `StateEncoding` the same pulses; where it declines, `JSONEncoder` decides.
final class StateJSONEncoderTests: XCTestCase {
    private func assertSameAsFoundation<T: Encodable>(_ value: T, file: StaticString = #filePath, line: UInt = #line)
        throws
    {
        let expected = try String(decoding: JSONText.makeEncoder().encode(value), as: UTF8.self)
        let fast = try String(decoding: StateJSONEncoder().encode(value), as: UTF8.self)
        XCTAssertEqual(fast, expected, file: file, line: line)
        let viaStateEncoding = try String(decoding: StateEncoding.encode(value).json, as: UTF8.self)
        XCTAssertEqual(viaStateEncoding, expected, file: file, line: line)
    }

    struct Inner: Encodable, Equatable {
        var b = 2
        var a: String? = "x"
    }

    struct Everything: Encodable {
        var zeta = "last"
        var alpha = -42
        var int8 = Int8.min
        var int16 = Int16.max
        var int32 = Int32.min
        var int64 = Int64.min
        var uint = UInt.max
        var uint8 = UInt8.max
        var uint16: UInt16 = 7
        var uint32 = UInt32.max
        var uint64 = UInt64.max
        var double = 3.25
        var wholeDouble = 2.0
        var tiny = 1e-7
        var huge = 1e300
        var negativeZero = -0.0
        var float: Float = 0.1
        var flag = true
        var nothing: String? = nil
        var something: Int? = 5
        var list = [1, 2, 3]
        var empty: [String] = []
        var nested = [[Inner()], []]
        var inner = Inner()
        var byName = ["b": 1, "a": 2, "A": 3, "_": 4, "a10": 5, "a9": 6, "é": 7, "ä": 8]
        var byNumber = [10: "ten", 2: "two", 1: "one"]
        var optionalInner: Inner? = nil
        var date = Date(timeIntervalSinceReferenceDate: 12.5)
        var data = Data([0, 1, 2, 250])
        var url = URL(string: "https://example.com/a/b?c=d")!
        var decimal = Decimal(string: "1.10")!
        var set: Set<Int> = [3]
    }

    /// Optionals written with `encode` rather than `encodeIfPresent` (a hand-written
    /// `encode(to:)`, arrays, dictionaries) take the encoder's short way for optionals.
    struct ExplicitOptionals: Encodable {
        var none: Inner? = nil
        var some: Inner? = Inner(b: 1, a: nil)
        var doubleNone: Int?? = .some(nil)
        var doubleSome: Int?? = 4
        var list: [Int?] = [1, nil, 3]
        var map: [String: Inner?] = ["x": nil, "y": Inner()]

        private enum CodingKeys: String, CodingKey { case none, some, doubleNone, doubleSome, list, map }

        func encode(to encoder: any Encoder) throws {
            var container = encoder.container(keyedBy: CodingKeys.self)
            try container.encode(none, forKey: .none)
            try container.encode(some, forKey: .some)
            try container.encode(doubleNone, forKey: .doubleNone)
            try container.encode(doubleSome, forKey: .doubleSome)
            try container.encode(list, forKey: .list)
            try container.encode(map, forKey: .map)
        }
    }

    func testMatchesJSONEncoderOnOptionalsEncodedExplicitly() throws {
        try assertSameAsFoundation(ExplicitOptionals())
        try assertSameAsFoundation([Inner?.none, Inner()])
    }

    func testMatchesJSONEncoderOnEveryKindOfValue() throws {
        try assertSameAsFoundation(Everything())
        try assertSameAsFoundation(Inner())
        try assertSameAsFoundation([Inner(), Inner(b: 3, a: nil)])
        try assertSameAsFoundation(["k": Inner()])
        try assertSameAsFoundation(1)
        try assertSameAsFoundation("top")
        try assertSameAsFoundation(Optional<Int>.none)
        try assertSameAsFoundation(
            [Double]([0.1, 1, 1e20, 1e-7, .leastNonzeroMagnitude, .greatestFiniteMagnitude, 123456789.125]))
        try assertSameAsFoundation([Float]([0.1, 1, 1e20, 16_777_216]))
    }

    /// A session keeps its last encoded state: a short one must not keep the 128 bytes the
    /// encoder starts with (`Array(out[...])` kept them, capacity and all).
    func testAShortStateKeepsFewSpareBytes() throws {
        let bytes = try StateJSONEncoder().encode(Inner())
        XCTAssertEqual(bytes.count, 15)  // {"a":"x","b":2}
        XCTAssertLessThanOrEqual(bytes.capacity - bytes.count, 32, "capacity \(bytes.capacity)")
    }

    func testEscapesStringsAsJSONEncoderDoes() throws {
        var every = ""
        for scalar in 0..<0x80 { every.unicodeScalars.append(Unicode.Scalar(UInt8(scalar))) }
        try assertSameAsFoundation([every])
        try assertSameAsFoundation(["a/b \"q\" \\ é 😀 \u{2028} \u{7f}": "x/y\u{0}\u{1f}\u{8}\u{c}\n\r\t"])
    }

    /// Hand-written `encode(to:)` with nested containers, super encoders and a repeated key.
    struct Handwritten: Encodable {
        enum Keys: String, CodingKey { case one, two, three, four }

        func encode(to encoder: any Encoder) throws {
            var container = encoder.container(keyedBy: Keys.self)
            try container.encode(1, forKey: .two)
            try container.encode("again", forKey: .two)
            var nested = container.nestedContainer(keyedBy: Keys.self, forKey: .one)
            try nested.encode(true, forKey: .four)
            try nested.encodeNil(forKey: .three)
            var list = container.nestedUnkeyedContainer(forKey: .three)
            try list.encode(1)
            var deeper = list.nestedContainer(keyedBy: Keys.self)
            try deeper.encode([1.5], forKey: .one)
            var inner = list.nestedUnkeyedContainer()
            try inner.encodeNil()
            try Inner().encode(to: list.superEncoder())
            try Inner(b: 9, a: nil).encode(to: container.superEncoder(forKey: .four))
            try Inner(b: 8, a: "s").encode(to: container.superEncoder())
        }
    }

    func testMatchesJSONEncoderWithNestedContainersAndSuperEncoders() throws {
        try assertSameAsFoundation(Handwritten())
        try assertSameAsFoundation([Handwritten(), Handwritten()])
    }

    func testNonFiniteNumbersFailAsInJSONEncoder() {
        XCTAssertThrowsError(try StateEncoding.encode(["x": Double.nan])) { error in
            XCTAssertTrue(error is EncodingError, "\(error)")
        }
        XCTAssertThrowsError(try StateEncoding.encode([Float.infinity]))
    }

    struct WithPulses: Encodable {
        @Pulse var message: String? = nil
        var group = Group()

        struct Group: Encodable {
            @Pulse var count = 0
        }
    }

    func testReportsPulsesWithTheirPaths() throws {
        var state = WithPulses()
        state.message = "hello"
        state.message = "hello"
        state.group.count = 3
        let fast = try StateEncoding.encode(state)
        let reference = try StateEncoding.encodeWithFoundation(state)
        XCTAssertEqual(fast.json, reference.json)
        XCTAssertEqual(String(decoding: fast.json, as: UTF8.self), #"{"group":{"count":3},"message":"hello"}"#)
        XCTAssertEqual(fast.pulses.map(\.name), reference.pulses.map(\.name))
        XCTAssertEqual(fast.pulses.map(\.name), ["message", "group.count"])
        XCTAssertEqual(fast.pulses.map(\.updatedCount), [2, 1])
        XCTAssertEqual(
            fast.pulses.map { StateEncoding.encodeValue($0.value) }, [Array(#""hello""#.utf8), Array("3".utf8)])
    }
}
