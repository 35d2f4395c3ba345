#if canImport(FoundationEssentials)
import FoundationEssentials
#else
import Foundation
#endif

/// One action type of a reactor kind and the fields its `Decodable` reads, as JSON Schema.
struct ActionCaseSchema {
    struct Field {
        let name: String
        let schema: [String: Any]
        let required: Bool
    }

    let type: String
    var fields: [Field]
}

/// Finds what a reactor's `Action` accepts by running its own `init(from:)` against a decoder
/// that answers every question: `ActionFields.unknownType(expected:)` tells the types, and for
/// each type the fields it reads, with the Swift types it asks for, are the schema. Declared
/// once, by the decoding code itself, so the spec cannot drift from what the server accepts.
/// Nil when the Action does not decode through `ActionFields` (its types cannot be found).
enum ActionSchemaProbe {
    static func cases<A: Decodable>(of _: A.Type) -> [ActionCaseSchema]? {
        let finder = Probe(type: "\u{1}")
        _ = try? A(from: ProbeDecoder(probe: finder, node: SchemaNode(), path: []))
        guard let types = finder.expectedTypes else { return nil }
        return types.map { type in
            let probe = Probe(type: type)
            _ = try? A(from: ProbeDecoder(probe: probe, node: SchemaNode(), path: []))
            return ActionCaseSchema(type: type, fields: probe.fields)
        }
    }
}

/// Where `ActionFields` reports the expected types when decoding from a probe.
protocol ActionTypeListener: AnyObject {
    func expectedTypes(_ types: [String])
}

extension CodingUserInfoKey {
    static let actionTypeListener = CodingUserInfoKey(rawValue: "reactord.actionTypeListener")!
}

/// What one probe run learns. `type` is the action type to answer for `type`; nil when the
/// probe decodes a State (StateSchemaProbe), whose root fields go into the root node's schema.
final class Probe: ActionTypeListener {
    let type: String?
    var expectedTypes: [String]?
    var fields: [ActionCaseSchema.Field] = []

    init(type: String?) { self.type = type }

    func expectedTypes(_ types: [String]) { expectedTypes = types }
}

/// The schema one decoder's value turned out to have, filled in as containers are asked for.
final class SchemaNode {
    var schema: [String: Any] = [:]
    /// The value asked `decodeNil()` first (an Optional's own `init(from:)` does): it may be null.
    var nullable = false

    /// The schema, `nullable` added when the value may be null.
    var finished: [String: Any] {
        guard nullable, !schema.isEmpty else { return schema }
        var schema = schema
        schema["nullable"] = true
        return schema
    }
}

struct ProbeFailure: Error {}

/// The key a state probe offers as `allKeys`, so that a `Dictionary` decodes one value and its
/// type becomes the object's `additionalProperties`. Synthesized structs never ask for allKeys.
let anyKeyName = "\u{1}"

/// Values for the types a probe is asked for; nil for types it cannot make (their schema is
/// found by decoding them from a probe in turn).
private enum Samples {
    static func make<T>(_: T.Type) -> (value: T, schema: [String: Any])? {
        func pair(_ value: Any, _ schema: [String: Any]) -> (T, [String: Any])? {
            (value as? T).map { ($0, schema) }
        }
        switch T.self {
        case is String.Type: return pair("", ["type": "string"])
        case is Bool.Type: return pair(false, ["type": "boolean"])
        case is Int.Type: return pair(0 as Int, ["type": "integer"])
        case is Int8.Type:
            return pair(0 as Int8, ["type": "integer", "minimum": Int(Int8.min), "maximum": Int(Int8.max)])
        case is Int16.Type:
            return pair(0 as Int16, ["type": "integer", "minimum": Int(Int16.min), "maximum": Int(Int16.max)])
        case is Int32.Type: return pair(0 as Int32, ["type": "integer", "format": "int32"])
        case is Int64.Type: return pair(0 as Int64, ["type": "integer", "format": "int64"])
        case is UInt.Type: return pair(0 as UInt, ["type": "integer", "minimum": 0])
        case is UInt8.Type: return pair(0 as UInt8, ["type": "integer", "minimum": 0, "maximum": Int(UInt8.max)])
        case is UInt16.Type: return pair(0 as UInt16, ["type": "integer", "minimum": 0, "maximum": Int(UInt16.max)])
        case is UInt32.Type: return pair(0 as UInt32, ["type": "integer", "minimum": 0])
        case is UInt64.Type: return pair(0 as UInt64, ["type": "integer", "minimum": 0])
        case is Double.Type: return pair(0 as Double, ["type": "number"])
        case is Float.Type: return pair(0 as Float, ["type": "number", "format": "float"])
        // As JSONEncoder's and JSONDecoder's defaults write and read them (their own
        // init(from:) would read a number array for Data and refuse "" for a URL).
        case is Date.Type: return pair(Date(timeIntervalSinceReferenceDate: 0), ["type": "number"])
        case is Data.Type: return pair(Data(), ["type": "string", "format": "byte"])
        case is URL.Type: return pair(URL(string: "http://127.0.0.1/")!, ["type": "string", "format": "uri"])
        default: return nil
        }
    }
}

final class ProbeDecoder: Decoder {
    let probe: Probe
    let node: SchemaNode
    let codingPath: [any CodingKey]
    var userInfo: [CodingUserInfoKey: Any] { [.actionTypeListener: probe] }

    init(probe: Probe, node: SchemaNode, path: [any CodingKey]) {
        self.probe = probe
        self.node = node
        codingPath = path
    }

    /// Decodes a `T` for the value at `path`, giving its schema: a sample for plain types,
    /// else `T`'s own `init(from:)` run against a probe (recursive types stop at depth 8).
    func value<T: Decodable>(_: T.Type, at path: [any CodingKey]) throws -> (T, [String: Any]) {
        if let sample = Samples.make(T.self) { return sample }
        guard path.count < 8 else { throw ProbeFailure() }
        let child = SchemaNode()
        let value = try T(from: ProbeDecoder(probe: probe, node: child, path: path))
        return (value, child.finished)
    }

    func container<Key: CodingKey>(keyedBy _: Key.Type) throws -> KeyedDecodingContainer<Key> {
        if node.schema["type"] == nil { node.schema = ["type": "object", "properties": [String: Any]()] }
        return KeyedDecodingContainer(ProbeKeyed<Key>(decoder: self))
    }

    func unkeyedContainer() throws -> any UnkeyedDecodingContainer {
        node.schema = ["type": "array", "items": [String: Any]()]
        return ProbeUnkeyed(decoder: self)
    }

    func singleValueContainer() throws -> any SingleValueDecodingContainer { ProbeSingle(decoder: self) }
}

private struct ProbeKeyed<Key: CodingKey>: KeyedDecodingContainerProtocol {
    let decoder: ProbeDecoder
    var codingPath: [any CodingKey] { decoder.codingPath }
    var allKeys: [Key] {
        guard decoder.probe.type == nil, let key = Key(stringValue: anyKeyName) else { return [] }
        return [key]
    }
    /// The action object itself: its fields are the case's; `type` answers the probe's type.
    private var isAction: Bool { decoder.codingPath.isEmpty && decoder.probe.type != nil }

    func contains(_ key: Key) -> Bool { true }
    func decodeNil(forKey key: Key) throws -> Bool { false }

    private func note(_ key: Key, _ schema: [String: Any], required: Bool) {
        if isAction {
            guard key.stringValue != "type" else { return }
            if !decoder.probe.fields.contains(where: { $0.name == key.stringValue }) {
                decoder.probe.fields.append(.init(name: key.stringValue, schema: schema, required: required))
            }
            return
        }
        if key.stringValue == anyKeyName {
            decoder.node.schema["additionalProperties"] = schema
            decoder.node.schema["properties"] = nil
            return
        }
        var properties = decoder.node.schema["properties"] as? [String: Any] ?? [:]
        properties[key.stringValue] = schema
        decoder.node.schema["properties"] = properties
        if required {
            let names = (decoder.node.schema["required"] as? [String] ?? []) + [key.stringValue]
            decoder.node.schema["required"] = Array(Set(names)).sorted()
        }
    }

    func decode<T: Decodable>(_ type: T.Type, forKey key: Key) throws -> T {
        if isAction, key.stringValue == "type", let type = decoder.probe.type.flatMap({ $0 as? T }) { return type }
        do {
            let (value, schema) = try decoder.value(T.self, at: codingPath + [key])
            note(key, schema, required: true)
            return value
        } catch {
            note(key, [:], required: true)
            throw error
        }
    }

    func decodeIfPresent<T: Decodable>(_ type: T.Type, forKey key: Key) throws -> T? {
        let schema = (try? decoder.value(T.self, at: codingPath + [key]))?.1 ?? [:]
        var nullable = schema
        if !nullable.isEmpty { nullable["nullable"] = true }
        note(key, nullable, required: false)
        return nil
    }

    func decode(_ type: Bool.Type, forKey key: Key) throws -> Bool { try decodeGeneric(type, key) }
    func decode(_ type: String.Type, forKey key: Key) throws -> String { try decodeGeneric(type, key) }
    func decode(_ type: Double.Type, forKey key: Key) throws -> Double { try decodeGeneric(type, key) }
    func decode(_ type: Float.Type, forKey key: Key) throws -> Float { try decodeGeneric(type, key) }
    func decode(_ type: Int.Type, forKey key: Key) throws -> Int { try decodeGeneric(type, key) }
    func decode(_ type: Int8.Type, forKey key: Key) throws -> Int8 { try decodeGeneric(type, key) }
    func decode(_ type: Int16.Type, forKey key: Key) throws -> Int16 { try decodeGeneric(type, key) }
    func decode(_ type: Int32.Type, forKey key: Key) throws -> Int32 { try decodeGeneric(type, key) }
    func decode(_ type: Int64.Type, forKey key: Key) throws -> Int64 { try decodeGeneric(type, key) }
    func decode(_ type: UInt.Type, forKey key: Key) throws -> UInt { try decodeGeneric(type, key) }
    func decode(_ type: UInt8.Type, forKey key: Key) throws -> UInt8 { try decodeGeneric(type, key) }
    func decode(_ type: UInt16.Type, forKey key: Key) throws -> UInt16 { try decodeGeneric(type, key) }
    func decode(_ type: UInt32.Type, forKey key: Key) throws -> UInt32 { try decodeGeneric(type, key) }
    func decode(_ type: UInt64.Type, forKey key: Key) throws -> UInt64 { try decodeGeneric(type, key) }
    private func decodeGeneric<T: Decodable>(_ type: T.Type, _ key: Key) throws -> T { try decode(type, forKey: key) }

    // The concrete overloads, which would otherwise go through contains/decodeNil/decode and
    // look required.
    func decodeIfPresent(_ type: Bool.Type, forKey key: Key) throws -> Bool? { try decodeIfPresent(type, key) }
    func decodeIfPresent(_ type: String.Type, forKey key: Key) throws -> String? { try decodeIfPresent(type, key) }
    func decodeIfPresent(_ type: Double.Type, forKey key: Key) throws -> Double? { try decodeIfPresent(type, key) }
    func decodeIfPresent(_ type: Float.Type, forKey key: Key) throws -> Float? { try decodeIfPresent(type, key) }
    func decodeIfPresent(_ type: Int.Type, forKey key: Key) throws -> Int? { try decodeIfPresent(type, key) }
    func decodeIfPresent(_ type: Int8.Type, forKey key: Key) throws -> Int8? { try decodeIfPresent(type, key) }
    func decodeIfPresent(_ type: Int16.Type, forKey key: Key) throws -> Int16? { try decodeIfPresent(type, key) }
    func decodeIfPresent(_ type: Int32.Type, forKey key: Key) throws -> Int32? { try decodeIfPresent(type, key) }
    func decodeIfPresent(_ type: Int64.Type, forKey key: Key) throws -> Int64? { try decodeIfPresent(type, key) }
    func decodeIfPresent(_ type: UInt.Type, forKey key: Key) throws -> UInt? { try decodeIfPresent(type, key) }
    func decodeIfPresent(_ type: UInt8.Type, forKey key: Key) throws -> UInt8? { try decodeIfPresent(type, key) }
    func decodeIfPresent(_ type: UInt16.Type, forKey key: Key) throws -> UInt16? { try decodeIfPresent(type, key) }
    func decodeIfPresent(_ type: UInt32.Type, forKey key: Key) throws -> UInt32? { try decodeIfPresent(type, key) }
    func decodeIfPresent(_ type: UInt64.Type, forKey key: Key) throws -> UInt64? { try decodeIfPresent(type, key) }

    private func decodeIfPresent<T: Decodable>(_ type: T.Type, _ key: Key) throws -> T? {
        try decodeIfPresent(type, forKey: key)
    }

    func nestedContainer<NestedKey: CodingKey>(keyedBy type: NestedKey.Type, forKey key: Key) throws
        -> KeyedDecodingContainer<NestedKey>
    {
        let child = SchemaNode()
        defer { note(key, child.schema, required: true) }
        return try ProbeDecoder(probe: decoder.probe, node: child, path: codingPath + [key]).container(keyedBy: type)
    }

    func nestedUnkeyedContainer(forKey key: Key) throws -> any UnkeyedDecodingContainer {
        let child = SchemaNode()
        defer { note(key, child.schema, required: true) }
        return try ProbeDecoder(probe: decoder.probe, node: child, path: codingPath + [key]).unkeyedContainer()
    }

    func superDecoder() throws -> any Decoder { decoder }
    func superDecoder(forKey key: Key) throws -> any Decoder { decoder }
}

/// An array with one element, so its element type is asked for once.
private struct ProbeUnkeyed: UnkeyedDecodingContainer {
    let decoder: ProbeDecoder
    var codingPath: [any CodingKey] { decoder.codingPath }
    var count: Int? { 1 }
    var currentIndex = 0
    var isAtEnd: Bool { currentIndex >= 1 }

    mutating func decodeNil() throws -> Bool { false }

    mutating func decode<T: Decodable>(_ type: T.Type) throws -> T {
        guard !isAtEnd else { throw ProbeFailure() }
        currentIndex += 1
        let (value, schema) = try decoder.value(T.self, at: codingPath + [IndexKey(currentIndex - 1)])
        decoder.node.schema["items"] = schema
        return value
    }

    mutating func decode(_ type: Bool.Type) throws -> Bool { try decodeGeneric(type) }
    mutating func decode(_ type: String.Type) throws -> String { try decodeGeneric(type) }
    mutating func decode(_ type: Double.Type) throws -> Double { try decodeGeneric(type) }
    mutating func decode(_ type: Float.Type) throws -> Float { try decodeGeneric(type) }
    mutating func decode(_ type: Int.Type) throws -> Int { try decodeGeneric(type) }
    mutating func decode(_ type: Int8.Type) throws -> Int8 { try decodeGeneric(type) }
    mutating func decode(_ type: Int16.Type) throws -> Int16 { try decodeGeneric(type) }
    mutating func decode(_ type: Int32.Type) throws -> Int32 { try decodeGeneric(type) }
    mutating func decode(_ type: Int64.Type) throws -> Int64 { try decodeGeneric(type) }
    mutating func decode(_ type: UInt.Type) throws -> UInt { try decodeGeneric(type) }
    mutating func decode(_ type: UInt8.Type) throws -> UInt8 { try decodeGeneric(type) }
    mutating func decode(_ type: UInt16.Type) throws -> UInt16 { try decodeGeneric(type) }
    mutating func decode(_ type: UInt32.Type) throws -> UInt32 { try decodeGeneric(type) }
    mutating func decode(_ type: UInt64.Type) throws -> UInt64 { try decodeGeneric(type) }
    private mutating func decodeGeneric<T: Decodable>(_ type: T.Type) throws -> T { try decode(type) }

    mutating func nestedContainer<NestedKey: CodingKey>(keyedBy type: NestedKey.Type) throws
        -> KeyedDecodingContainer<NestedKey>
    { throw ProbeFailure() }
    mutating func nestedUnkeyedContainer() throws -> any UnkeyedDecodingContainer { throw ProbeFailure() }
    mutating func superDecoder() throws -> any Decoder { decoder }
}

private struct ProbeSingle: SingleValueDecodingContainer {
    let decoder: ProbeDecoder
    var codingPath: [any CodingKey] { decoder.codingPath }

    func decodeNil() -> Bool {
        decoder.node.nullable = true
        return false
    }

    func decode(_ type: Bool.Type) throws -> Bool { try decodeGeneric(type) }
    func decode(_ type: String.Type) throws -> String { try decodeGeneric(type) }
    func decode(_ type: Double.Type) throws -> Double { try decodeGeneric(type) }
    func decode(_ type: Float.Type) throws -> Float { try decodeGeneric(type) }
    func decode(_ type: Int.Type) throws -> Int { try decodeGeneric(type) }
    func decode(_ type: Int8.Type) throws -> Int8 { try decodeGeneric(type) }
    func decode(_ type: Int16.Type) throws -> Int16 { try decodeGeneric(type) }
    func decode(_ type: Int32.Type) throws -> Int32 { try decodeGeneric(type) }
    func decode(_ type: Int64.Type) throws -> Int64 { try decodeGeneric(type) }
    func decode(_ type: UInt.Type) throws -> UInt { try decodeGeneric(type) }
    func decode(_ type: UInt8.Type) throws -> UInt8 { try decodeGeneric(type) }
    func decode(_ type: UInt16.Type) throws -> UInt16 { try decodeGeneric(type) }
    func decode(_ type: UInt32.Type) throws -> UInt32 { try decodeGeneric(type) }
    func decode(_ type: UInt64.Type) throws -> UInt64 { try decodeGeneric(type) }
    private func decodeGeneric<T: Decodable>(_ type: T.Type) throws -> T { try decode(type) }

    func decode<T: Decodable>(_ type: T.Type) throws -> T {
        let (value, schema) = try decoder.value(T.self, at: codingPath)
        decoder.node.schema = schema
        return value
    }
}
