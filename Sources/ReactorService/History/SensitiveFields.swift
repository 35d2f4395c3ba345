#if canImport(FoundationEssentials)
import FoundationEssentials
#else
import Foundation
#endif

/// An action type whose fields must not reach the action log: the value of every member with
/// one of these names, at any depth of the action's JSON, is logged as `"[redacted]"`.
///
/// ```swift
/// extension LoginReactor.Action: RedactedInActionLog {
///     static var redactedFields: Set<String> { ["password"] }
/// }
/// ```
public protocol RedactedInActionLog {
    /// The member names whose values the log replaces (escapes in the JSON decoded, as the action's decoder reads them).
    static var redactedFields: Set<String> { get }
}

enum SensitiveFields {
    /// The fields `Action` marks, or none.
    static func of<Action>(_: Action.Type) -> Set<String> {
        (Action.self as? any RedactedInActionLog.Type)?.redactedFields ?? []
    }

    /// `json` (valid JSON: it decoded) with the value of every member named in `names` replaced.
    static func redacting(_ names: Set<String>, in json: ArraySlice<UInt8>) -> [UInt8] {
        var out: [UInt8] = []
        out.reserveCapacity(json.count)
        var index = json.startIndex
        copyValue(json, &index, &out, names)
        return out
    }

    private static let redacted = Array(#""[redacted]""#.utf8)

    private static func copyValue(_ json: ArraySlice<UInt8>, _ index: inout Int, _ out: inout [UInt8], _ names: Set<String>) {
        skipSpace(json, &index, &out)
        guard index < json.endIndex else { return }
        switch json[index] {
        case UInt8(ascii: "{"):
            out.append(json[index])
            index += 1
            while true {
                skipSpace(json, &index, &out)
                guard index < json.endIndex else { return }
                if json[index] == UInt8(ascii: "}") {
                    out.append(json[index])
                    index += 1
                    return
                }
                if json[index] == UInt8(ascii: ",") {
                    out.append(json[index])
                    index += 1
                    continue
                }
                let keyStart = index
                skipString(json, &index)
                let key = memberName(json[keyStart..<index])
                out.append(contentsOf: json[keyStart..<index])
                skipSpace(json, &index, &out)
                guard index < json.endIndex else { return }
                out.append(json[index])   // ':'
                index += 1
                if names.contains(key) {
                    skipSpace(json, &index, &out)
                    var discarded: [UInt8] = []
                    copyValue(json, &index, &discarded, [])
                    out.append(contentsOf: redacted)
                } else {
                    copyValue(json, &index, &out, names)
                }
            }
        case UInt8(ascii: "["):
            out.append(json[index])
            index += 1
            while true {
                skipSpace(json, &index, &out)
                guard index < json.endIndex else { return }
                if json[index] == UInt8(ascii: "]") {
                    out.append(json[index])
                    index += 1
                    return
                }
                if json[index] == UInt8(ascii: ",") {
                    out.append(json[index])
                    index += 1
                    continue
                }
                copyValue(json, &index, &out, names)
            }
        case UInt8(ascii: "\""):
            let start = index
            skipString(json, &index)
            out.append(contentsOf: json[start..<index])
        default:   // a number, true, false or null
            let start = index
            while index < json.endIndex, !Self.ends(json[index]) { index += 1 }
            out.append(contentsOf: json[start..<index])
        }
    }

    /// A member's name as the decoder reads it: `"pass\u0077ord"` is `password`.
    private static func memberName(_ quoted: ArraySlice<UInt8>) -> String {
        guard quoted.count >= 2 else { return "" }
        guard quoted.contains(UInt8(ascii: "\\")) else {
            return String(decoding: quoted.dropFirst().dropLast(), as: UTF8.self)
        }
        return (try? JSONDecoder().decode(String.self, from: Data(quoted))) ?? ""
    }

    private static func ends(_ byte: UInt8) -> Bool {
        byte == UInt8(ascii: ",") || byte == UInt8(ascii: "}") || byte == UInt8(ascii: "]") || byte == 0x20
            || byte == 0x0A || byte == 0x0D || byte == 0x09
    }

    /// Past a string that starts at `index` (escapes included).
    private static func skipString(_ json: ArraySlice<UInt8>, _ index: inout Int) {
        index += 1
        while index < json.endIndex {
            let byte = json[index]
            index += 1
            if byte == UInt8(ascii: "\\") {
                index += 1
            } else if byte == UInt8(ascii: "\"") {
                return
            }
        }
    }

    private static func skipSpace(_ json: ArraySlice<UInt8>, _ index: inout Int, _ out: inout [UInt8]) {
        while index < json.endIndex, json[index] == 0x20 || json[index] == 0x0A || json[index] == 0x0D || json[index] == 0x09 {
            out.append(json[index])
            index += 1
        }
    }
}
