#if canImport(FoundationEssentials)
import FoundationEssentials
#else
import Foundation
#endif

/// Moving over JSON text as sent, for the codecs that read a body's bytes rather than decode it
/// (an idempotency key's digest, the action log's redaction): whitespace, and one value whole.
enum JSONScan {
    /// A member's name as the decoder reads it, from its quoted text: `"pass\u0077ord"` is `password`.
    static func memberName(_ quoted: ArraySlice<UInt8>) -> String {
        guard quoted.count >= 2 else { return "" }
        guard quoted.contains(UInt8(ascii: "\\")) else {
            return String(decoding: quoted.dropFirst().dropLast(), as: UTF8.self)
        }
        return (try? JSONDecoder().decode(String.self, from: Data(quoted))) ?? ""
    }

    /// The text without the UTF-8 byte order mark a body may start with (the decoders allow it).
    static func withoutByteOrderMark(_ json: ArraySlice<UInt8>) -> ArraySlice<UInt8> {
        json.starts(with: [0xEF, 0xBB, 0xBF]) ? json.dropFirst(3) : json
    }

    static func isSpace(_ byte: UInt8) -> Bool {
        byte == 0x20 || byte == 0x09 || byte == 0x0A || byte == 0x0D
    }

    /// Moves `index` past whitespace.
    static func skipSpace(_ json: ArraySlice<UInt8>, _ index: inout Int) {
        while index < json.endIndex, isSpace(json[index]) { index += 1 }
    }

    /// Moves `index` past the one value that starts there (a string, a container with all it
    /// holds, or a scalar, which ends at the next delimiter); false when the text ends first or
    /// a container closes that was not opened.
    static func skipValue(_ json: ArraySlice<UInt8>, _ index: inout Int) -> Bool {
        var depth = 0
        while index < json.endIndex {
            let byte = json[index]
            index += 1
            switch byte {
            case UInt8(ascii: "\""):
                guard skipString(json, &index) else { return false }
                if depth == 0 { return true }
            case UInt8(ascii: "{"), UInt8(ascii: "["): depth += 1
            case UInt8(ascii: "}"), UInt8(ascii: "]"):
                depth -= 1
                if depth == 0 { return true }
                if depth < 0 { return false }
            case UInt8(ascii: ","):
                if depth == 0 {
                    index -= 1
                    return true
                }
            default:
                if depth == 0, index < json.endIndex, isDelimiter(json[index]) { return true }
            }
        }
        return depth == 0
    }

    /// Moves `index`, just past a string's opening quote, past its closing one (escapes
    /// honoured); false when the text ends first, with `index` at its end.
    static func skipString(_ json: ArraySlice<UInt8>, _ index: inout Int) -> Bool {
        var escaped = false
        while index < json.endIndex {
            let byte = json[index]
            index += 1
            if escaped {
                escaped = false
            } else if byte == UInt8(ascii: "\\") {
                escaped = true
            } else if byte == UInt8(ascii: "\"") {
                return true
            }
        }
        return false
    }

    /// What ends a scalar.
    private static func isDelimiter(_ byte: UInt8) -> Bool {
        byte == UInt8(ascii: ",") || byte == UInt8(ascii: "}") || byte == UInt8(ascii: "]") || isSpace(byte)
    }
}
