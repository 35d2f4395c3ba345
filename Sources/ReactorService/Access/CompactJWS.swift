#if canImport(FoundationEssentials)
import FoundationEssentials
#else
import Foundation
#endif

/// A JWT in JWS compact serialization (RFC 7515 7.1), split and decoded but not verified:
/// `BASE64URL(header).BASE64URL(payload).BASE64URL(signature)`. Only what verification needs
/// is read: the header's `alg` (a `crit` header is refused: no extension is understood), the
/// payload's claims as JSON, the signature's bytes, and the signing input they cover.
struct CompactJWS {
    let algorithm: String
    let claims: [String: ClaimValue]
    let signature: [UInt8]
    let signingInput: [UInt8]

    private struct Header: Decodable {
        let alg: String
        let crit: [String]?
    }

    /// Tokens longer than this are refused before any decoding (a header is not a place for data).
    static let maximumLength = 8 * 1024

    static func parse(_ token: Substring) -> Result<CompactJWS, TokenRejection> {
        guard token.utf8.count <= maximumLength else {
            return .failure(TokenRejection(.malformed, "the token is longer than \(maximumLength) bytes"))
        }
        let parts = token.split(separator: ".", omittingEmptySubsequences: false)
        guard parts.count == 3 else {
            return .failure(TokenRejection(.malformed, "the token is not three base64url parts separated by dots"))
        }
        guard let headerBytes = base64URLDecode(parts[0]), let payloadBytes = base64URLDecode(parts[1]),
            let signature = base64URLDecode(parts[2])
        else {
            return .failure(TokenRejection(.malformed, "the token's parts are not base64url"))
        }
        let payloadProblem = RequestJSONDecoder.syntaxProblem(in: payloadBytes)
        if let rejection =
            refusal(for: RequestJSONDecoder.syntaxProblem(in: headerBytes), in: "header")
            ?? refusal(for: payloadProblem, in: "payload")
        {
            return .failure(rejection)
        }
        let decoder = JSONDecoder()
        guard let header = try? decoder.decode(Header.self, from: Data(headerBytes)) else {
            return .failure(TokenRejection(.malformed, "the token's header is not a JSON object with an 'alg' string"))
        }
        guard header.crit == nil else {
            return .failure(
                TokenRejection(
                    .malformed, "the token's header has 'crit' extensions, which this server does not understand"))
        }
        guard let claims = try? decoder.decode([String: ClaimValue].self, from: Data(payloadBytes)) else {
            // Strict JSON that is an object, yet JSONDecoder cannot read it: a number past a Double's range.
            let isObject =
                payloadProblem == nil && payloadBytes.first { !JSONScan.isSpace($0) } == UInt8(ascii: "{")
            return .failure(
                TokenRejection(
                    .malformed,
                    isObject
                        ? "the token's payload holds a number beyond the range of a 64-bit float"
                        : "the token's payload is not a JSON object"))
        }
        let input = Array(token.utf8.prefix(parts[0].utf8.count + 1 + parts[1].utf8.count))
        return .success(CompactJWS(algorithm: header.alg, claims: claims, signature: signature, signingInput: input))
    }

    /// Why a part's JSON is refused before it is read: a name given twice (RFC 7519 4 lets a
    /// reader take the last or refuse; JSONDecoder takes the first, so a gateway and this server
    /// could read two subjects from one token) or nesting past the request parser's limit. Nil
    /// for anything else, whose refusal the decoding below words.
    private static func refusal(for problem: RequestJSONDecoder.SyntaxProblem?, in part: String) -> TokenRejection? {
        switch problem {
        case let .duplicateKey(name)?: TokenRejection(.malformed, "the token's \(part) names '\(name)' twice")
        case .tooDeep?:
            TokenRejection(
                .malformed, "the token's \(part) is nested deeper than \(RequestJSONDecoder.maxDepth) levels")
        case .malformed?, nil: nil
        }
    }

    /// Unpadded base64url (RFC 7515 2), as JWS writes it; nil for anything else.
    static func base64URLDecode(_ text: Substring) -> [UInt8]? {
        guard text.utf8.count % 4 != 1 else { return nil }
        var base64 = String()
        base64.reserveCapacity(text.utf8.count + 3)
        for character in text.unicodeScalars {
            switch character {
            case "-": base64.append("+")
            case "_": base64.append("/")
            case "+", "/", "=": return nil
            default: base64.unicodeScalars.append(character)
            }
        }
        base64.append(String(repeating: "=", count: (4 - base64.utf8.count % 4) % 4))
        return Data(base64Encoded: base64).map(Array.init)
    }
}
