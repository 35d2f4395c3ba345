import Examples
import Foundation
import XCTest

@testable import ReactorService

/// `RequestJSONDecoder` answers only with what `JSONDecoder` would give, and declines (nil)
/// everything else, so `RequestDecoding` keeps JSONDecoder's values and error wording.
final class RequestJSONDecoderTests: XCTestCase {
    struct Sample: Decodable, Equatable {
        var name: String
        var count: Int
        var small: Int8?
        var big: UInt64?
        var flag: Bool?
        var tags: [String]?
        var nested: [[Int]]?
        var inner: Inner?

        struct Inner: Decodable, Equatable {
            var a: String?
            var b: [Int]
        }

        struct Inner2: Decodable {
            var count: Int
        }
    }

    private func fast<T: Decodable>(_ type: T.Type, _ json: String) -> T? {
        RequestJSONDecoder.decode(T.self, from: Array(json.utf8), userInfo: [:])
    }

    private func foundation<T: Decodable>(_ type: T.Type, _ json: String) -> T? {
        try? JSONDecoder().decode(T.self, from: Data(json.utf8))
    }

    func testAgreesWithJSONDecoderWhereItAnswers() {
        let bodies = [
            #"{"name":"a","count":1}"#,
            #" { "name" : "a\"b\\c\/d\b\f\n\r\t\u0041\u00e9\ud83d\ude00" , "count" : -9223372036854775808 } "#,
            #"{"name":"é😀","count":0,"small":-128,"big":18446744073709551615,"flag":false}"#,
            #"{"name":"x","count":2,"tags":["a","b",""],"nested":[[1],[],[2,3]],"inner":{"a":null,"b":[]}}"#,
            #"{"name":"x","count":2,"small":null,"inner":{"b":[1]},"extra":{"deep":[1.5,true,null]}}"#,
        ]
        for body in bodies {
            let expected = foundation(Sample.self, body)
            XCTAssertNotNil(expected, body)
            XCTAssertEqual(fast(Sample.self, body), expected, body)
        }
    }

    func testDeclinesWhatItIsNotSureOf() {
        let bodies = [
            #"{"name":"a","count":1.0}"#,  // JSONDecoder's number rules
            #"{"name":"a","count":1e2}"#,
            #"{"name":"a","count":01}"#,  // not JSON
            #"{"name":"a","count":1,"count":2}"#,  // duplicate key (a 400 over HTTP)
            #"{"name":"a","count":1,"\u00e9":1,"e\u0301":2}"#,  // two names, canonically one String
            #"{"name":"a","count":1,"small":128}"#,  // out of range
            #"{"name":"a","count":1,"big":-1}"#,
            #"{"name":"a"}"#,  // missing field
            #"{"name":1,"count":1}"#,  // wrong type
            #"{"name":"\ud800","count":1}"#,  // lone surrogate
            #"{"name":"a\x","count":1}"#,  // bad escape
            "{\"name\":\"a\u{1}\",\"count\":1}",  // raw control character
            #"{"name":"a","count":1} x"#,  // trailing garbage
            #"{"name":"a","count":1,}"#,
            "",
            "null",
        ]
        for body in bodies {
            XCTAssertNil(fast(Sample.self, body), body)
        }
        XCTAssertNil(fast(Double.self, "1.5"))
        XCTAssertNil(fast([Date].self, "[1]"))
        XCTAssertNil(fast(Data.self, #""AQID""#))
    }

    /// Past the first few members an object's names are looked up in sets: a repeated or a
    /// canonically equal name is still found there, wherever it is, and distinct names pass.
    func testManyMembersFindARepeatedNameAnywhere() {
        let padding = (0..<40).map { #""p\#($0)":\#($0)"# }.joined(separator: ",")
        let many = #"{"name":"a","count":1,"# + padding + "}"
        XCTAssertEqual(fast(Sample.self, many), Sample(name: "a", count: 1))
        let head = #"{"name":"a","count":1,"#
        XCTAssertNil(fast(Sample.self, head + padding + #","p39":0}"#), "a repeat past the scan")
        XCTAssertNil(fast(Sample.self, head + padding + #","count":2}"#), "a repeat of an early name")
        XCTAssertNil(
            fast(Sample.self, head + padding + #","\u00e9":1,"e\u0301":2}"#),
            "two names, canonically one String")
        XCTAssertNil(fast(Sample.self, #"{"name":"a","count":1,"\u00e9":1,"# + padding + #","e\u0301":2}"#))
    }

    /// A type that swallows a refusal and tries something else must not get a value
    /// JSONDecoder would not give.
    struct Fallible: Decodable, Equatable {
        var value: String
        init(from decoder: any Decoder) throws {
            let container = try decoder.singleValueContainer()
            if let number = try? container.decode(Double.self) {
                value = "number \(number)"
            } else {
                value = "other"
            }
        }
    }

    func testASwallowedRefusalStillDeclines() {
        XCTAssertNil(fast(Fallible.self, "1.5"))
        XCTAssertEqual(
            try RequestDecoding.decode(Fallible.self, from: Array("1.5".utf8)), foundation(Fallible.self, "1.5"))
    }

    func testCounterActionsDecodeLikeJSONDecoder() throws {
        for body in [
            #"{"type":"increase"}"#, #"{"type":"alert","message":"hi \u00e9"}"#, #"{"type":"decrease","x":[1]}"#,
        ] {
            let action = try XCTUnwrap(fast(CounterReactor.Action.self, body), body)
            let reference = try XCTUnwrap(foundation(CounterReactor.Action.self, body), body)
            XCTAssertEqual(String(describing: action), String(describing: reference))
        }
        XCTAssertNil(fast(CounterReactor.Action.self, #"{"type":"jump"}"#))
        XCTAssertNil(fast(CounterReactor.Action.self, #"{"type":"alert"}"#))
    }

    /// The action route's envelope: members read by name, one decoded as a value at path [name];
    /// anything the general path must judge gives nil.
    func testTopLevelObjectReadsMembersAndDeclinesTheRest() throws {
        let body = #" { "action" : {"type":"alert","message":"hi"}, "extra": [1], "session": "abc" } "#
        let envelope = try XCTUnwrap(RequestJSONDecoder.TopLevelObject(parsing: Array(body.utf8)))
        XCTAssertEqual(envelope.string("session"), "abc")
        XCTAssertNil(envelope.string("action"), "an object is no string")
        XCTAssertNil(envelope.string("missing"))
        var path: [String] = []
        var none: RequestJSONDecoder.IntegerMismatch?
        let action = envelope.decode("action", userInfo: [:], integerMismatch: &none) {
            decoder -> CounterReactor.Action in
            path = decoder.codingPath.map(\.stringValue)
            return try CounterReactor.Action(from: decoder)
        }
        XCTAssertEqual(action.map { String(describing: $0) }, String(describing: CounterReactor.Action.alert("hi")))
        XCTAssertEqual(path, ["action"])
        var unused: RequestJSONDecoder.IntegerMismatch?
        XCTAssertNil(
            envelope.decode("missing", userInfo: [:], integerMismatch: &unused) { try CounterReactor.Action(from: $0) })
        XCTAssertNil(
            envelope.decode("extra", userInfo: [:], integerMismatch: &unused) { try CounterReactor.Action(from: $0) },
            "a throw is nil")
        var mismatch: RequestJSONDecoder.IntegerMismatch?
        XCTAssertNil(
            envelope.decode("action", userInfo: [:], integerMismatch: &mismatch) { (try? Double(from: $0)) ?? 0 },
            "a decline is nil, even when the decoded type swallows it")
        let numbers = try XCTUnwrap(RequestJSONDecoder.TopLevelObject(parsing: Array(#"{"n":{"count":1.5}}"#.utf8)))
        XCTAssertNil(numbers.decode("n", userInfo: [:], integerMismatch: &mismatch) { try Sample.Inner2(from: $0) })
        XCTAssertEqual(mismatch.map { $0.path.map(\.stringValue) }, ["n", "count"])
        XCTAssertEqual(mismatch?.literal, "1.5")

        for notAnObject in ["[1]", #""s""#, "{", #"{"session":"a","session":"b"}"#, "{} x"] {
            XCTAssertNil(RequestJSONDecoder.TopLevelObject(parsing: Array(notAnObject.utf8)), notAnObject)
        }
    }
}
