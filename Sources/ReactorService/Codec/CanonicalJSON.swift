/// JSON text in one form for all the ways of writing one value: no whitespace between tokens,
/// and each object's members in the order of their names' bytes (RFC 8259: an object's members
/// are unordered; a client that builds a body from a hash map sends them in any order). Strings
/// and numbers stay as sent. What an idempotency key's request digest is made of.
enum CanonicalJSON {
    /// Appends `json`'s canonical form to `out`; text that is not one JSON value goes as
    /// `JSONWhitespace.appendStripped` writes it. Whether any members were put in order: if not,
    /// what it wrote is what `appendStripped` writes.
    @discardableResult
    static func append(_ json: ArraySlice<UInt8>, to out: inout [UInt8]) -> Bool {
        let start = out.count
        var index = json.startIndex
        var reordered = false
        JSONScan.skipSpace(json, &index)
        if appendValue(json, &index, to: &out, &reordered) {
            JSONScan.skipSpace(json, &index)
            if index == json.endIndex { return reordered }
        }
        out.removeSubrange(start...)
        JSONWhitespace.appendStripped(json, to: &out)
        return false
    }

    private static func appendValue(
        _ json: ArraySlice<UInt8>, _ index: inout Int, to out: inout [UInt8], _ reordered: inout Bool
    ) -> Bool {
        guard index < json.endIndex else { return false }
        let start = index
        switch json[index] {
        case UInt8(ascii: "{"): return appendObject(json, &index, to: &out, &reordered)
        case UInt8(ascii: "["): return appendArray(json, &index, to: &out, &reordered)
        case UInt8(ascii: "\""):
            index += 1
            guard JSONScan.skipString(json, &index) else { return false }
        default:
            guard JSONScan.skipValue(json, &index), index > start else { return false }
        }
        out.append(contentsOf: json[start..<index])
        return true
    }

    private static func appendObject(
        _ json: ArraySlice<UInt8>, _ index: inout Int, to out: inout [UInt8], _ reordered: inout Bool
    ) -> Bool {
        index += 1  // {
        let start = out.count
        out.append(UInt8(ascii: "{"))
        // Each member as written to `out`: its name's bytes in `json`, and where it starts in `out`.
        var members: [(name: Range<Int>, written: Int)] = []
        JSONScan.skipSpace(json, &index)
        if index < json.endIndex, json[index] == UInt8(ascii: "}") {
            index += 1
            out.append(UInt8(ascii: "}"))
            return true
        }
        while true {
            JSONScan.skipSpace(json, &index)
            guard index < json.endIndex, json[index] == UInt8(ascii: "\"") else { return false }
            let nameStart = index
            index += 1
            guard JSONScan.skipString(json, &index) else { return false }
            if !members.isEmpty { out.append(UInt8(ascii: ",")) }
            members.append((nameStart..<index, out.count))
            out.append(contentsOf: json[nameStart..<index])
            JSONScan.skipSpace(json, &index)
            guard index < json.endIndex, json[index] == UInt8(ascii: ":") else { return false }
            index += 1
            out.append(UInt8(ascii: ":"))
            JSONScan.skipSpace(json, &index)
            guard appendValue(json, &index, to: &out, &reordered) else { return false }
            JSONScan.skipSpace(json, &index)
            guard index < json.endIndex else { return false }
            index += 1
            if json[index - 1] == UInt8(ascii: "}") { break }
            guard json[index - 1] == UInt8(ascii: ",") else { return false }
        }
        let inOrder = zip(members, members.dropFirst()).allSatisfy { name(of: $0.0, json) <= name(of: $0.1, json) }
        if !inOrder {
            reordered = true
            // Rewritten from the members as written, in their names' order.
            let written = Array(out[start...])
            let ends = members.dropFirst().map { $0.written - 1 - start } + [written.count]  // before each ","
            let order = members.indices.sorted { name(of: members[$0], json) < name(of: members[$1], json) }
            out.removeSubrange(start...)
            out.append(UInt8(ascii: "{"))
            for (position, member) in order.enumerated() {
                if position > 0 { out.append(UInt8(ascii: ",")) }
                out.append(contentsOf: written[(members[member].written - start)..<ends[member]])
            }
        }
        out.append(UInt8(ascii: "}"))
        return true
    }

    private static func appendArray(
        _ json: ArraySlice<UInt8>, _ index: inout Int, to out: inout [UInt8], _ reordered: inout Bool
    ) -> Bool {
        index += 1  // [
        out.append(UInt8(ascii: "["))
        JSONScan.skipSpace(json, &index)
        if index < json.endIndex, json[index] == UInt8(ascii: "]") {
            index += 1
            out.append(UInt8(ascii: "]"))
            return true
        }
        while true {
            JSONScan.skipSpace(json, &index)
            guard appendValue(json, &index, to: &out, &reordered) else { return false }
            JSONScan.skipSpace(json, &index)
            guard index < json.endIndex else { return false }
            index += 1
            out.append(json[index - 1])
            if json[index - 1] == UInt8(ascii: "]") { return true }
            guard json[index - 1] == UInt8(ascii: ",") else { return false }
        }
    }

    private static func name(of member: (name: Range<Int>, written: Int), _ json: ArraySlice<UInt8>) -> Name {
        Name(bytes: json[member.name])
    }

    /// A member's name as sent, compared byte by byte.
    private struct Name: Comparable {
        let bytes: ArraySlice<UInt8>
        static func < (a: Name, b: Name) -> Bool { a.bytes.lexicographicallyPrecedes(b.bytes) }
        static func == (a: Name, b: Name) -> Bool { a.bytes.elementsEqual(b.bytes) }
    }
}
