import MicroHTTP

#if canImport(FoundationEssentials)
import FoundationEssentials
#else
import Foundation
#endif

/// What went wrong with a request body, already worded for the problem document.
enum RequestError: Error {
    /// Not JSON at all: 400.
    case malformed(String)
    /// JSON, but not what this route or reactor accepts: 422.
    case invalid(String)
    /// The body names a session that does not exist: 404.
    case unknownSession
    /// The body names a session that cannot be served now (409, 503).
    case session(SessionLookupError)
    /// The caller may not use the session the body names (403): the answer, already made.
    case refused(Response)
}

/// Decodes request bodies, telling unparseable JSON (400) from well-formed JSON of the
/// wrong shape (422), with a detail that names the field and what it must be.
enum RequestDecoding {
    /// `RequestJSONDecoder` first; when it is not sure, `JSONDecoder` (with `userInfo` too), made
    /// only then.
    static func decode<T: Decodable>(
        _ type: T.Type, from body: [UInt8],
        with decoder: @autoclosure () -> JSONDecoder = JSONDecoder(),
        userInfo: [CodingUserInfoKey: any Sendable] = [:]
    ) throws(RequestError) -> T {
        var mismatch: RequestJSONDecoder.IntegerMismatch?
        var syntax: RequestJSONDecoder.SyntaxProblem?
        if let value = RequestJSONDecoder.decode(
            T.self, from: body, userInfo: userInfo, integerMismatch: &mismatch,
            syntaxProblem: &syntax)
        {
            return value
        }
        try refuse(syntax)
        return try decodeDeclined(T.self, from: body, with: decoder(), integerMismatch: mismatch)
    }

    /// The 400 for a body `RequestJSONDecoder` found to be no JSON it accepts; nothing for nil.
    static func refuse(_ syntax: RequestJSONDecoder.SyntaxProblem?) throws(RequestError) {
        switch syntax {
        case let .malformed(offset)?:
            throw .malformed("request body is not valid JSON (RFC 8259, in UTF-8) at or before byte \(offset)")
        case .tooDeep?:
            throw .malformed(
                "request body nests JSON arrays and objects more than \(RequestJSONDecoder.maxDepth) levels deep")
        case let .duplicateKey(key)?:
            throw .malformed(
                "request body has the key '\(Response.excerpt(key))' twice in one object; send each key once")
        case nil: break
        }
    }

    /// `JSONDecoder`'s value or error for a well-formed body that `RequestJSONDecoder` declined,
    /// having met `integerMismatch` on the way.
    static func decodeDeclined<T: Decodable>(
        _ type: T.Type, from body: [UInt8], with decoder: JSONDecoder,
        integerMismatch mismatch: RequestJSONDecoder.IntegerMismatch?
    )
        throws(RequestError) -> T
    {
        do throws(RequestError) {
            return try decodeWithFoundation(T.self, from: body, with: decoder)
        } catch .malformed {
            // The body's syntax was checked before (`refuse`), so Foundation's pathless "not valid
            // JSON" (its only `.malformed`) is about a value: a number that does not fit its field
            // (JSONDecoder names neither). 422, naming the field when the fast decoder met the number.
            throw .invalid(
                mismatch.map(describe)
                    ?? "a value in the request body does not fit the type of its field (a number out of its range?)")
        }
    }

    private static func describe(_ mismatch: RequestJSONDecoder.IntegerMismatch) -> String {
        let field = mismatch.path.isEmpty ? "the request body" : "field '\(path(mismatch.path))'"
        // Digits alone are an integer, however many (Double reads 400 of them as infinity).
        let integral =
            mismatch.literal.drop { $0 == "-" }.allSatisfy { ("0"..."9").contains($0) }
            || (Double(mismatch.literal).map { $0.isFinite && $0 == $0.rounded() } ?? false)
        let what = integral ? "an integer within the range of \(mismatch.type)" : "an integer"
        return "\(field) must be \(what), not \(Response.excerpt(mismatch.literal))"
    }

    /// Foundation's `JSONDecoder` alone: the reference for values and for every error's wording.
    static func decodeWithFoundation<T: Decodable>(
        _ type: T.Type, from body: [UInt8],
        with decoder: JSONDecoder
    ) throws(RequestError) -> T {
        do {
            return try decoder.decode(T.self, from: Data(body))
        } catch let error as RequestError {
            throw error
        } catch let error as DecodingError {
            throw describe(error, body: body)
        } catch {
            // The decoded type's own error (a reactor's `init(from:)`), on JSON that parsed: its words.
            throw .invalid("\(error)")
        }
    }

    private static func describe(_ error: DecodingError, body: [UInt8]) -> RequestError {
        switch error {
        case let .keyNotFound(key, context):
            return .invalid("missing field '\(path(context.codingPath + [key]))'")
        case let .typeMismatch(type, context):
            let what = context.codingPath.isEmpty ? "the request body" : "field '\(path(context.codingPath))'"
            return .invalid("\(what) must be \(describe(type))")
        case let .valueNotFound(type, context):
            let what = context.codingPath.isEmpty ? "the request body" : "field '\(path(context.codingPath))'"
            return .invalid("\(what) must be \(describe(type)), not null")
        case let .dataCorrupted(context):
            // JSONDecoder's own "not valid JSON" (FoundationEssentials' without its parser's error),
            // not a decoded type's `dataCorruptedError` at the top (an action that is the whole body).
            if context.codingPath.isEmpty
                && (context.underlyingError != nil
                    || context.debugDescription.hasPrefix("The given data was not valid JSON"))
            {
                #if canImport(FoundationEssentials)
                // FoundationEssentials' JSONDecoder names no position.
                let reason: String? = nil
                #else
                let reason = (context.underlyingError as? NSError)?.userInfo[NSDebugDescriptionErrorKey] as? String
                #endif
                return .malformed("request body is not valid JSON" + (reason.map { ": \($0)" } ?? ""))
            }
            if context.codingPath.isEmpty { return .invalid(context.debugDescription) }
            return .invalid("field '\(path(context.codingPath))': \(context.debugDescription)")
        @unknown default:
            return .invalid("\(error)")
        }
    }

    private static func path(_ keys: [any CodingKey]) -> String {
        keys.map { $0.intValue.map { "[\($0)]" } ?? $0.stringValue }
            .joined(separator: ".").split(separator: ".[", omittingEmptySubsequences: false).joined(separator: "[")
    }

    private static func describe(_ type: Any.Type) -> String {
        switch type {
        case is String.Type: return "a string"
        case is Bool.Type: return "a boolean"
        case is Int.Type, is Int64.Type, is Int32.Type, is UInt.Type, is UInt64.Type: return "an integer"
        case is Double.Type, is Float.Type: return "a number"
        default:
            let name = String(describing: type)
            if name.hasPrefix("Array") { return "an array" }
            if name.hasPrefix("Dictionary") || name.contains("KeyedDecodingContainer") { return "an object" }
            return "a valid \(name)"
        }
    }
}
