import MicroHTTP

#if canImport(FoundationEssentials)
import FoundationEssentials
#else
import Foundation
#endif

/// `?fields=a,b`: a stream that wants only some top-level fields of the state.
struct FieldFilter: Hashable {
    let fields: [String]

    /// What may stand around a name: space, tab, CR, LF (as a regex character class's content,
    /// for the spec's pattern of `fields`, OpenAPISpec.fieldsPattern). Only these, and split on
    /// code points, so that the pattern a client validates against accepts exactly what this does.
    static let separatorSpace = " \\t\\r\\n"

    /// Parses the query value; unknown names are an error naming them and what exists.
    init(query: String, knownFields: Set<String>) throws(FieldFilterError) {
        let isSpace: (Unicode.Scalar) -> Bool = { $0 == " " || $0 == "\t" || $0 == "\r" || $0 == "\n" }
        let names = query.unicodeScalars.split(separator: ",").map { item -> String in
            var item = item
            while let first = item.first, isSpace(first) { item.removeFirst() }
            while let last = item.last, isSpace(last) { item.removeLast() }
            return String(item)
        }.filter { !$0.isEmpty }
        guard !names.isEmpty else { throw .empty }
        let unknown = names.filter { !knownFields.contains($0) }
        guard unknown.isEmpty else { throw .unknown(unknown, known: knownFields.sorted()) }
        fields = Array(Set(names)).sorted()
    }

    /// Parses the query value for a state encoded as `stateJSON`. A name the JSON lacks may be a
    /// field that is nil now, which the JSON leaves out: then `stateFieldNames` (the State type's
    /// own) is asked too.
    init(query: String, stateJSON: [UInt8], stateFieldNames: () -> Set<String>) throws(FieldFilterError) {
        let known = Self.fieldNames(of: stateJSON)
        do throws(FieldFilterError) {
            self = try Self(query: query, knownFields: known)
        } catch .unknown {
            self = try Self(query: query, knownFields: known.union(stateFieldNames()))
        }
    }

    /// A request's `?fields=` for a state encoded as `stateJSON`: nil when it has none.
    static func requested(
        by request: Request, stateJSON: [UInt8], stateFieldNames: () -> Set<String>
    ) -> Result<FieldFilter?, FieldFilterError> {
        guard let fields = request.query["fields"] else { return .success(nil) }
        return Result { () throws(FieldFilterError) in
            try FieldFilter(query: fields, stateJSON: stateJSON, stateFieldNames: stateFieldNames)
        }
    }

    /// The state's JSON reduced to the chosen fields, keys sorted, each value's bytes as the
    /// state had them (numbers, escapes and all: no re-serialisation).
    func apply(to stateJSON: [UInt8]) -> [UInt8] {
        guard let members = Self.topLevelMembers(stateJSON) else { return stateJSON }
        let kept = members.filter { fields.contains($0.name) }.sorted { $0.name < $1.name }
        var out: [UInt8] = [UInt8(ascii: "{")]
        for (index, member) in kept.enumerated() {
            if index > 0 { out.append(UInt8(ascii: ",")) }
            out += stateJSON[member.key]
            out.append(UInt8(ascii: ":"))
            out += stateJSON[member.value]
        }
        out.append(UInt8(ascii: "}"))
        return out
    }

    static func fieldNames(of stateJSON: [UInt8]) -> Set<String> {
        Set(topLevelMembers(stateJSON)?.map(\.name) ?? [])
    }

    /// The members of a top-level JSON object: each name (decoded), and the byte ranges of its
    /// key (quotes included) and its value. `nil` when the bytes are not a JSON object.
    static func topLevelMembers(_ json: [UInt8]) -> [(name: String, key: Range<Int>, value: Range<Int>)]? {
        var scanner = JSONScanner(bytes: json)
        scanner.skipSpace()
        guard scanner.take(UInt8(ascii: "{")) else { return nil }
        var members: [(name: String, key: Range<Int>, value: Range<Int>)] = []
        scanner.skipSpace()
        if scanner.take(UInt8(ascii: "}")) { return scanner.atEndAfterSpace() ? members : nil }
        while true {
            scanner.skipSpace()
            let keyStart = scanner.index
            guard let name = scanner.string() else { return nil }
            let key = keyStart..<scanner.index
            scanner.skipSpace()
            guard scanner.take(UInt8(ascii: ":")) else { return nil }
            scanner.skipSpace()
            let valueStart = scanner.index
            guard scanner.skipValue() else { return nil }
            members.append((name, key, valueStart..<scanner.index))
            scanner.skipSpace()
            if scanner.take(UInt8(ascii: ",")) { continue }
            guard scanner.take(UInt8(ascii: "}")) else { return nil }
            return scanner.atEndAfterSpace() ? members : nil
        }
    }
}

/// Just enough of a JSON reader to find the top-level members of a state object.
private struct JSONScanner {
    let bytes: [UInt8]
    var index = 0

    init(bytes: [UInt8]) { self.bytes = bytes }

    mutating func skipSpace() { JSONScan.skipSpace(bytes[...], &index) }

    mutating func take(_ byte: UInt8) -> Bool {
        guard index < bytes.count, bytes[index] == byte else { return false }
        index += 1
        return true
    }

    mutating func atEndAfterSpace() -> Bool {
        skipSpace()
        return index == bytes.count
    }

    /// A string, decoded (escapes included); the index ends after its closing quote.
    mutating func string() -> String? {
        let start = index
        guard take(UInt8(ascii: "\"")), JSONScan.skipString(bytes[...], &index) else { return nil }
        let raw = Array(bytes[start..<index])
        // A key without escapes (the usual case) is its bytes; one with escapes is decoded.
        if !raw.contains(UInt8(ascii: "\\")) { return String(decoding: raw.dropFirst().dropLast(), as: UTF8.self) }
        return try? JSONDecoder().decode(String.self, from: Data(raw))
    }

    /// Any value; the index ends after it.
    mutating func skipValue() -> Bool {
        guard index < bytes.count else { return false }
        switch bytes[index] {
        case UInt8(ascii: "\""):
            return string() != nil
        case UInt8(ascii: "{"), UInt8(ascii: "["):
            var depth = 0
            while index < bytes.count {
                switch bytes[index] {
                case UInt8(ascii: "\""):
                    guard string() != nil else { return false }
                    continue
                case UInt8(ascii: "{"), UInt8(ascii: "["):
                    depth += 1
                case UInt8(ascii: "}"), UInt8(ascii: "]"):
                    depth -= 1
                    if depth == 0 {
                        index += 1
                        return true
                    }
                default:
                    break
                }
                index += 1
            }
            return false
        default:
            // A number, true, false or null: up to the next delimiter.
            let start = index
            while index < bytes.count,
                ![
                    UInt8(ascii: ","), UInt8(ascii: "}"), UInt8(ascii: "]"),
                    0x20, 0x09, 0x0A, 0x0D,
                ].contains(bytes[index])
            { index += 1 }
            return index > start
        }
    }
}

enum FieldFilterError: Error, CustomStringConvertible {
    case empty
    case unknown([String], known: [String])

    var description: String {
        switch self {
        case .empty:
            return "query parameter 'fields' names no field"
        case let .unknown(names, known):
            return "unknown state field\(names.count == 1 ? "" : "s") "
                + names.map { "'\($0)'" }.joined(separator: ", ")
                + " in 'fields'; the state has: " + known.joined(separator: ", ")
        }
    }

    var response: Response { .problem(status: 400, detail: description) }
}
