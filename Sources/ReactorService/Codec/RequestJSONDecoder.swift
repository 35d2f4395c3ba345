#if canImport(FoundationEssentials)
import FoundationEssentials
#else
import Foundation
#endif

/// A fast path for request bodies: a small strict JSON parser and a `Decoder` over its values.
///
/// Its parser is the judge of syntax: a body that is not RFC 8259 JSON in UTF-8 is reported as
/// a `SyntaxProblem` (Foundation's `JSONDecoder` on Linux lets through trailing commas, bad
/// numbers, escapes and UTF-8 in values it skips, and UTF-16). Otherwise it only ever answers
/// with a value it is sure `JSONDecoder` would give: anything it is not sure of — a number
/// that is not a plain integer, `Date`, `Data`, `URL` or `Decimal`, `allKeys`,
/// any error at all (including the decoded type's own) —
/// gives `nil`, and the caller decodes the body with `JSONDecoder`, whose value or error
/// (with its wording and coding path) is then the answer. Errors are rare; the common request
/// costs one parse instead of Foundation's.
enum RequestJSONDecoder {
    /// A number where an integer type was decoded that is no plain integer of that type (1.5,
    /// 1e30, 2^64): JSONDecoder on Linux reports these as "not valid JSON" with no coding path,
    /// so the first one met here is kept to name the field instead.
    struct IntegerMismatch: Sendable {
        let path: [any CodingKey]
        let literal: String
        let type: Any.Type
    }

    /// Why a body is no JSON this parser accepts.
    enum SyntaxProblem: Equatable {
        /// Not RFC 8259 JSON in UTF-8, at or before `offset`.
        case malformed(offset: Int)
        /// Nested deeper than `maxDepth` arrays and objects.
        case tooDeep
        /// An object with `key` twice. RFC 8259 §4 leaves what that means to each reader (Foundation
        /// keeps the first, most parsers the last), so a proxy or filter could act on another
        /// request than the one served: refused, as I-JSON (RFC 7493 §2.3) does.
        case duplicateKey(String)
    }

    static let maxDepth = 256

    static func decode<T: Decodable>(
        _ type: T.Type, from body: [UInt8],
        userInfo: [CodingUserInfoKey: any Sendable]
    ) -> T? {
        var mismatch: IntegerMismatch?
        var syntax: SyntaxProblem?
        return decode(type, from: body, userInfo: userInfo, integerMismatch: &mismatch, syntaxProblem: &syntax)
    }

    static func decode<T: Decodable>(
        _ type: T.Type, from body: [UInt8],
        userInfo: [CodingUserInfoKey: any Sendable],
        integerMismatch: inout IntegerMismatch?,
        syntaxProblem: inout SyntaxProblem?
    ) -> T? {
        decode(body, userInfo: userInfo, integerMismatch: &integerMismatch, syntaxProblem: &syntaxProblem) {
            try T(from: $0)
        }
    }

    /// `read`'s result over a decoder of the whole body, or nil as above.
    static func decode<T>(
        _ body: [UInt8], userInfo: [CodingUserInfoKey: any Sendable],
        integerMismatch: inout IntegerMismatch?, syntaxProblem: inout SyntaxProblem?,
        _ read: (any Decoder) throws -> T
    ) -> T? {
        let (parsed, problem) = parse(body)
        syntaxProblem = problem
        guard let parsed else { return nil }
        return decode(parsed, key: nil, userInfo: userInfo, integerMismatch: &integerMismatch, read)
    }

    /// Why `bytes` is no JSON this parser accepts; nil when it is (or when only `JSONDecoder`
    /// can judge its names).
    static func syntaxProblem(in bytes: [UInt8]) -> SyntaxProblem? { parse(bytes).1 }

    /// The body's value, or why it is no JSON this parser accepts (nil and nil: JSON whose
    /// names only `JSONDecoder` can judge).
    private static func parse(_ body: [UInt8]) -> (JSONValue?, SyntaxProblem?) {
        body.withUnsafeBufferPointer { bytes in
            var parser = JSONParser(bytes: bytes)
            let value = parser.parseDocument()
            if parser.isWellFormed {
                if let key = parser.duplicateKey { return (nil, .duplicateKey(key)) }
                return (value, nil)
            }
            return (nil, parser.tooDeep ? .tooDeep : .malformed(offset: min(parser.index, bytes.count)))
        }
    }

    /// `body`'s result over a decoder of `value` at `key`, or nil when `body` throws or meets
    /// anything left to `JSONDecoder` (`integerMismatch` then tells of a number that was no
    /// integer of the type asked for).
    private static func decode<T>(
        _ value: JSONValue, key: (any CodingKey)?, userInfo: [CodingUserInfoKey: any Sendable],
        integerMismatch: inout IntegerMismatch?, _ body: (any Decoder) throws -> T
    ) -> T? {
        let context = DecodingContext(userInfo: userInfo)
        let decoder = ValueDecoder(value: value, parent: nil, key: key, context: context)
        guard let result = try? body(decoder), !context.declined else {
            integerMismatch = context.integerMismatch
            return nil
        }
        return result
    }
}

/// Declines: the caller falls back to `JSONDecoder`.
private struct Declined: Error {}

private func findMember(_ name: String, in members: [(key: String, value: JSONValue)]) -> JSONValue? {
    for member in members where member.key == name { return member.value }
    return nil
}

extension RequestJSONDecoder {
    /// A body that is one JSON object, parsed once, whose members are read by name: a route reads
    /// an envelope's fields itself and decodes only the member it needs as a value, with no
    /// `Decoder` for the envelope. Nil for a body this parser does not accept (then, as for every
    /// `nil` below, the caller takes `RequestDecoding`'s general path, whose errors name the problem).
    struct TopLevelObject: Sendable {
        fileprivate let members: [(key: String, value: JSONValue)]

        init?(parsing body: [UInt8]) {
            guard case let .object(members)? = RequestJSONDecoder.parse(body).0 else { return nil }
            self.members = members
        }

        /// The member `name` when it is a string.
        func string(_ name: String) -> String? {
            guard case let .string(text)? = member(name) else { return nil }
            return text
        }

        /// `body`'s result over a decoder of the member `name` (its coding path `[name]`), or nil when
        /// the member is absent or `body` throws or meets anything this decoder leaves to `JSONDecoder`
        /// (`integerMismatch` then tells of a number that was no integer of the type asked for).
        func decode<T>(
            _ name: String, userInfo: [CodingUserInfoKey: any Sendable], integerMismatch: inout IntegerMismatch?,
            _ body: (any Decoder) throws -> T
        ) -> T? {
            guard let value = member(name) else { return nil }
            return RequestJSONDecoder.decode(
                value, key: MemberKey(stringValue: name), userInfo: userInfo,
                integerMismatch: &integerMismatch, body)
        }

        private func member(_ name: String) -> JSONValue? { findMember(name, in: members) }
    }

    private struct MemberKey: CodingKey {
        let stringValue: String
        var intValue: Int? { nil }
        init(stringValue: String) { self.stringValue = stringValue }
        init?(intValue: Int) { nil }
    }
}

private enum JSONValue: Sendable {
    case null
    case bool(Bool)
    /// The literal as written (the decoder takes plain integers only).
    case number(String)
    case string(String)
    case array([JSONValue])
    case object([(key: String, value: JSONValue)])

    var kindIsNull: Bool { if case .null = self { return true } else { return false } }
}

// MARK: - Parsing (RFC 8259, strict; nil on anything else)

private struct JSONParser {
    let bytes: UnsafeBufferPointer<UInt8>
    var index = 0
    var depth = 0
    /// JSON, whatever else; a well-formed document with a duplicate key still gives nil.
    private(set) var isWellFormed = false
    /// The first key met twice in one object.
    private(set) var duplicateKey: String?
    /// Two names in one object that differ in code units but are canonically equal strings.
    private var metEquivalentKeys = false
    private(set) var tooDeep = false

    init(bytes: UnsafeBufferPointer<UInt8>) { self.bytes = bytes }

    mutating func parseDocument() -> JSONValue? {
        // A UTF-8 byte order mark may be ignored (RFC 8259 §8.1), as JSONDecoder does.
        if bytes.count >= 3, bytes[0] == 0xEF, bytes[1] == 0xBB, bytes[2] == 0xBF { index = 3 }
        skipWhitespace()
        guard let value = parseValue() else { return nil }
        skipWhitespace()
        isWellFormed = index == bytes.count
        return isWellFormed && duplicateKey == nil && !metEquivalentKeys ? value : nil
    }

    private mutating func skipWhitespace() {
        while index < bytes.count {
            switch bytes[index] {
            case 0x20, 0x09, 0x0A, 0x0D: index += 1
            default: return
            }
        }
    }

    private mutating func parseValue() -> JSONValue? {
        guard index < bytes.count else { return nil }
        switch bytes[index] {
        case UInt8(ascii: "{"): return parseObject()
        case UInt8(ascii: "["): return parseArray()
        case UInt8(ascii: "\""): return parseString().map(JSONValue.string)
        case UInt8(ascii: "t"): return literal("true") ? .bool(true) : nil
        case UInt8(ascii: "f"): return literal("false") ? .bool(false) : nil
        case UInt8(ascii: "n"): return literal("null") ? .null : nil
        case UInt8(ascii: "-"), UInt8(ascii: "0")...UInt8(ascii: "9"): return parseNumber()
        default: return nil
        }
    }

    private mutating func literal(_ word: StaticString) -> Bool {
        let count = word.utf8CodeUnitCount
        guard bytes.count - index >= count else { return false }
        for offset in 0..<count where bytes[index + offset] != word.utf8Start[offset] { return false }
        index += count
        return true
    }

    private mutating func parseObject() -> JSONValue? {
        depth += 1
        guard depth <= RequestJSONDecoder.maxDepth else {
            tooDeep = true
            return nil
        }
        defer { depth -= 1 }
        index += 1
        var members: [(key: String, value: JSONValue)] = []
        var names = MemberNames()
        skipWhitespace()
        if index < bytes.count, bytes[index] == UInt8(ascii: "}") {
            index += 1
            return .object(members)
        }
        members.reserveCapacity(4)  // an envelope's few members without growing
        while true {
            skipWhitespace()
            guard index < bytes.count, bytes[index] == UInt8(ascii: "\""), let key = parseString() else { return nil }
            skipWhitespace()
            guard index < bytes.count, bytes[index] == UInt8(ascii: ":") else { return nil }
            index += 1
            skipWhitespace()
            guard let value = parseValue() else { return nil }
            // A duplicate key is refused once the rest is known to be JSON.
            switch names.add(key, among: members) {
            case .new: members.append((key, value))
            case .duplicate: if duplicateKey == nil { duplicateKey = key }
            case .equivalent: metEquivalentKeys = true
            }
            skipWhitespace()
            guard index < bytes.count else { return nil }
            if bytes[index] == UInt8(ascii: ",") {
                index += 1
                continue
            }
            if bytes[index] == UInt8(ascii: "}") {
                index += 1
                return .object(members)
            }
            return nil
        }
    }

    private mutating func parseArray() -> JSONValue? {
        depth += 1
        guard depth <= RequestJSONDecoder.maxDepth else {
            tooDeep = true
            return nil
        }
        defer { depth -= 1 }
        index += 1
        var elements: [JSONValue] = []
        skipWhitespace()
        if index < bytes.count, bytes[index] == UInt8(ascii: "]") {
            index += 1
            return .array(elements)
        }
        while true {
            skipWhitespace()
            guard let value = parseValue() else { return nil }
            elements.append(value)
            skipWhitespace()
            guard index < bytes.count else { return nil }
            if bytes[index] == UInt8(ascii: ",") {
                index += 1
                continue
            }
            if bytes[index] == UInt8(ascii: "]") {
                index += 1
                return .array(elements)
            }
            return nil
        }
    }

    private mutating func parseNumber() -> JSONValue? {
        let start = index
        if bytes[index] == UInt8(ascii: "-") { index += 1 }
        guard index < bytes.count else { return nil }
        if bytes[index] == UInt8(ascii: "0") {
            index += 1
        } else if (UInt8(ascii: "1")...UInt8(ascii: "9")).contains(bytes[index]) {
            while index < bytes.count, (UInt8(ascii: "0")...UInt8(ascii: "9")).contains(bytes[index]) { index += 1 }
        } else {
            return nil
        }
        if index < bytes.count, bytes[index] == UInt8(ascii: ".") {
            index += 1
            let digits = index
            while index < bytes.count, (UInt8(ascii: "0")...UInt8(ascii: "9")).contains(bytes[index]) { index += 1 }
            guard index > digits else { return nil }
        }
        if index < bytes.count, bytes[index] == UInt8(ascii: "e") || bytes[index] == UInt8(ascii: "E") {
            index += 1
            if index < bytes.count, bytes[index] == UInt8(ascii: "+") || bytes[index] == UInt8(ascii: "-") {
                index += 1
            }
            let digits = index
            while index < bytes.count, (UInt8(ascii: "0")...UInt8(ascii: "9")).contains(bytes[index]) { index += 1 }
            guard index > digits else { return nil }
        }
        return .number(String(decoding: UnsafeBufferPointer(rebasing: bytes[start..<index]), as: UTF8.self))
    }

    /// At an opening quote. Valid UTF-8 only; escapes per RFC 8259, surrogates paired.
    private mutating func parseString() -> String? {
        index += 1
        let start = index
        var escaped = false
        var ascii = true
        while index < bytes.count {
            let byte = bytes[index]
            if byte == UInt8(ascii: "\"") { break }
            if byte < 0x20 { return nil }
            if byte >= 0x80 { ascii = false }
            if byte == UInt8(ascii: "\\") {
                escaped = true
                index += 2
            } else {
                index += 1
            }
        }
        guard index < bytes.count else { return nil }
        let raw = UnsafeBufferPointer(rebasing: bytes[start..<index])
        index += 1
        if escaped { return JSONScan.unescaped(raw) }
        // ASCII is valid UTF-8: no validation pass (String(validating:) cost ~1k instructions).
        return ascii ? String(decoding: raw, as: UTF8.self) : String(validating: raw, as: UTF8.self)
    }
}

// MARK: - Decoding

private final class DecodingContext {
    /// Sendable values, as JSONDecoder's, so one dictionary serves both decoders.
    let userInfo: [CodingUserInfoKey: any Sendable]
    /// Set where an answer might differ from JSONDecoder's (`allKeys`): the result is not used.
    var declined = false
    var integerMismatch: RequestJSONDecoder.IntegerMismatch?
    init(userInfo: [CodingUserInfoKey: any Sendable]) { self.userInfo = userInfo }
}

private final class ValueDecoder: Decoder {
    let value: JSONValue
    let parent: ValueDecoder?
    let key: (any CodingKey)?
    let context: DecodingContext

    init(value: JSONValue, parent: ValueDecoder?, key: (any CodingKey)?, context: DecodingContext) {
        self.value = value
        self.parent = parent
        self.key = key
        self.context = context
    }

    /// A copy on each read (Decoder's `userInfo` is `[_: Any]`): ActionRequest's general path
    /// reads it, the common request (ActionFields) does not.
    var userInfo: [CodingUserInfoKey: Any] { context.userInfo }

    var codingPath: [any CodingKey] {
        guard let key else { return [] }
        guard let parent else { return [key] }
        return parent.codingPath + [key]
    }

    func container<Key: CodingKey>(keyedBy type: Key.Type) throws -> KeyedDecodingContainer<Key> {
        guard case let .object(members) = value else { throw decline() }
        return KeyedDecodingContainer(KeyedContainer<Key>(decoder: self, members: members))
    }

    func unkeyedContainer() throws -> any UnkeyedDecodingContainer {
        guard case let .array(elements) = value else { throw decline() }
        return UnkeyedContainer(decoder: self, elements: elements)
    }

    func singleValueContainer() throws -> any SingleValueDecodingContainer { SingleContainer(decoder: self) }

    func child(_ value: JSONValue, key: any CodingKey) -> ValueDecoder {
        ValueDecoder(value: value, parent: self, key: key, context: context)
    }
}

/// The conversions every container shares: exact types only, anything doubtful declined.
private enum Convert {
    static func string(_ value: JSONValue) -> String? {
        guard case let .string(text) = value else { return nil }
        return text
    }

    static func bool(_ value: JSONValue) -> Bool? {
        guard case let .bool(flag) = value else { return nil }
        return flag
    }

    /// Plain integer literals only (no fraction, no exponent), within `T`'s range.
    static func integer<T: FixedWidthInteger>(_ value: JSONValue, as _: T.Type) -> T? {
        guard case let .number(text) = value else { return nil }
        if T.isSigned {
            guard let wide = Int64(text) else { return nil }
            return T(exactly: wide)
        }
        guard let wide = UInt64(text) else { return nil }
        return T(exactly: wide)
    }
}

extension ValueDecoder {
    /// Every refusal is remembered: a decoded type that catches it and tries something else
    /// must not give a value JSONDecoder would not.
    func decline() -> Declined {
        context.declined = true
        return Declined()
    }

    /// An integer of type `T`, or a refusal that remembers where a number did not fit.
    func integer<T: FixedWidthInteger>(
        _ value: JSONValue, as _: T.Type,
        path: @autoclosure () -> [any CodingKey]
    ) throws -> T {
        if let integer = Convert.integer(value, as: T.self) { return integer }
        if case let .number(literal) = value, context.integerMismatch == nil {
            context.integerMismatch = .init(path: path(), literal: literal, type: T.self)
        }
        throw decline()
    }

    func must<T>(_ value: T?) throws -> T {
        guard let value else { throw decline() }
        return value
    }

    func decodeValue<T: Decodable>(_ type: T.Type, _ value: JSONValue, child: () -> ValueDecoder) throws -> T {
        if T.self == String.self { return unsafeBitCast(try must(Convert.string(value)), to: T.self) }
        if T.self == Bool.self { return unsafeBitCast(try must(Convert.bool(value)), to: T.self) }
        if T.self == Int.self {
            return unsafeBitCast(try integer(value, as: Int.self, path: child().codingPath), to: T.self)
        }
        // JSONDecoder has rules of its own for these (and for floating point text).
        if T.self == Double.self || T.self == Float.self || T.self == Date.self || T.self == Data.self
            || T.self == URL.self || T.self == Decimal.self
        {
            throw decline()
        }
        return try T(from: child())
    }
}

private struct KeyedContainer<Key: CodingKey>: KeyedDecodingContainerProtocol {
    let decoder: ValueDecoder
    let members: [(key: String, value: JSONValue)]

    var codingPath: [any CodingKey] { decoder.codingPath }

    var allKeys: [Key] {
        decoder.context.declined = true  // JSONDecoder's order is its own
        return members.compactMap { Key(stringValue: $0.key) }
    }

    private func find(_ key: Key) -> JSONValue? { findMember(key.stringValue, in: members) }

    private func require(_ key: Key) throws -> JSONValue {
        guard let value = find(key) else { throw decoder.decline() }
        return value
    }

    func contains(_ key: Key) -> Bool { find(key) != nil }

    func decodeNil(forKey key: Key) throws -> Bool { try require(key).kindIsNull }
    func decode(_ type: Bool.Type, forKey key: Key) throws -> Bool { try decoder.must(Convert.bool(require(key))) }
    func decode(_ type: String.Type, forKey key: Key) throws -> String {
        try decoder.must(Convert.string(require(key)))
    }
    func decode(_ type: Double.Type, forKey key: Key) throws -> Double { throw decoder.decline() }
    func decode(_ type: Float.Type, forKey key: Key) throws -> Float { throw decoder.decline() }
    func decode(_ type: Int.Type, forKey key: Key) throws -> Int {
        try decoder.integer(require(key), as: Int.self, path: codingPath + [key])
    }
    func decode(_ type: Int8.Type, forKey key: Key) throws -> Int8 {
        try decoder.integer(require(key), as: Int8.self, path: codingPath + [key])
    }
    func decode(_ type: Int16.Type, forKey key: Key) throws -> Int16 {
        try decoder.integer(require(key), as: Int16.self, path: codingPath + [key])
    }
    func decode(_ type: Int32.Type, forKey key: Key) throws -> Int32 {
        try decoder.integer(require(key), as: Int32.self, path: codingPath + [key])
    }
    func decode(_ type: Int64.Type, forKey key: Key) throws -> Int64 {
        try decoder.integer(require(key), as: Int64.self, path: codingPath + [key])
    }
    func decode(_ type: UInt.Type, forKey key: Key) throws -> UInt {
        try decoder.integer(require(key), as: UInt.self, path: codingPath + [key])
    }
    func decode(_ type: UInt8.Type, forKey key: Key) throws -> UInt8 {
        try decoder.integer(require(key), as: UInt8.self, path: codingPath + [key])
    }
    func decode(_ type: UInt16.Type, forKey key: Key) throws -> UInt16 {
        try decoder.integer(require(key), as: UInt16.self, path: codingPath + [key])
    }
    func decode(_ type: UInt32.Type, forKey key: Key) throws -> UInt32 {
        try decoder.integer(require(key), as: UInt32.self, path: codingPath + [key])
    }
    func decode(_ type: UInt64.Type, forKey key: Key) throws -> UInt64 {
        try decoder.integer(require(key), as: UInt64.self, path: codingPath + [key])
    }
    func decode<T: Decodable>(_ type: T.Type, forKey key: Key) throws -> T {
        let value = try require(key)
        return try decoder.decodeValue(T.self, value) { decoder.child(value, key: key) }
    }

    func nestedContainer<NestedKey: CodingKey>(keyedBy type: NestedKey.Type, forKey key: Key) throws
        -> KeyedDecodingContainer<NestedKey>
    {
        try decoder.child(require(key), key: key).container(keyedBy: NestedKey.self)
    }

    func nestedUnkeyedContainer(forKey key: Key) throws -> any UnkeyedDecodingContainer {
        try decoder.child(require(key), key: key).unkeyedContainer()
    }

    func superDecoder() throws -> any Decoder { throw decoder.decline() }

    func superDecoder(forKey key: Key) throws -> any Decoder { decoder.child(try require(key), key: key) }
}

private struct UnkeyedContainer: UnkeyedDecodingContainer {
    let decoder: ValueDecoder
    let elements: [JSONValue]
    var currentIndex = 0

    init(decoder: ValueDecoder, elements: [JSONValue]) {
        self.decoder = decoder
        self.elements = elements
    }

    var codingPath: [any CodingKey] { decoder.codingPath }
    var count: Int? { elements.count }
    var isAtEnd: Bool { currentIndex >= elements.count }

    private mutating func next() throws -> JSONValue {
        guard currentIndex < elements.count else { throw decoder.decline() }
        defer { currentIndex += 1 }
        return elements[currentIndex]
    }

    mutating func decodeNil() throws -> Bool {
        guard currentIndex < elements.count else { throw decoder.decline() }
        if elements[currentIndex].kindIsNull {
            currentIndex += 1
            return true
        }
        return false
    }

    mutating func decode(_ type: Bool.Type) throws -> Bool { try decoder.must(Convert.bool(next())) }
    mutating func decode(_ type: String.Type) throws -> String { try decoder.must(Convert.string(next())) }
    mutating func decode(_ type: Double.Type) throws -> Double { throw decoder.decline() }
    mutating func decode(_ type: Float.Type) throws -> Float { throw decoder.decline() }
    mutating func decode(_ type: Int.Type) throws -> Int {
        try decoder.integer(next(), as: Int.self, path: codingPath + [IndexKey(currentIndex - 1)])
    }
    mutating func decode(_ type: Int8.Type) throws -> Int8 {
        try decoder.integer(next(), as: Int8.self, path: codingPath + [IndexKey(currentIndex - 1)])
    }
    mutating func decode(_ type: Int16.Type) throws -> Int16 {
        try decoder.integer(next(), as: Int16.self, path: codingPath + [IndexKey(currentIndex - 1)])
    }
    mutating func decode(_ type: Int32.Type) throws -> Int32 {
        try decoder.integer(next(), as: Int32.self, path: codingPath + [IndexKey(currentIndex - 1)])
    }
    mutating func decode(_ type: Int64.Type) throws -> Int64 {
        try decoder.integer(next(), as: Int64.self, path: codingPath + [IndexKey(currentIndex - 1)])
    }
    mutating func decode(_ type: UInt.Type) throws -> UInt {
        try decoder.integer(next(), as: UInt.self, path: codingPath + [IndexKey(currentIndex - 1)])
    }
    mutating func decode(_ type: UInt8.Type) throws -> UInt8 {
        try decoder.integer(next(), as: UInt8.self, path: codingPath + [IndexKey(currentIndex - 1)])
    }
    mutating func decode(_ type: UInt16.Type) throws -> UInt16 {
        try decoder.integer(next(), as: UInt16.self, path: codingPath + [IndexKey(currentIndex - 1)])
    }
    mutating func decode(_ type: UInt32.Type) throws -> UInt32 {
        try decoder.integer(next(), as: UInt32.self, path: codingPath + [IndexKey(currentIndex - 1)])
    }
    mutating func decode(_ type: UInt64.Type) throws -> UInt64 {
        try decoder.integer(next(), as: UInt64.self, path: codingPath + [IndexKey(currentIndex - 1)])
    }
    mutating func decode<T: Decodable>(_ type: T.Type) throws -> T {
        let key = IndexKey(currentIndex)
        let value = try next()
        return try decoder.decodeValue(T.self, value) { decoder.child(value, key: key) }
    }

    mutating func nestedContainer<NestedKey: CodingKey>(keyedBy type: NestedKey.Type) throws
        -> KeyedDecodingContainer<NestedKey>
    {
        let key = IndexKey(currentIndex)
        return try decoder.child(next(), key: key).container(keyedBy: NestedKey.self)
    }

    mutating func nestedUnkeyedContainer() throws -> any UnkeyedDecodingContainer {
        let key = IndexKey(currentIndex)
        return try decoder.child(next(), key: key).unkeyedContainer()
    }

    mutating func superDecoder() throws -> any Decoder {
        let key = IndexKey(currentIndex)
        return decoder.child(try next(), key: key)
    }
}

private struct SingleContainer: SingleValueDecodingContainer {
    let decoder: ValueDecoder

    var codingPath: [any CodingKey] { decoder.codingPath }
    private var value: JSONValue { decoder.value }

    func decodeNil() -> Bool { value.kindIsNull }
    func decode(_ type: Bool.Type) throws -> Bool { try decoder.must(Convert.bool(value)) }
    func decode(_ type: String.Type) throws -> String { try decoder.must(Convert.string(value)) }
    func decode(_ type: Double.Type) throws -> Double { throw decoder.decline() }
    func decode(_ type: Float.Type) throws -> Float { throw decoder.decline() }
    func decode(_ type: Int.Type) throws -> Int { try decoder.integer(value, as: Int.self, path: codingPath) }
    func decode(_ type: Int8.Type) throws -> Int8 { try decoder.integer(value, as: Int8.self, path: codingPath) }
    func decode(_ type: Int16.Type) throws -> Int16 { try decoder.integer(value, as: Int16.self, path: codingPath) }
    func decode(_ type: Int32.Type) throws -> Int32 { try decoder.integer(value, as: Int32.self, path: codingPath) }
    func decode(_ type: Int64.Type) throws -> Int64 { try decoder.integer(value, as: Int64.self, path: codingPath) }
    func decode(_ type: UInt.Type) throws -> UInt { try decoder.integer(value, as: UInt.self, path: codingPath) }
    func decode(_ type: UInt8.Type) throws -> UInt8 { try decoder.integer(value, as: UInt8.self, path: codingPath) }
    func decode(_ type: UInt16.Type) throws -> UInt16 { try decoder.integer(value, as: UInt16.self, path: codingPath) }
    func decode(_ type: UInt32.Type) throws -> UInt32 { try decoder.integer(value, as: UInt32.self, path: codingPath) }
    func decode(_ type: UInt64.Type) throws -> UInt64 { try decoder.integer(value, as: UInt64.self, path: codingPath) }
    func decode<T: Decodable>(_ type: T.Type) throws -> T {
        // The value decodes from this same decoder (no new level in the path), as in JSONDecoder.
        try decoder.decodeValue(T.self, value) { decoder }
    }
}

/// The names met in one object, to refuse a repeated one. Names compare as JSON compares them,
/// code unit by code unit: "é" and "e\u{301}" are two names, but String's == (which reading a
/// member by name uses) takes them for one, so such a pair is told apart (`equivalent`) and
/// left to JSONDecoder. A few members are compared in turn; past that, sets, so that a body of
/// many thousand names costs time in proportion to them, not to their square (which held
/// libmicrohttpd's thread for seconds).
private struct MemberNames {
    enum Met { case new, duplicate, equivalent }

    private static let scanned = 16
    private var exact: Set<Bytewise<String>> = []
    private var equal: Set<String> = []

    mutating func add(_ key: String, among members: [(key: String, value: JSONValue)]) -> Met {
        if members.count < Self.scanned {
            if members.contains(where: { $0.key.utf8.elementsEqual(key.utf8) }) { return .duplicate }
            if members.contains(where: { $0.key == key }) { return .equivalent }
            if members.count == Self.scanned - 1 {  // the next name is looked up in the sets
                exact = Set(members.map { Bytewise($0.key) } + [Bytewise(key)])
                equal = Set(members.map(\.key) + [key])
            }
            return .new
        }
        if exact.contains(Bytewise(key)) { return .duplicate }
        if !equal.insert(key).inserted { return .equivalent }
        exact.insert(Bytewise(key))
        return .new
    }
}
