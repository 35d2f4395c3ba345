import Foundation
import ReactorCore
import ReactorService
import XCTest

/// A kind whose initial state says nothing of its fields' types: nil, empty arrays, an empty
/// dictionary. The spec must still type them, from the State type.
private final class TypedReactor: Reactor {
    enum Action: String, Decodable { case noop }

    struct Item: Codable {
        var name: String
        var done: Bool
        var due: Date?
    }

    enum Mode: String, Codable { case idle, busy }

    /// Synthesized Codable: decoded in this order, so `after` comes after `mode`, which the
    /// probe cannot decode (no case `""`): both are described from the value.
    struct State: Codable {
        var note: String?
        var numbers: [Int] = []
        var items: [Item] = []
        var scores: [String: Double] = [:]
        var mode: Mode = .idle
        var after = 0
    }

    let initialState = State()
}

/// `/openapi.yaml` is made from the registered kinds' own types, and the repository's
/// openapi.yaml is what reactord serves with its bundled reactors.
final class SpecTests: XCTestCase {
    private var fixture: ServerFixture!

    override func setUpWithError() throws { fixture = try ServerFixture() }

    override func tearDown() {
        fixture.stop()
        fixture = nil
    }

    private func servedSpec() throws -> String {
        let response = try fixture.client.request("GET", "/openapi.yaml")
        XCTAssertEqual(response.status, 200)
        XCTAssertEqual(response.header("Content-Type"), "application/yaml")
        return response.text
    }

    /// The schema line of one component (the generated ones are one JSON line each).
    private func component(_ name: String, in spec: String) throws -> [String: Any] {
        let prefix = "    \(name): "
        let line = try XCTUnwrap(spec.split(separator: "\n").first { $0.hasPrefix(prefix) }, "no component \(name)")
        let object = try JSONSerialization.jsonObject(with: Data(line.dropFirst(prefix.count).utf8))
        return try XCTUnwrap(object as? [String: Any])
    }

    func testRepositorySpecIsWhatReactordServes() throws {
        let root = URL(fileURLWithPath: #filePath).deletingLastPathComponent().deletingLastPathComponent()
            .deletingLastPathComponent().appendingPathComponent("openapi.yaml")
        let served = try servedSpec()
        if ProcessInfo.processInfo.environment["REACTORD_WRITE_SPEC"] == "1" {
            try served.write(to: root, atomically: true, encoding: .utf8)
        }
        let committed = try String(contentsOf: root, encoding: .utf8)
        XCTAssertEqual(
            committed, served,
            "openapi.yaml differs from GET /openapi.yaml: REACTORD_WRITE_SPEC=1 swift test --filter SpecTests writes it"
        )
    }

    func testEachRegisteredKindIsDescribedFromItsTypes() throws {
        fixture.server.register("form") { _ in FormReactor() }
        let spec = try servedSpec()
        XCTAssertEqual(try component("ReactorKind", in: spec)["enum"] as? [String], ["counter", "form"])

        let action = try component("FormAction", in: spec)
        let discriminator = try XCTUnwrap(action["discriminator"] as? [String: Any])
        XCTAssertEqual(discriminator["propertyName"] as? String, "type")
        XCTAssertEqual(
            Set((discriminator["mapping"] as? [String: String] ?? [:]).keys),
            ["setCount", "setNote", "setLimits", "setSmall", "setRatio"])

        let setCount = try component("FormActionSetCount", in: spec)
        XCTAssertEqual(setCount["required"] as? [String], ["type", "count"])
        let countProperties = try XCTUnwrap(setCount["properties"] as? [String: [String: Any]])
        XCTAssertEqual(countProperties["count"]?["type"] as? String, "integer")
        XCTAssertEqual(countProperties["type"]?["enum"] as? [String], ["setCount"])

        let setNote = try component("FormActionSetNote", in: spec)
        XCTAssertEqual(setNote["required"] as? [String], ["type"], "decodeIfPresent: optional")
        let note = try XCTUnwrap((setNote["properties"] as? [String: [String: Any]])?["note"])
        XCTAssertEqual(note["type"] as? String, "string")
        XCTAssertEqual(note["nullable"] as? Bool, true)

        let limits = try XCTUnwrap(
            (try component("FormActionSetLimits", in: spec)["properties"] as? [String: [String: Any]])?["limits"])
        XCTAssertEqual(limits["type"] as? String, "array")
        XCTAssertEqual((limits["items"] as? [String: Any])?["type"] as? String, "integer")
        let small = try XCTUnwrap(
            (try component("FormActionSetSmall", in: spec)["properties"] as? [String: [String: Any]])?["small"])
        XCTAssertEqual(small["maximum"] as? Int, 255)
        let ratio = try XCTUnwrap(
            (try component("FormActionSetRatio", in: spec)["properties"] as? [String: [String: Any]])?["ratio"])
        XCTAssertEqual(ratio["type"] as? String, "number")

        // The state: fields from the State type, the nil optional one included but not required.
        let state = try component("FormState", in: spec)
        let properties = try XCTUnwrap(state["properties"] as? [String: [String: Any]])
        XCTAssertEqual(Set(properties.keys), ["count", "note", "limits", "small", "ratio"])
        XCTAssertEqual(properties["note"]?["nullable"] as? Bool, true)
        XCTAssertEqual(Set(state["required"] as? [String] ?? []), ["count", "limits", "small", "ratio"])
        XCTAssertEqual((try component("State", in: spec)["anyOf"] as? [[String: String]])?.count, 2)
        // The counter's pulse.
        let pulse = try component("CounterPulse", in: spec)
        XCTAssertEqual(
            (pulse["properties"] as? [String: [String: Any]])?["name"]?["enum"] as? [String], ["alertMessage"])
    }

    func testStateSchemaComesFromTheSwiftTypeNotTheInitialValue() throws {
        fixture.server.register("typed") { _ in TypedReactor() }
        let spec = try servedSpec()
        let state = try component("TypedState", in: spec)
        let properties = try XCTUnwrap(state["properties"] as? [String: [String: Any]])
        XCTAssertEqual(Set(properties.keys), ["note", "numbers", "items", "scores", "mode", "after"])
        // nil in the initial state: typed all the same, nullable, not required (left out when nil).
        XCTAssertEqual(properties["note"]?["type"] as? String, "string")
        XCTAssertEqual(properties["note"]?["nullable"] as? Bool, true)
        XCTAssertEqual(Set(state["required"] as? [String] ?? []), ["numbers", "items", "scores", "mode", "after"])
        // Empty arrays: their element type.
        XCTAssertEqual(properties["numbers"]?["type"] as? String, "array")
        XCTAssertEqual((properties["numbers"]?["items"] as? [String: Any])?["type"] as? String, "integer")
        let item = try XCTUnwrap(properties["items"]?["items"] as? [String: Any])
        XCTAssertEqual(item["type"] as? String, "object")
        let itemProperties = try XCTUnwrap(item["properties"] as? [String: [String: Any]])
        XCTAssertEqual(itemProperties["name"]?["type"] as? String, "string")
        XCTAssertEqual(itemProperties["done"]?["type"] as? String, "boolean")
        XCTAssertEqual(itemProperties["due"]?["type"] as? String, "number", "a Date as JSONEncoder writes it")
        XCTAssertEqual(itemProperties["due"]?["nullable"] as? Bool, true)
        XCTAssertEqual(Set(item["required"] as? [String] ?? []), ["name", "done"])
        // An empty dictionary: an object whose values are numbers.
        XCTAssertEqual(properties["scores"]?["type"] as? String, "object")
        XCTAssertEqual((properties["scores"]?["additionalProperties"] as? [String: Any])?["type"] as? String, "number")
        // What the probe cannot decode (a String enum) and what comes after it: from the value.
        XCTAssertEqual(properties["mode"]?["type"] as? String, "string")
        XCTAssertEqual(properties["after"]?["type"] as? String, "integer")

        // The bundled counter: its nil pulse and nil user are typed too.
        let counter = try XCTUnwrap(try component("CounterState", in: spec)["properties"] as? [String: [String: Any]])
        XCTAssertEqual(counter["alertMessage"]?["type"] as? String, "string")
        XCTAssertEqual(counter["alertMessage"]?["nullable"] as? Bool, true)
        XCTAssertEqual(counter["user"]?["type"] as? String, "object")
        XCTAssertEqual(counter["user"]?["nullable"] as? Bool, true)
        XCTAssertEqual(Set((counter["user"]?["properties"] as? [String: Any])?.keys.map { $0 } ?? []), ["id", "name"])
    }

    /// `?fields=`: the spec's pattern accepts exactly the values the server does (a value the
    /// pattern allows that the server refused with 400 was schemathesis's finding).
    func testFieldsPatternAgreesWithTheServer() throws {
        let spec = try servedSpec()
        let lines = spec.split(separator: "\n")
        let parameter = try XCTUnwrap(lines.firstIndex { $0.hasSuffix(" name: fields") })
        let line = try XCTUnwrap(lines[parameter...].first { $0.contains("schema:") && $0.contains("pattern: ") })
        // The pattern is the schema's last member: a YAML double-quoted (JSON) or single-quoted string.
        let quoted = String(try XCTUnwrap(line.split(separator: "pattern: ", maxSplits: 1).last?.dropLast()))
        let pattern =
            quoted.hasPrefix("'")
            ? String(quoted.dropFirst().dropLast()).replacingOccurrences(of: "''", with: "'")
            : try XCTUnwrap(
                try JSONSerialization.jsonObject(with: Data(quoted.utf8), options: .fragmentsAllowed) as? String)
        let regex = try NSRegularExpression(pattern: pattern)
        let session = try fixture.createSession()
        let values = [
            "count", "count,user", " count , alertMessage ,", "count,,user", "\tcount\r\n", ",count",
            "", ",", " ", "nope", "Count", "count user", "count,nope", "count\u{A0}", "count;user", "0",
        ]
        for value in values {
            let matches = regex.firstMatch(in: value, range: NSRange(value.startIndex..., in: value)) != nil
            let encoded = value.addingPercentEncoding(withAllowedCharacters: .alphanumerics) ?? value
            let stream = try fixture.subscribe(session, query: "?fields=\(encoded)")
            XCTAssertEqual(stream.status, matches ? 200 : 400, "fields=\(value.debugDescription), pattern \(pattern)")
            let view = try fixture.client.request("GET", "/sessions/\(session)?fields=\(encoded)")
            XCTAssertEqual(view.status, matches ? 200 : 400, "GET fields=\(value.debugDescription)")
        }
    }

    /// If-None-Match and If-Match: the spec's pattern accepts exactly the entity tags the server reads.
    func testEntityTagPatternAgreesWithTheServer() throws {
        let spec = try servedSpec()
        let lines = spec.split(separator: "\n")
        let parameter = try XCTUnwrap(lines.firstIndex { $0.hasSuffix(" name: If-None-Match") })
        let line = try XCTUnwrap(lines[parameter...].first { $0.contains("pattern: ") })
        let quoted = String(try XCTUnwrap(line.split(separator: "pattern: ", maxSplits: 1).last))
        XCTAssertTrue(quoted.hasPrefix("'") && quoted.hasSuffix("'"), quoted)
        let pattern = String(quoted.dropFirst().dropLast()).replacingOccurrences(of: "''", with: "'")
        XCTAssertTrue(
            lines.contains { $0.contains("pattern: \(quoted)") && !$0.contains("If-None-Match") },
            "If-Match has the same pattern")
        let regex = try NSRegularExpression(pattern: pattern)
        let session = try fixture.createSession()
        let values = [
            #""0""#, "0", "*", #"W/"0""#, #""0", "7""#, #""0.0123456789abcdef""#, "0.0123456789abcdef",
            #"W/"0.0123456789abcdef""#, #""1", "0.0123456789abcdef""#, #""0.0123""#, #""0.0123456789ABCDEF""#,
            #""0.""#, #""0.0123456789abcdef0""#, #""0.0123456789abcdeg""#, #""x""#, #""0"x"#, "+0", #""-1""#,
            #""0.0123456789abcdef.0123456789abcdef""#, "\t\"0\"\t", "\"0\",\t\"7\"", "\"0\"\u{A0}",
            #""0","#, #", "0""#, #""0",,"7""#, #""0" , , "7""#, ",", " , ,", #""00""#, "00", #""07""#, #"*, "0""#,
        ]
        for value in values {
            let matches = regex.firstMatch(in: value, range: NSRange(value.startIndex..., in: value)) != nil
            let answer = try fixture.client.request("GET", "/sessions/\(session)", headers: ["If-None-Match": value])
            XCTAssertEqual(answer.status == 400, !matches, "If-None-Match: \(value), pattern \(pattern)")
        }
    }

    func testRootIsTheGenericConsoleAndTheCounterDemoIsAtDemo() throws {
        for path in ["/", "/console"] {
            let page = try fixture.client.request("GET", path)
            XCTAssertEqual(page.status, 200)
            XCTAssertEqual(page.header("Content-Type"), "text/html; charset=utf-8")
            XCTAssertTrue(page.text.contains("<title>reactord console</title>"), path)
            XCTAssertTrue(page.text.contains("openapi.yaml"), "the console reads the kinds from the spec")
        }
        let demo = try fixture.client.request("GET", "/demo")
        XCTAssertEqual(demo.status, 200)
        XCTAssertTrue(demo.text.contains("counter"))
        XCTAssertFalse(demo.text.contains("reactord console"))
    }

    func testNullReactorIsRefusedAsTheSpecSays() throws {
        assertProblem(
            try fixture.client.request("POST", "/sessions", body: #"{"reactor":null}"#), 422,
            mentions: ["reactor", "string"])
        XCTAssertEqual(try fixture.client.request("POST", "/sessions", body: "{}").status, 201, "absent: the default")
    }
}
