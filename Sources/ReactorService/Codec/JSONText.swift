#if canImport(FoundationEssentials)
import FoundationEssentials
#else
import Foundation
#endif

/// Small JSON writers for the hot paths, where a whole `JSONEncoder` run per response
/// would only wrap bytes that are already encoded.
enum JSONText {
    /// A JSON string literal, escaped as `JSONEncoder` escapes it (RFC 8259).
    static func string(_ text: String) -> [UInt8] {
        var out: [UInt8] = []
        out.reserveCapacity(text.utf8.count + 2)
        StateJSONEncoder.appendString(text, into: &out)
        return out
    }

    /// `{"k1":v1,"k2":v2}` from members whose values are already JSON.
    static func object(_ members: [(String, [UInt8])]) -> [UInt8] {
        var out: [UInt8] = [UInt8(ascii: "{")]
        for (index, member) in members.enumerated() {
            if index > 0 { out.append(UInt8(ascii: ",")) }
            StateJSONEncoder.appendString(member.0, into: &out)
            out.append(UInt8(ascii: ":"))
            out += member.1
        }
        out.append(UInt8(ascii: "}"))
        return out
    }

    /// The encoder every payload goes through: sorted keys so that equal states are equal bytes.
    static func makeEncoder() -> JSONEncoder {
        let encoder = JSONEncoder()
        encoder.outputFormatting = [.sortedKeys, .withoutEscapingSlashes]
        return encoder
    }
}
