import JWSSignatures

#if canImport(FoundationEssentials)
import FoundationEssentials
#else
import Foundation
#endif

/// How bearer tokens are verified: one key (an HS256 secret, or an RS256 or ES256 public key),
/// the optional issuer and audience they must name, and the clock leeway.
///
/// The cryptography is the system's OpenSSL (HMAC-SHA256, P-256 ECDSA, RSA PKCS#1 v1.5), behind
/// the typed wall of the JWSSignatures target; the compact JWS is split and its JSON read by
/// `CompactJWS`. No signature code of our own. Build one with `init(secret:)` or `init(publicKeyPEM:)`; both throw
/// `JWTConfigurationError` for a key they cannot use, so a bad key refuses to start the server.
public struct JWTVerification: Sendable {
    /// The algorithm tokens must name in their header: `HS256`, `RS256` or `ES256`.
    public let algorithm: String
    private let key: Key
    /// When set, a token's `iss` must equal it.
    public var issuer: String?
    /// When set, a token's `aud` (a string, or an array of them) must contain it.
    public var audience: String?
    /// Seconds of clock skew allowed on `exp`, `nbf` and `iat`.
    public var leeway: Double = 30
    /// The claim that makes a token an admin's (`"reactord_admin": true`): such a token may write
    /// the global user, as the admin token can.
    public var adminClaim = "reactord_admin"

    private enum Key: Sendable {
        case hmac(HMACSHA256Key)
        case publicKey(SignaturePublicKey)
    }

    /// HS256 with `secret`'s UTF-8 bytes; at least 32 bytes (RFC 7518 3.2: as long as the hash).
    public init(secret: String) throws(JWTConfigurationError) {
        let bytes = Array(secret.utf8)
        guard bytes.count >= 32 else {
            throw JWTConfigurationError("an HS256 secret must be at least 32 bytes (got \(bytes.count))")
        }
        algorithm = "HS256"
        key = .hmac(HMACSHA256Key(bytes))
    }

    /// RS256 for an RSA public key (2048 bits or more), ES256 for a P-256 one, in PEM
    /// (`-----BEGIN PUBLIC KEY-----`, as `openssl pkey -pubout` writes it; an RSA key may also be
    /// `-----BEGIN RSA PUBLIC KEY-----`, PKCS #1).
    public init(publicKeyPEM pem: String) throws(JWTConfigurationError) {
        guard let publicKey = SignaturePublicKey(pem: pem) else {
            throw JWTConfigurationError("not a PEM public key of RSA (RS256) or P-256 (ES256)")
        }
        switch publicKey.kind {
        case .p256:
            algorithm = "ES256"
        case let .rsa(bits):
            guard bits >= 2048 else {
                throw JWTConfigurationError("an RSA key must have at least 2048 bits (got \(bits))")
            }
            algorithm = "RS256"
        }
        key = .publicKey(publicKey)
    }

    /// The principal `token` names, or why it is refused. `now`: seconds since 1970.
    func verify(_ token: Substring, now: Double) -> Result<Principal, TokenRejection> {
        let jws: CompactJWS
        switch CompactJWS.parse(token) {
        case let .success(parsed): jws = parsed
        case let .failure(rejection): return .failure(rejection)
        }
        guard jws.algorithm != "none" else {
            return .failure(TokenRejection(.algorithm, "unsigned tokens (alg none) are refused"))
        }
        guard jws.algorithm == algorithm else {
            return .failure(TokenRejection(.algorithm, "the token's algorithm is not this server's \(algorithm)"))
        }
        guard isValidSignature(jws.signature, for: jws.signingInput) else {
            return .failure(TokenRejection(.signature, "the token's signature does not verify"))
        }
        return checkClaims(jws.claims, now: now)
    }

    private func isValidSignature(_ signature: [UInt8], for input: [UInt8]) -> Bool {
        switch key {
        case let .hmac(secret): secret.isValidAuthenticationCode(signature, for: input)
        case let .publicKey(publicKey): publicKey.isValidSignature(signature, for: input)
        }
    }

    private func checkClaims(_ claims: [String: ClaimValue], now: Double) -> Result<Principal, TokenRejection> {
        guard let exp = claims["exp"] else { return .failure(TokenRejection(.claims, "the token has no 'exp'")) }
        guard exp.number != nil else { return .failure(TokenRejection(.claims, "the token's 'exp' is not a number")) }
        if let nbf = claims["nbf"], nbf.number == nil {
            return .failure(TokenRejection(.claims, "the token's 'nbf' is not a number"))
        }
        if let iat = claims["iat"], iat.number == nil {
            return .failure(TokenRejection(.claims, "the token's 'iat' is not a number"))
        }
        if let rejection = checkTime(claims, now: now) { return .failure(rejection) }
        if let issuer {
            guard case let .string(iss)? = claims["iss"], iss == issuer else {
                return .failure(TokenRejection(.issuer, "the token's 'iss' is not this server's issuer"))
            }
        }
        if let audience {
            let accepted: Bool
            switch claims["aud"] {
            case let .string(aud)?: accepted = aud == audience
            case let .array(auds)?: accepted = auds.contains(.string(audience))
            default: accepted = false
            }
            guard accepted else {
                return .failure(TokenRejection(.audience, "the token's 'aud' does not name this server's audience"))
            }
        }
        guard case let .string(subject)? = claims["sub"], !subject.isEmpty else {
            return .failure(TokenRejection(.claims, "the token has no 'sub' (a non-empty string)"))
        }
        // A session's owner is stored as text, and PostgreSQL's text holds no NUL.
        guard !subject.utf8.contains(0) else {
            return .failure(TokenRejection(.claims, "the token's 'sub' contains a NUL character"))
        }
        return .success(Principal(subject: subject, claims: claims))
    }

    /// Why the token is not valid at `now` (`exp`, `nbf`, `iat` with the leeway), or nil; the
    /// only checks whose answer changes for the same token, so the only ones a cached
    /// verification repeats.
    func checkTime(_ claims: [String: ClaimValue], now: Double) -> TokenRejection? {
        if let expiry = claims["exp"]?.number, now > expiry + leeway {
            return TokenRejection(.expired, "the token has expired")
        }
        if let notBefore = claims["nbf"]?.number, now + leeway < notBefore {
            return TokenRejection(.notYetValid, "the token is not valid yet ('nbf')")
        }
        if let issuedAt = claims["iat"]?.number, issuedAt > now + leeway {
            return TokenRejection(.notYetValid, "the token is issued in the future ('iat')")
        }
        return nil
    }

    /// True when the claims make the token an admin's.
    func isAdmin(_ principal: Principal) -> Bool {
        principal.claims[adminClaim] == .bool(true)
    }
}

/// A key or secret `JWTVerification` cannot use; `description` says why (never the key).
public struct JWTConfigurationError: Error, CustomStringConvertible, Sendable {
    /// What is wrong with the key or secret.
    public let description: String
    init(_ description: String) { self.description = description }
}

/// Why a token was refused: the metrics' `reason` label and the problem's `detail`.
struct TokenRejection: Error, Sendable {
    enum Reason: String, CaseIterable, Sendable {
        case missing, malformed, algorithm, signature, expired, notYetValid = "not_yet_valid", issuer, audience, claims
    }

    let reason: Reason
    let detail: String

    init(_ reason: Reason, _ detail: String) {
        self.reason = reason
        self.detail = detail
    }
}
