import ReactorCore

#if canImport(FoundationEssentials)
import FoundationEssentials
#else
import Foundation
#endif

/// A state as the wire sees it: its JSON (sorted keys, so equal states are equal bytes)
/// and the `@Pulse` fields met while encoding it, with their update counts.
struct EncodedState {
    struct PulseField {
        let name: String
        let updatedCount: UInt
        /// Boxed: the hub copies each field a few times, and an existential's copy goes through
        /// its type's value witnesses (~170 instructions), a reference's is a retain.
        private let box: ValueBox
        var value: any Encodable { box.value }

        init(name: String, updatedCount: UInt, value: any Encodable) {
            self.name = name
            self.updatedCount = updatedCount
            box = ValueBox(value)
        }

        private final class ValueBox {
            let value: any Encodable
            init(_ value: any Encodable) { self.value = value }
        }
    }

    /// The pulses, the first kept inline: a state has few, and an array for them cost an
    /// allocation per state.
    struct Pulses: Sequence, ExpressibleByArrayLiteral {
        private var first: PulseField?
        private var more: [PulseField] = []

        init(arrayLiteral elements: PulseField...) {
            for element in elements { append(element) }
        }

        mutating func append(_ field: PulseField) {
            if first == nil { first = field } else { more.append(field) }
        }

        var isEmpty: Bool { first == nil }

        func makeIterator() -> Iterator { Iterator(first: first, more: more.makeIterator()) }

        struct Iterator: IteratorProtocol {
            fileprivate var first: PulseField?
            fileprivate var more: IndexingIterator<[PulseField]>

            mutating func next() -> PulseField? {
                if let field = first {
                    first = nil
                    return field
                }
                return more.next()
            }
        }
    }

    let json: [UInt8]
    let pulses: Pulses
}

/// Encodes states in one pass that also finds their pulses: `Pulse` reports itself to the
/// encoder's observer (`PulseObservingEncoder`, or `userInfo` for `JSONEncoder`), so no
/// reflection runs per event.
///
/// `StateJSONEncoder` writes the bytes; whatever it leaves to Foundation (see there) makes the
/// whole value go through `JSONEncoder` instead, so bytes and errors are `JSONEncoder`'s.
enum StateEncoding {
    static func encode(_ state: some Encodable) throws -> EncodedState {
        // The stream first; what it cannot follow goes to the tree, and what that declines to
        // JSONEncoder: the bytes are the same on every way.
        if let streamed = StateJSONWriter.withCurrent({ writer in
            (try? writer.encode(state)).map { EncodedState(json: $0, pulses: writer.pulses) }
        }) {
            return streamed
        }
        let collector = PulseCollector()
        var fast = StateJSONEncoder()
        fast.pulseObserver = collector
        do {
            let json = try fast.encode(state)
            return EncodedState(json: json, pulses: collector.pulses)
        } catch {
            return try encodeWithFoundation(state)
        }
    }

    /// The state's top-level field names, those whose value is nil now included, so that
    /// `?fields=` knows them from the State type rather than from the current value.
    static func fieldNames(of state: some Encodable) -> Set<String> {
        let absent = AbsentKeys()
        if let json = try? StateJSONEncoder().encode(state, absentKeys: absent) {
            return FieldFilter.fieldNames(of: json).union(absent.names)
        }
        // Foundation's encoder (where ours declines) tells nothing of nil fields.
        return (try? JSONText.makeEncoder().encode(state)).map { FieldFilter.fieldNames(of: Array($0)) } ?? []
    }

    static func encodeValue(_ value: any Encodable) -> [UInt8] {
        if let json = try? StateJSONEncoder().encode(value) { return json }
        return (try? Array(JSONText.makeEncoder().encode(value))) ?? Array("null".utf8)
    }

    /// The reference: Foundation's `JSONEncoder`, sorted keys, slashes unescaped.
    static func encodeWithFoundation(_ state: some Encodable) throws -> EncodedState {
        // Told of pulses through this thread's recorder rather than as `userInfo`'s observer, since
        // `userInfo` takes Sendable values only; its mark keeps out encoders JSONEncoder did not make.
        let collector = PulseCollector()
        let encoder = JSONText.makeEncoder()
        encoder.userInfo[PulseCollector.mark] = ObjectIdentifier(collector)
        let json = try PulseRecording.recording(into: collector) { try encoder.encode(state) }
        return EncodedState(json: Array(json), pulses: collector.pulses)
    }
}

private final class PulseCollector: PulseEncodingObserver, PulseEncodingRecorder {
    static let mark = CodingUserInfoKey(rawValue: "reactord.pulseCollector")!
    var pulses = EncodedState.Pulses()

    /// A pulse that an encoder marked with this collector encoded (see `encodeWithFoundation`).
    func record(pulseIn encoder: any Encoder, updatedCount: UInt, value: any Encodable) -> Bool {
        guard encoder.userInfo[Self.mark] as? ObjectIdentifier == ObjectIdentifier(self) else { return false }
        didEncodePulse(at: encoder.codingPath, updatedCount: updatedCount, value: value)
        return true
    }

    func didEncodePulse(at codingPath: [any CodingKey], updatedCount: UInt, value: any Encodable) {
        let name =
            codingPath.count == 1
            ? codingPath[0].stringValue
            : codingPath.map(\.stringValue).joined(separator: ".")
        pulses.append(.init(name: name, updatedCount: updatedCount, value: value))
    }
}
