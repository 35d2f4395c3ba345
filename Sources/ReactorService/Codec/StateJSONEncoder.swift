import ReactorCore

#if canImport(FoundationEssentials)
import FoundationEssentials
#else
import Foundation
#endif

/// A JSON `Encoder` for states that gives the same bytes as `JSONText.makeEncoder()`
/// (Foundation's `JSONEncoder` with `.sortedKeys` and `.withoutEscapingSlashes`) at a
/// fraction of its cost: values go into a small tree of plain cases with no dynamic casts,
/// then one pass writes them, sorting object keys as `JSONEncoder` does (by `String`'s `<`).
///
/// `Encodable` stays the contract. Where `JSONEncoder` has its own rules this encoder does not
/// repeat them: `Date`, `Data`, `URL` and `Decimal` values are handed to a `JSONEncoder`, and
/// anything this encoder refuses (a non-finite number, a value that encodes nothing, an
/// encoder used twice) makes `StateEncoding` run `JSONEncoder` on the whole value, so the
/// result or the error is `JSONEncoder`'s own.
struct StateJSONEncoder {
    var userInfo: [CodingUserInfoKey: Any] = [:]
    /// Told of every `Pulse` encoded (see `PulseObservingEncoder`).
    var pulseObserver: (any PulseEncodingObserver)?

    /// Thrown where `JSONEncoder` must decide: the caller falls back to it.
    struct Unsupported: Error {}

    func encode(_ value: some Encodable) throws -> [UInt8] {
        try encode(value, absentKeys: nil)
    }

    /// Also collects the top-level keys that `encodeIfPresent` left out because their value was
    /// nil: synthesized `Encodable` drops a nil optional from the JSON, but it is still a field
    /// of the state's type (`?fields=` may name it).
    func encode(_ value: some Encodable, absentKeys: AbsentKeys?) throws -> [UInt8] {
        let root = NodeEncoder(parent: nil, key: nil, userInfo: userInfo, pulseObserver: pulseObserver)
        root.absentKeys = absentKeys
        try value.encode(to: root)
        guard let node = root.node else { throw Unsupported() }
        var out: [UInt8] = []
        out.reserveCapacity(128)
        try Self.write(node, into: &out)
        // A session keeps its last state: no more than a few spare bytes with it. (`Array(out[...])`
        // would share the buffer, capacity and all.)
        return out.capacity - out.count > 32 ? out.withUnsafeBufferPointer { Array($0) } : out
    }

    // MARK: - Writing

    private static func write(_ node: Node, into out: inout [UInt8]) throws {
        switch node {
        case .null: out.append(contentsOf: "null".utf8)
        case let .bool(value): out.append(contentsOf: (value ? "true" : "false").utf8)
        case let .int(value): appendInteger(value, into: &out)
        case let .uint(value): appendUnsigned(value, into: &out)
        case let .string(value): appendString(value, into: &out)
        case let .raw(bytes): out.append(contentsOf: bytes)
        case let .object(box):
            out.append(UInt8(ascii: "{"))
            box.sortByKey()
            let count = box.members.count
            var first = true
            for index in 0..<count {
                // Equal keys are adjacent, in the order they were set: the last one wins.
                if index + 1 < count, box.members[index + 1].key == box.members[index].key { continue }
                if !first { out.append(UInt8(ascii: ",")) }
                first = false
                appendString(box.members[index].key, into: &out)
                out.append(UInt8(ascii: ":"))
                try write(box.members[index].value, into: &out)
            }
            out.append(UInt8(ascii: "}"))
        case let .array(box):
            out.append(UInt8(ascii: "["))
            for (index, element) in box.elements.enumerated() {
                if index > 0 { out.append(UInt8(ascii: ",")) }
                try write(element, into: &out)
            }
            out.append(UInt8(ascii: "]"))
        case let .deferred(encoder):
            guard let node = encoder.node else { throw Unsupported() }
            try write(node, into: &out)
        }
    }

    static func appendInteger(_ value: Int64, into out: inout [UInt8]) {
        if value < 0 {
            out.append(UInt8(ascii: "-"))
            appendUnsigned(value.magnitude, into: &out)
        } else {
            appendUnsigned(UInt64(value), into: &out)
        }
    }

    static func appendUnsigned(_ value: UInt64, into out: inout [UInt8]) {
        if value < 10 {
            out.append(UInt8(ascii: "0") &+ UInt8(value))
            return
        }
        var digits: (UInt64, UInt64, UInt64) = (0, 0, 0)  // 24 bytes: UInt64.max has 20 digits
        var count = 0
        var rest = value
        withUnsafeMutableBytes(of: &digits) { buffer in
            while rest > 0 {
                buffer[23 - count] = UInt8(ascii: "0") &+ UInt8(rest % 10)
                rest /= 10
                count += 1
            }
            out.append(contentsOf: buffer[(24 - count)...])
        }
    }

    /// A string literal escaped as `JSONEncoder` escapes it (with `.withoutEscapingSlashes`):
    /// `\"`, `\\`, `\b`, `\f`, `\n`, `\r`, `\t`, other controls as `\u00xx`; the rest as is.
    static func appendString(_ value: String, into out: inout [UInt8]) {
        out.append(UInt8(ascii: "\""))
        var value = value
        value.withUTF8 { bytes in
            var start = 0
            for index in 0..<bytes.count {
                let byte = bytes[index]
                guard byte < 0x20 || byte == UInt8(ascii: "\"") || byte == UInt8(ascii: "\\") else { continue }
                if start < index { out.append(contentsOf: UnsafeBufferPointer(rebasing: bytes[start..<index])) }
                start = index + 1
                out.append(UInt8(ascii: "\\"))
                switch byte {
                case UInt8(ascii: "\""), UInt8(ascii: "\\"): out.append(byte)
                case 0x08: out.append(UInt8(ascii: "b"))
                case 0x0C: out.append(UInt8(ascii: "f"))
                case 0x0A: out.append(UInt8(ascii: "n"))
                case 0x0D: out.append(UInt8(ascii: "r"))
                case 0x09: out.append(UInt8(ascii: "t"))
                default:
                    let hex: [UInt8] = Array("0123456789abcdef".utf8)
                    out.append(contentsOf: "u00".utf8)
                    out.append(hex[Int(byte >> 4)])
                    out.append(hex[Int(byte & 0x0F)])
                }
            }
            if start < bytes.count { out.append(contentsOf: UnsafeBufferPointer(rebasing: bytes[start...])) }
        }
        out.append(UInt8(ascii: "\""))
    }

    /// `JSONEncoder`'s number text: `description`, without a trailing ".0".
    static func floatText<T: BinaryFloatingPoint & CustomStringConvertible>(_ value: T) throws -> [UInt8] {
        guard value.isFinite else { throw Unsupported() }
        var text = Array(value.description.utf8)
        if text.count >= 2, text[text.count - 2] == UInt8(ascii: "."), text[text.count - 1] == UInt8(ascii: "0") {
            text.removeLast(2)
        }
        return text
    }
}

// MARK: - The tree

private enum Node {
    case null
    case bool(Bool)
    case int(Int64)
    case uint(UInt64)
    case string(String)
    /// Already JSON (a float's text, or what `JSONEncoder` made of a `Date`, `Data`, `URL`, `Decimal`).
    case raw([UInt8])
    case object(ObjectBox)
    case array(ArrayBox)
    /// A `superEncoder`'s value, known only once whoever holds that encoder is done.
    case deferred(NodeEncoder)
}

private final class ObjectBox {
    var members: [(key: String, value: Node)]

    /// Room for a state's few fields at once: growing one by one reallocates twice by three.
    init() {
        members = []
        members.reserveCapacity(4)
    }

    /// A key encoded again replaces its value, as in `JSONEncoder`: the writer keeps the last.
    func set(_ key: String, _ value: Node) {
        members.append((key, value))
    }

    /// Sorts in place, stably (equal keys keep the order they were set in): insertion sort
    /// for the few members a state object has, the library's sort with the position as the
    /// tie-break for large ones.
    func sortByKey() {
        let count = members.count
        guard count > 1 else { return }
        if count <= 16 {
            for index in 1..<count {
                var position = index
                while position > 0, members[position].key < members[position - 1].key {
                    members.swapAt(position, position - 1)
                    position -= 1
                }
            }
            return
        }
        members = members.enumerated()
            .sorted { $0.element.key < $1.element.key || ($0.element.key == $1.element.key && $0.offset < $1.offset) }
            .map(\.element)
    }
}

private final class ArrayBox {
    var elements: [Node] = []
}

/// Top-level keys of nil optionals, met while encoding (see `StateJSONEncoder.encode(_:absentKeys:)`).
final class AbsentKeys {
    var names: [String] = []
    /// Keys encodeIfPresent wrote because their value was not nil this time.
    var presentOptionals: [String] = []
}

/// One level of the encoding: the value it was asked for, and the path to it (made only when
/// asked for, by following the parents: `Pulse` reads it, little else does).
private final class NodeEncoder: PulseObservingEncoder {
    let parent: NodeEncoder?
    let key: (any CodingKey)?
    let userInfo: [CodingUserInfoKey: Any]
    let pulseObserver: (any PulseEncodingObserver)?
    var node: Node?
    /// Set on the root encoder only, and only when the caller asks for absent keys.
    var absentKeys: AbsentKeys?

    init(
        parent: NodeEncoder?, key: (any CodingKey)?, userInfo: [CodingUserInfoKey: Any],
        pulseObserver: (any PulseEncodingObserver)?
    ) {
        self.parent = parent
        self.key = key
        self.userInfo = userInfo
        self.pulseObserver = pulseObserver
    }

    /// An encoder for a value below this one.
    func child(key: any CodingKey) -> NodeEncoder {
        NodeEncoder(parent: self, key: key, userInfo: userInfo, pulseObserver: pulseObserver)
    }

    var codingPath: [any CodingKey] {
        guard let key else { return [] }
        guard let parent, parent.key != nil else { return [key] }
        return parent.codingPath + [key]
    }

    func container<Key: CodingKey>(keyedBy type: Key.Type) -> KeyedEncodingContainer<Key> {
        let box: ObjectBox
        if case let .object(existing) = node {
            box = existing
        } else {
            box = ObjectBox()
            node = .object(box)
        }
        return KeyedEncodingContainer(KeyedContainer<Key>(encoder: self, box: box, extraPath: []))
    }

    func unkeyedContainer() -> any UnkeyedEncodingContainer {
        let box: ArrayBox
        if case let .array(existing) = node {
            box = existing
        } else {
            box = ArrayBox()
            node = .array(box)
        }
        return UnkeyedContainer(encoder: self, box: box, extraPath: [])
    }

    func singleValueContainer() -> any SingleValueEncodingContainer { SingleContainer(encoder: self) }

    /// The node for one value: plain values directly, others through an encoder of their own.
    func box<T: Encodable>(_ value: T, key: any CodingKey, extraPath: [any CodingKey]) throws -> Node {
        if T.self == String.self { return .string(unsafeBitCast(value, to: String.self)) }
        if T.self == Int.self { return .int(Int64(unsafeBitCast(value, to: Int.self))) }
        if T.self == Bool.self { return .bool(unsafeBitCast(value, to: Bool.self)) }
        if T.self == Double.self { return .raw(try StateJSONEncoder.floatText(unsafeBitCast(value, to: Double.self))) }
        if T.self == Float.self { return .raw(try StateJSONEncoder.floatText(unsafeBitCast(value, to: Float.self))) }
        if T.self == Date.self || T.self == Data.self || T.self == URL.self || T.self == Decimal.self {
            return .raw(Array(try JSONText.makeEncoder().encode(value)))
        }
        // An optional encodes its wrapped value at its own level, or null (`Optional.encode(to:)`):
        // so without an encoder of its own. (`_isOptional` reads the type's metadata kind; the
        // cast alone would cost a conformance lookup for every value.)
        if _isOptional(T.self), let optional = value as? any EncodableOptional {
            return try optional.node(in: self, key: key, extraPath: extraPath)
        }
        let child = pathEncoder(extraPath).child(key: key)
        try value.encode(to: child)
        guard let node = child.node else { throw StateJSONEncoder.Unsupported() }
        return node
    }

    /// A parent chain for values inside nested containers, whose keys are not encoders' own
    /// (this encoder itself when `extraPath` is empty).
    func pathEncoder(_ extraPath: [any CodingKey]) -> NodeEncoder {
        var level = self
        for key in extraPath { level = level.child(key: key) }
        return level
    }
}

private protocol EncodableOptional {
    func node(in encoder: NodeEncoder, key: any CodingKey, extraPath: [any CodingKey]) throws -> Node
}

extension Optional: EncodableOptional where Wrapped: Encodable {
    fileprivate func node(in encoder: NodeEncoder, key: any CodingKey, extraPath: [any CodingKey]) throws -> Node {
        guard let self else { return .null }
        return try encoder.box(self, key: key, extraPath: extraPath)
    }
}

private struct SuperKey: CodingKey {
    var stringValue: String { "super" }
    var intValue: Int? { nil }
    init() {}
    init?(stringValue: String) { self.init() }
    init?(intValue: Int) { return nil }
}

private struct KeyedContainer<Key: CodingKey>: KeyedEncodingContainerProtocol {
    let encoder: NodeEncoder
    let box: ObjectBox
    let extraPath: [any CodingKey]

    var codingPath: [any CodingKey] { encoder.codingPath + extraPath }

    mutating func encodeNil(forKey key: Key) throws { box.set(key.stringValue, .null) }
    mutating func encode(_ value: Bool, forKey key: Key) throws { box.set(key.stringValue, .bool(value)) }
    mutating func encode(_ value: String, forKey key: Key) throws { box.set(key.stringValue, .string(value)) }
    mutating func encode(_ value: Double, forKey key: Key) throws {
        box.set(key.stringValue, .raw(try StateJSONEncoder.floatText(value)))
    }
    mutating func encode(_ value: Float, forKey key: Key) throws {
        box.set(key.stringValue, .raw(try StateJSONEncoder.floatText(value)))
    }
    mutating func encode(_ value: Int, forKey key: Key) throws { box.set(key.stringValue, .int(Int64(value))) }
    mutating func encode(_ value: Int8, forKey key: Key) throws { box.set(key.stringValue, .int(Int64(value))) }
    mutating func encode(_ value: Int16, forKey key: Key) throws { box.set(key.stringValue, .int(Int64(value))) }
    mutating func encode(_ value: Int32, forKey key: Key) throws { box.set(key.stringValue, .int(Int64(value))) }
    mutating func encode(_ value: Int64, forKey key: Key) throws { box.set(key.stringValue, .int(value)) }
    mutating func encode(_ value: UInt, forKey key: Key) throws { box.set(key.stringValue, .uint(UInt64(value))) }
    mutating func encode(_ value: UInt8, forKey key: Key) throws { box.set(key.stringValue, .uint(UInt64(value))) }
    mutating func encode(_ value: UInt16, forKey key: Key) throws { box.set(key.stringValue, .uint(UInt64(value))) }
    mutating func encode(_ value: UInt32, forKey key: Key) throws { box.set(key.stringValue, .uint(UInt64(value))) }
    mutating func encode(_ value: UInt64, forKey key: Key) throws { box.set(key.stringValue, .uint(value)) }
    mutating func encode<T: Encodable>(_ value: T, forKey key: Key) throws {
        box.set(key.stringValue, try encoder.box(value, key: key, extraPath: extraPath))
    }

    // encodeIfPresent: as the defaults, but a nil at the top level is noted (absentKeys).
    private func noteAbsent(_ key: Key) {
        if extraPath.isEmpty, let absent = encoder.absentKeys { absent.names.append(key.stringValue) }
    }

    private func notePresentOptional(_ key: Key) {
        if extraPath.isEmpty, let absent = encoder.absentKeys { absent.presentOptionals.append(key.stringValue) }
    }
    mutating func encodeIfPresent(_ value: Bool?, forKey key: Key) throws {
        if let value {
            try encode(value, forKey: key)
            notePresentOptional(key)
        } else {
            noteAbsent(key)
        }
    }
    mutating func encodeIfPresent(_ value: String?, forKey key: Key) throws {
        if let value {
            try encode(value, forKey: key)
            notePresentOptional(key)
        } else {
            noteAbsent(key)
        }
    }
    mutating func encodeIfPresent(_ value: Double?, forKey key: Key) throws {
        if let value {
            try encode(value, forKey: key)
            notePresentOptional(key)
        } else {
            noteAbsent(key)
        }
    }
    mutating func encodeIfPresent(_ value: Float?, forKey key: Key) throws {
        if let value {
            try encode(value, forKey: key)
            notePresentOptional(key)
        } else {
            noteAbsent(key)
        }
    }
    mutating func encodeIfPresent(_ value: Int?, forKey key: Key) throws {
        if let value {
            try encode(value, forKey: key)
            notePresentOptional(key)
        } else {
            noteAbsent(key)
        }
    }
    mutating func encodeIfPresent(_ value: Int8?, forKey key: Key) throws {
        if let value {
            try encode(value, forKey: key)
            notePresentOptional(key)
        } else {
            noteAbsent(key)
        }
    }
    mutating func encodeIfPresent(_ value: Int16?, forKey key: Key) throws {
        if let value {
            try encode(value, forKey: key)
            notePresentOptional(key)
        } else {
            noteAbsent(key)
        }
    }
    mutating func encodeIfPresent(_ value: Int32?, forKey key: Key) throws {
        if let value {
            try encode(value, forKey: key)
            notePresentOptional(key)
        } else {
            noteAbsent(key)
        }
    }
    mutating func encodeIfPresent(_ value: Int64?, forKey key: Key) throws {
        if let value {
            try encode(value, forKey: key)
            notePresentOptional(key)
        } else {
            noteAbsent(key)
        }
    }
    mutating func encodeIfPresent(_ value: UInt?, forKey key: Key) throws {
        if let value {
            try encode(value, forKey: key)
            notePresentOptional(key)
        } else {
            noteAbsent(key)
        }
    }
    mutating func encodeIfPresent(_ value: UInt8?, forKey key: Key) throws {
        if let value {
            try encode(value, forKey: key)
            notePresentOptional(key)
        } else {
            noteAbsent(key)
        }
    }
    mutating func encodeIfPresent(_ value: UInt16?, forKey key: Key) throws {
        if let value {
            try encode(value, forKey: key)
            notePresentOptional(key)
        } else {
            noteAbsent(key)
        }
    }
    mutating func encodeIfPresent(_ value: UInt32?, forKey key: Key) throws {
        if let value {
            try encode(value, forKey: key)
            notePresentOptional(key)
        } else {
            noteAbsent(key)
        }
    }
    mutating func encodeIfPresent(_ value: UInt64?, forKey key: Key) throws {
        if let value {
            try encode(value, forKey: key)
            notePresentOptional(key)
        } else {
            noteAbsent(key)
        }
    }
    mutating func encodeIfPresent<T: Encodable>(_ value: T?, forKey key: Key) throws {
        if let value {
            try encode(value, forKey: key)
            notePresentOptional(key)
        } else {
            noteAbsent(key)
        }
    }

    mutating func nestedContainer<NestedKey: CodingKey>(
        keyedBy keyType: NestedKey.Type, forKey key: Key
    ) -> KeyedEncodingContainer<NestedKey> {
        let nested = ObjectBox()
        box.set(key.stringValue, .object(nested))
        return KeyedEncodingContainer(
            KeyedContainer<NestedKey>(encoder: encoder, box: nested, extraPath: extraPath + [key]))
    }

    mutating func nestedUnkeyedContainer(forKey key: Key) -> any UnkeyedEncodingContainer {
        let nested = ArrayBox()
        box.set(key.stringValue, .array(nested))
        return UnkeyedContainer(encoder: encoder, box: nested, extraPath: extraPath + [key])
    }

    mutating func superEncoder() -> any Encoder { superEncoder(key: SuperKey(), name: "super") }

    mutating func superEncoder(forKey key: Key) -> any Encoder { superEncoder(key: key, name: key.stringValue) }

    private func superEncoder(key: any CodingKey, name: String) -> any Encoder {
        let child = encoder.pathEncoder(extraPath).child(key: key)
        box.set(name, .deferred(child))
        return child
    }
}

private struct UnkeyedContainer: UnkeyedEncodingContainer {
    let encoder: NodeEncoder
    let box: ArrayBox
    let extraPath: [any CodingKey]

    var codingPath: [any CodingKey] { encoder.codingPath + extraPath }
    var count: Int { box.elements.count }

    mutating func encodeNil() throws { box.elements.append(.null) }
    mutating func encode(_ value: Bool) throws { box.elements.append(.bool(value)) }
    mutating func encode(_ value: String) throws { box.elements.append(.string(value)) }
    mutating func encode(_ value: Double) throws { box.elements.append(.raw(try StateJSONEncoder.floatText(value))) }
    mutating func encode(_ value: Float) throws { box.elements.append(.raw(try StateJSONEncoder.floatText(value))) }
    mutating func encode(_ value: Int) throws { box.elements.append(.int(Int64(value))) }
    mutating func encode(_ value: Int8) throws { box.elements.append(.int(Int64(value))) }
    mutating func encode(_ value: Int16) throws { box.elements.append(.int(Int64(value))) }
    mutating func encode(_ value: Int32) throws { box.elements.append(.int(Int64(value))) }
    mutating func encode(_ value: Int64) throws { box.elements.append(.int(value)) }
    mutating func encode(_ value: UInt) throws { box.elements.append(.uint(UInt64(value))) }
    mutating func encode(_ value: UInt8) throws { box.elements.append(.uint(UInt64(value))) }
    mutating func encode(_ value: UInt16) throws { box.elements.append(.uint(UInt64(value))) }
    mutating func encode(_ value: UInt32) throws { box.elements.append(.uint(UInt64(value))) }
    mutating func encode(_ value: UInt64) throws { box.elements.append(.uint(value)) }
    mutating func encode<T: Encodable>(_ value: T) throws {
        box.elements.append(try encoder.box(value, key: IndexKey(box.elements.count), extraPath: extraPath))
    }

    mutating func nestedContainer<NestedKey: CodingKey>(keyedBy keyType: NestedKey.Type) -> KeyedEncodingContainer<
        NestedKey
    > {
        let nested = ObjectBox()
        let key = IndexKey(box.elements.count)
        box.elements.append(.object(nested))
        return KeyedEncodingContainer(
            KeyedContainer<NestedKey>(encoder: encoder, box: nested, extraPath: extraPath + [key]))
    }

    mutating func nestedUnkeyedContainer() -> any UnkeyedEncodingContainer {
        let nested = ArrayBox()
        let key = IndexKey(box.elements.count)
        box.elements.append(.array(nested))
        return UnkeyedContainer(encoder: encoder, box: nested, extraPath: extraPath + [key])
    }

    mutating func superEncoder() -> any Encoder {
        let child = encoder.pathEncoder(extraPath).child(key: IndexKey(box.elements.count))
        box.elements.append(.deferred(child))
        return child
    }
}

private struct SingleContainer: SingleValueEncodingContainer {
    let encoder: NodeEncoder

    var codingPath: [any CodingKey] { encoder.codingPath }

    private func set(_ node: Node) throws {
        guard encoder.node == nil else { throw StateJSONEncoder.Unsupported() }
        encoder.node = node
    }

    mutating func encodeNil() throws { try set(.null) }
    mutating func encode(_ value: Bool) throws { try set(.bool(value)) }
    mutating func encode(_ value: String) throws { try set(.string(value)) }
    mutating func encode(_ value: Double) throws { try set(.raw(try StateJSONEncoder.floatText(value))) }
    mutating func encode(_ value: Float) throws { try set(.raw(try StateJSONEncoder.floatText(value))) }
    mutating func encode(_ value: Int) throws { try set(.int(Int64(value))) }
    mutating func encode(_ value: Int8) throws { try set(.int(Int64(value))) }
    mutating func encode(_ value: Int16) throws { try set(.int(Int64(value))) }
    mutating func encode(_ value: Int32) throws { try set(.int(Int64(value))) }
    mutating func encode(_ value: Int64) throws { try set(.int(value)) }
    mutating func encode(_ value: UInt) throws { try set(.uint(UInt64(value))) }
    mutating func encode(_ value: UInt8) throws { try set(.uint(UInt64(value))) }
    mutating func encode(_ value: UInt16) throws { try set(.uint(UInt64(value))) }
    mutating func encode(_ value: UInt32) throws { try set(.uint(UInt64(value))) }
    mutating func encode(_ value: UInt64) throws { try set(.uint(value)) }
    mutating func encode<T: Encodable>(_ value: T) throws {
        guard encoder.node == nil else { throw StateJSONEncoder.Unsupported() }
        // The value encodes into this same encoder (no new level in the path), as in JSONEncoder.
        if T.self == String.self { return try set(.string(unsafeBitCast(value, to: String.self))) }
        if T.self == Int.self { return try set(.int(Int64(unsafeBitCast(value, to: Int.self)))) }
        if T.self == Bool.self { return try set(.bool(unsafeBitCast(value, to: Bool.self))) }
        if T.self == Double.self {
            return try set(.raw(try StateJSONEncoder.floatText(unsafeBitCast(value, to: Double.self))))
        }
        if T.self == Float.self {
            return try set(.raw(try StateJSONEncoder.floatText(unsafeBitCast(value, to: Float.self))))
        }
        if T.self == Date.self || T.self == Data.self || T.self == URL.self || T.self == Decimal.self {
            return try set(.raw(Array(try JSONText.makeEncoder().encode(value))))
        }
        try value.encode(to: encoder)
        guard encoder.node != nil else { throw StateJSONEncoder.Unsupported() }
    }
}

// MARK: - Schema

extension StateJSONEncoder {
    /// A JSON Schema of `value` as it encodes: object fields with the JSON type of what each
    /// holds, taken from the Swift types the encoder was handed (an `Int` is an integer, a
    /// `Double` a number whatever its value). A nil, written or left out, says nothing of its
    /// type: such a field is nullable and otherwise unconstrained. Nil when this encoder
    /// declines the value (JSONEncoder's own cases).
    func schema(of value: some Encodable) -> [String: Any]? {
        let root = NodeEncoder(parent: nil, key: nil, userInfo: userInfo, pulseObserver: pulseObserver)
        let absent = AbsentKeys()
        root.absentKeys = absent
        guard (try? value.encode(to: root)) != nil, let node = root.node else { return nil }
        var schema = Self.schema(of: node)
        if var properties = schema["properties"] as? [String: Any] {
            for name in absent.names where properties[name] == nil { properties[name] = ["nullable": true] }
            for name in absent.presentOptionals {
                if var property = properties[name] as? [String: Any] {
                    property["nullable"] = true
                    properties[name] = property
                }
            }
            schema["properties"] = properties
            // Top-level fields that are always written; an optional one may be left out when nil.
            let optional = Set(absent.names + absent.presentOptionals)
            schema["required"] = properties.keys.filter { !optional.contains($0) }.sorted()
        }
        return schema
    }

    private static func schema(of node: Node) -> [String: Any] {
        switch node {
        case .null: return ["nullable": true]
        case .bool: return ["type": "boolean"]
        case .int, .uint: return ["type": "integer"]
        case .string: return ["type": "string"]
        // Floating point, or a value JSONEncoder wrote (a Date is a number, Data and URL strings).
        case let .raw(bytes): return ["type": bytes.first == UInt8(ascii: "\"") ? "string" : "number"]
        case let .object(box):
            var properties: [String: Any] = [:]
            for member in box.members { properties[member.key] = schema(of: member.value) }
            // Nested objects' keys may be optionals left out later: not required.
            return ["type": "object", "properties": properties]
        case let .array(box):
            return ["type": "array", "items": box.elements.first.map { schema(of: $0) } ?? [String: Any]()]
        case let .deferred(encoder):
            return encoder.node.map { schema(of: $0) } ?? [:]
        }
    }
}
