import ReactorCore

#if canImport(FoundationEssentials)
import FoundationEssentials
#else
import Foundation
#endif

/// Writes a state's JSON while its `encode(to:)` runs, straight into one buffer: no tree, no
/// encoder or container object per field. The bytes are `JSONText.makeEncoder()`'s (sorted keys,
/// slashes unescaped): an object's members are written as they come and put in key order when
/// it closes, which is when the `encode(to:)` that opened it returns, or when a member is
/// written to a container further out.
///
/// It covers what synthesized and hand-written `Codable` states do in the plain way: keyed and
/// unkeyed containers, single values, optionals, `@Pulse`. What a stream cannot follow (nested
/// containers, `superEncoder`, writing into a container after a sibling closed it, a value
/// written twice) sets `failed`, and `StateEncoding` takes the tree encoder (`StateJSONEncoder`)
/// instead, whose bytes are the same.
///
/// One writer per thread (`current`), reused: its buffers keep their capacity, so a state
/// costs the allocation of its bytes and one box per keyed container (Codable's own).
final class StateJSONWriter {
    struct Frame {
        let id: Int
        let isObject: Bool
        /// Where its `{` or `[` is.
        let start: Int
        /// Its first member in `members`.
        let memberBase: Int
        var count = 0
    }

    struct Member {
        let key: String
        /// Where its key starts (after the comma before it, if any).
        let start: Int
    }

    @exclusivity(unchecked) var out: [UInt8] = []
    @exclusivity(unchecked) private var frames: [Frame] = []
    /// A pool: the first `memberCount` are live (shrinking an array costs ~220 instructions).
    @exclusivity(unchecked) private var members: [Member] = []
    @exclusivity(unchecked) private var memberCount = 0
    /// The keys from the state down to the value being written, for `codingPath` and pulse names.
    @exclusivity(unchecked) private(set) var path: [any CodingKey] = []
    @exclusivity(unchecked) private var nextID = 0
    /// Set where the stream cannot follow the value (see the type's note).
    @exclusivity(unchecked) var failed = false
    @exclusivity(unchecked) private(set) var pulses = EncodedState.Pulses()
    @exclusivity(unchecked) private var inUse = false

    /// This thread's writer, or a new one while it is busy (a state encoded inside another's
    /// `encode(to:)`).
    static func withCurrent<T>(_ body: (StateJSONWriter) throws -> T) rethrows -> T {
        let writer = perThread.value
        if writer.inUse { return try body(StateJSONWriter()) }
        writer.inUse = true
        defer { writer.inUse = false }
        return try body(writer)
    }

    private static let perThread = ThreadLocal { StateJSONWriter() }
    private static let keptCapacity = 64 * 1024

    /// The JSON of `value` (its pulses in `pulses`); throws `StateJSONEncoder.Unsupported`
    /// where the tree encoder must take over.
    func encode(_ value: some Encodable) throws -> [UInt8] {
        // Emptied only when not empty: `removeAll(keepingCapacity:)` costs ~80 instructions each.
        if !out.isEmpty { out.removeAll(keepingCapacity: true) }
        if !frames.isEmpty { frames.removeAll(keepingCapacity: true) }
        memberCount = 0
        if !path.isEmpty { path.removeAll(keepingCapacity: true) }
        pulses = EncodedState.Pulses()
        failed = false
        try PulseRecording.recording(into: self) { try writeValue(value) }
        guard !failed, frames.isEmpty else { throw StateJSONEncoder.Unsupported() }
        // The session keeps these bytes: exactly their size, and not the writer's buffer.
        let json = out.withUnsafeBufferPointer { Array($0) }
        // A thread keeps its writer for good: not the buffer of one large state.
        if out.capacity > Self.keptCapacity { out = [] }
        return json
    }

    // MARK: Values

    /// Writes one value where the stream stands.
    func writeValue<T: Encodable>(_ value: T) throws {
        if T.self == String.self {
            return StateJSONEncoder.appendString(unsafeBitCast(value, to: String.self), into: &out)
        }
        if T.self == Int.self {
            return StateJSONEncoder.appendInteger(Int64(unsafeBitCast(value, to: Int.self)), into: &out)
        }
        if T.self == Bool.self { return append(unsafeBitCast(value, to: Bool.self)) }
        if T.self == Double.self {
            return out.append(contentsOf: try StateJSONEncoder.floatText(unsafeBitCast(value, to: Double.self)))
        }
        if T.self == Float.self {
            return out.append(contentsOf: try StateJSONEncoder.floatText(unsafeBitCast(value, to: Float.self)))
        }
        if T.self == Date.self || T.self == Data.self || T.self == URL.self || T.self == Decimal.self {
            // JSONEncoder's own strategies.
            return out.append(contentsOf: try JSONText.makeEncoder().encode(value))
        }
        let base = frames.count
        let start = out.count
        try value.encode(to: LevelEncoder(writer: self, base: base, start: start))
        close(downTo: base)
        if out.count == start { throw StateJSONEncoder.Unsupported() }  // it encoded nothing
    }

    func append(_ value: Bool) { appendASCII(value ? "true" : "false") }
    func appendNull() { appendASCII("null") }

    /// A literal's bytes by one copy (appending a string's `utf8` goes byte by byte).
    private func appendASCII(_ text: StaticString) {
        out.append(contentsOf: UnsafeBufferPointer(start: text.utf8Start, count: text.utf8CodeUnitCount))
    }

    /// `value` under `key`, with the key on the path while it is written.
    func writeValue<T: Encodable>(_ value: T, at key: any CodingKey) throws {
        path.append(key)
        defer { path.removeLast() }
        try writeValue(value)
    }

    // MARK: Containers

    /// Opens the container of the value whose encoding began at `start` with `base` frames open,
    /// or finds it again (JSONEncoder lets a value ask for its container twice). The frame's id,
    /// or -1 where the stream cannot follow.
    func open(object: Bool, base: Int, start: Int) -> Int {
        // A super encoder's (base -1): the tree's.
        guard base >= 0 else {
            failed = true
            return -1
        }
        if frames.count > base {
            guard frames[base].isObject == object, frames[base].start == start else {
                failed = true
                return -1
            }
            close(downTo: base + 1)
            return frames[base].id
        }
        guard frames.count == base, out.count == start else {
            failed = true
            return -1
        }
        nextID += 1
        frames.append(Frame(id: nextID, isObject: object, start: start, memberBase: memberCount))
        out.append(object ? UInt8(ascii: "{") : UInt8(ascii: "["))
        return nextID
    }

    /// Starts a member of the object `id` at `index`: closes what is open inside it, writes the key.
    func beginMember(_ index: Int, _ id: Int, _ key: String) throws {
        try beginItem(index, id)
        let member = Member(key: key, start: out.count)
        if memberCount < members.count { members[memberCount] = member } else { members.append(member) }
        memberCount += 1
        StateJSONEncoder.appendString(key, into: &out)
        out.append(UInt8(ascii: ":"))
    }

    /// Starts an item (member or element) of the container `id` at `index`.
    func beginItem(_ index: Int, _ id: Int) throws {
        guard index >= 0, index < frames.count, frames[index].id == id else {
            failed = true
            throw StateJSONEncoder.Unsupported()
        }
        close(downTo: index + 1)
        if frames[index].count > 0 { out.append(UInt8(ascii: ",")) }
        frames[index].count += 1
    }

    func count(_ index: Int, _ id: Int) -> Int {
        index >= 0 && index < frames.count && frames[index].id == id ? frames[index].count : 0
    }

    private func close(downTo count: Int) {
        while frames.count > count { close(frames.removeLast()) }
    }

    private func close(_ frame: Frame) {
        guard frame.isObject else {
            out.append(UInt8(ascii: "]"))
            return
        }
        let base = frame.memberBase
        var sorted = true
        var index = base + 1
        while index < memberCount {
            if !(members[index - 1].key < members[index].key) {
                sorted = false
                break
            }
            index += 1
        }
        if !sorted { reorder(frame) }
        out.append(UInt8(ascii: "}"))
        memberCount = base
    }

    /// Rewrites an object's members in key order, as `JSONEncoder` sorts them (`String`'s `<`);
    /// of a key written twice the last value stays, as there.
    private func reorder(_ frame: Frame) {
        let base = frame.memberBase
        let count = memberCount - base
        let body = frame.start + 1
        let length = out.count - body
        // Scratch on the stack (small states), not arrays: their bookkeeping cost more than the sort.
        withUnsafeTemporaryAllocation(of: Int.self, capacity: count) { order in
            // Insertion sort, stable: a state has few fields.
            for position in 0..<count {
                var at = position
                while at > 0, members[base + position].key < members[base + order[at - 1]].key {
                    order[at] = order[at - 1]
                    at -= 1
                }
                order[at] = position
            }
            withUnsafeTemporaryAllocation(of: UInt8.self, capacity: length) { copy in
                // Back in place, from the copy: never longer than before (a repeated key only drops out).
                var end = body
                out.withUnsafeMutableBufferPointer { target in
                    let source = copy.baseAddress!
                    source.initialize(from: target.baseAddress! + body, count: length)
                    var first = true
                    for rank in 0..<count {
                        let position = order[rank]
                        if rank + 1 < count, members[base + order[rank + 1]].key == members[base + position].key {
                            continue
                        }
                        let from = members[base + position].start - body
                        let to = position + 1 < count ? members[base + position + 1].start - body - 1 : length
                        if !first {
                            target[end] = UInt8(ascii: ",")
                            end += 1
                        }
                        first = false
                        (target.baseAddress! + end).update(from: source + from, count: to - from)
                        end += to - from
                    }
                }
                if end < out.count { out.removeLast(out.count - end) }
            }
        }
    }
}

extension StateJSONWriter: PulseEncodingRecorder {
    func record(pulseIn encoder: any Encoder, updatedCount: UInt, value: any Encodable) -> Bool {
        // Only this writer's own encoders: a JSONEncoder run inside a state knows nothing of it.
        guard ObjectIdentifier(type(of: encoder)) == ObjectIdentifier(LevelEncoder.self) else { return false }
        let name = path.count == 1 ? path[0].stringValue : path.map(\.stringValue).joined(separator: ".")
        pulses.append(EncodedState.PulseField(name: name, updatedCount: updatedCount, value: value))
        return true
    }
}

/// The encoder a value writes itself into: where the writer stood when it began. Three words,
/// so passing it as `any Encoder` allocates nothing.
private struct LevelEncoder: Encoder {
    let writer: StateJSONWriter
    /// Frames open when the value began: its container, if it asks for one, is the next.
    let base: Int
    /// Where its bytes begin.
    let start: Int

    var codingPath: [any CodingKey] { writer.path }
    var userInfo: [CodingUserInfoKey: Any] { [:] }

    func container<Key: CodingKey>(keyedBy type: Key.Type) -> KeyedEncodingContainer<Key> {
        let id = writer.open(object: true, base: base, start: start)
        return KeyedEncodingContainer(KeyedWriter<Key>(writer: writer, index: base, id: id))
    }

    func unkeyedContainer() -> any UnkeyedEncodingContainer {
        UnkeyedWriter(writer: writer, index: base, id: writer.open(object: false, base: base, start: start))
    }

    func singleValueContainer() -> any SingleValueEncodingContainer {
        SingleWriter(writer: writer, base: base, start: start)
    }
}

private struct KeyedWriter<Key: CodingKey>: KeyedEncodingContainerProtocol {
    let writer: StateJSONWriter
    let index: Int
    let id: Int

    var codingPath: [any CodingKey] { writer.path }

    private func begin(_ key: Key) throws { try writer.beginMember(index, id, key.stringValue) }

    mutating func encodeNil(forKey key: Key) throws {
        try begin(key)
        writer.appendNull()
    }
    mutating func encode(_ value: Bool, forKey key: Key) throws {
        try begin(key)
        writer.append(value)
    }
    mutating func encode(_ value: String, forKey key: Key) throws {
        try begin(key)
        StateJSONEncoder.appendString(value, into: &writer.out)
    }
    mutating func encode(_ value: Double, forKey key: Key) throws {
        try begin(key)
        writer.out.append(contentsOf: try StateJSONEncoder.floatText(value))
    }
    mutating func encode(_ value: Float, forKey key: Key) throws {
        try begin(key)
        writer.out.append(contentsOf: try StateJSONEncoder.floatText(value))
    }
    mutating func encode(_ value: Int, forKey key: Key) throws { try integer(Int64(value), key) }
    mutating func encode(_ value: Int8, forKey key: Key) throws { try integer(Int64(value), key) }
    mutating func encode(_ value: Int16, forKey key: Key) throws { try integer(Int64(value), key) }
    mutating func encode(_ value: Int32, forKey key: Key) throws { try integer(Int64(value), key) }
    mutating func encode(_ value: Int64, forKey key: Key) throws { try integer(value, key) }
    mutating func encode(_ value: UInt, forKey key: Key) throws { try unsigned(UInt64(value), key) }
    mutating func encode(_ value: UInt8, forKey key: Key) throws { try unsigned(UInt64(value), key) }
    mutating func encode(_ value: UInt16, forKey key: Key) throws { try unsigned(UInt64(value), key) }
    mutating func encode(_ value: UInt32, forKey key: Key) throws { try unsigned(UInt64(value), key) }
    mutating func encode(_ value: UInt64, forKey key: Key) throws { try unsigned(value, key) }
    mutating func encode<T: Encodable>(_ value: T, forKey key: Key) throws {
        try begin(key)
        try writer.writeValue(value, at: key)
    }

    private func integer(_ value: Int64, _ key: Key) throws {
        try begin(key)
        StateJSONEncoder.appendInteger(value, into: &writer.out)
    }

    private func unsigned(_ value: UInt64, _ key: Key) throws {
        try begin(key)
        StateJSONEncoder.appendUnsigned(value, into: &writer.out)
    }

    // What a stream cannot follow: the tree encoder takes the whole value.
    mutating func nestedContainer<NestedKey: CodingKey>(
        keyedBy keyType: NestedKey.Type, forKey key: Key
    ) -> KeyedEncodingContainer<NestedKey> {
        writer.failed = true
        return KeyedEncodingContainer(KeyedWriter<NestedKey>(writer: writer, index: index, id: -1))
    }

    mutating func nestedUnkeyedContainer(forKey key: Key) -> any UnkeyedEncodingContainer {
        writer.failed = true
        return UnkeyedWriter(writer: writer, index: index, id: -1)
    }

    mutating func superEncoder() -> any Encoder {
        writer.failed = true
        return LevelEncoder(writer: writer, base: -1, start: -1)
    }

    mutating func superEncoder(forKey key: Key) -> any Encoder { superEncoder() }
}

private struct UnkeyedWriter: UnkeyedEncodingContainer, ScalarWriting {
    let writer: StateJSONWriter
    let index: Int
    let id: Int

    var codingPath: [any CodingKey] { writer.path }
    var count: Int { writer.count(index, id) }

    /// An item of this array begins.
    func beginScalar() throws { try writer.beginItem(index, id) }

    mutating func encode<T: Encodable>(_ value: T) throws {
        let position = count
        try writer.beginItem(index, id)
        try writer.writeValue(value, at: IndexKey(position))
    }

    mutating func nestedContainer<NestedKey: CodingKey>(keyedBy keyType: NestedKey.Type) -> KeyedEncodingContainer<
        NestedKey
    > {
        writer.failed = true
        return KeyedEncodingContainer(KeyedWriter<NestedKey>(writer: writer, index: index, id: -1))
    }

    mutating func nestedUnkeyedContainer() -> any UnkeyedEncodingContainer {
        writer.failed = true
        return UnkeyedWriter(writer: writer, index: index, id: -1)
    }

    mutating func superEncoder() -> any Encoder {
        writer.failed = true
        return LevelEncoder(writer: writer, base: -1, start: -1)
    }
}

private struct SingleWriter: SingleValueEncodingContainer, ScalarWriting {
    let writer: StateJSONWriter
    let base: Int
    let start: Int

    var codingPath: [any CodingKey] { writer.path }

    /// One value per encoder, and none beside a container.
    private func claim() throws {
        guard writer.out.count == start, !writer.failed else {
            writer.failed = true
            throw StateJSONEncoder.Unsupported()
        }
    }

    func beginScalar() throws { try claim() }

    mutating func encode<T: Encodable>(_ value: T) throws {
        try claim()
        // The value encodes at this same level (no new key on the path), as in JSONEncoder.
        try writer.writeValue(value)
    }
}

/// The scalar `encode` overloads the array and single-value containers share: each begins its
/// value its own way (`beginScalar`), then writes the same bytes.
private protocol ScalarWriting {
    var writer: StateJSONWriter { get }
    func beginScalar() throws
}

extension ScalarWriting {
    mutating func encodeNil() throws {
        try beginScalar()
        writer.appendNull()
    }
    mutating func encode(_ value: Bool) throws {
        try beginScalar()
        writer.append(value)
    }
    mutating func encode(_ value: String) throws {
        try beginScalar()
        StateJSONEncoder.appendString(value, into: &writer.out)
    }
    mutating func encode(_ value: Double) throws {
        try beginScalar()
        writer.out.append(contentsOf: try StateJSONEncoder.floatText(value))
    }
    mutating func encode(_ value: Float) throws {
        try beginScalar()
        writer.out.append(contentsOf: try StateJSONEncoder.floatText(value))
    }
    mutating func encode(_ value: Int) throws { try integer(Int64(value)) }
    mutating func encode(_ value: Int8) throws { try integer(Int64(value)) }
    mutating func encode(_ value: Int16) throws { try integer(Int64(value)) }
    mutating func encode(_ value: Int32) throws { try integer(Int64(value)) }
    mutating func encode(_ value: Int64) throws { try integer(value) }
    mutating func encode(_ value: UInt) throws { try unsigned(UInt64(value)) }
    mutating func encode(_ value: UInt8) throws { try unsigned(UInt64(value)) }
    mutating func encode(_ value: UInt16) throws { try unsigned(UInt64(value)) }
    mutating func encode(_ value: UInt32) throws { try unsigned(UInt64(value)) }
    mutating func encode(_ value: UInt64) throws { try unsigned(value) }

    private func integer(_ value: Int64) throws {
        try beginScalar()
        StateJSONEncoder.appendInteger(value, into: &writer.out)
    }

    private func unsigned(_ value: UInt64) throws {
        try beginScalar()
        StateJSONEncoder.appendUnsigned(value, into: &writer.out)
    }
}
