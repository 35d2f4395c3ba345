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
    /// In valid JSON a string followed by ':' is a member's name, wherever it stands: one pass,
    /// copying, suffices.
    static func redacting(_ names: Set<String>, in json: ArraySlice<UInt8>) -> [UInt8] {
        var out: [UInt8] = []
        out.reserveCapacity(json.count)
        var index = json.startIndex
        while index < json.endIndex {
            guard json[index] == UInt8(ascii: "\"") else {
                out.append(json[index])
                index += 1
                continue
            }
            let start = index
            guard JSONScan.skipValue(json, &index) else { break }
            out.append(contentsOf: json[start..<index])
            var colon = index
            JSONScan.skipSpace(json, &colon)
            guard colon < json.endIndex, json[colon] == UInt8(ascii: ":"),
                names.contains(JSONScan.memberName(json[start..<index]))
            else { continue }
            var value = colon + 1
            JSONScan.skipSpace(json, &value)
            out.append(contentsOf: json[index..<value])  // the space and the ':' as sent
            guard JSONScan.skipValue(json, &value) else { break }
            out.append(contentsOf: redacted)
            index = value
        }
        return out
    }

    private static let redacted = Array(#""[redacted]""#.utf8)

}
