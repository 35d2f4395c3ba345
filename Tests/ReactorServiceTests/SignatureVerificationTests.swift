import Foundation
import JWSSignatures
import XCTest

@testable import ReactorService

/// JWS signatures on the system's OpenSSL (JWSSignatures): for HS256, RS256 and ES256, the
/// signature the algorithm's owner made verifies and any change to it, to what it signs, or to
/// the key refuses the token; the keys today's verification accepts load, and no other does.
/// The keys were made by `openssl genpkey` and the tokens by PyJWT 2.15 (with pyca/cryptography),
/// not by the code under test; claims {"sub":"alice","exp":2000000000}.
final class SignatureVerificationTests: XCTestCase {
    private static let now = 1_900_000_000.0
    private static let secret = "signature-tests-secret-of-forty-bytes!!!"

    // MARK: HS256

    func testHMACSHA256MatchesRFC4231TestCase2() {
        let key = HMACSHA256Key(Array("Jefe".utf8))
        let message = Array("what do ya want for nothing?".utf8)
        let code = key.authenticationCode(for: message)
        XCTAssertEqual(hex(code), "5bdcc146bf60754e6a042426089575c75a003f089d2739839dec58b964ec3843")
        XCTAssertTrue(key.isValidAuthenticationCode(code, for: message))
        XCTAssertFalse(key.isValidAuthenticationCode(Array(code.dropLast()), for: message))
        XCTAssertFalse(key.isValidAuthenticationCode(code + [0], for: message))
        XCTAssertFalse(key.isValidAuthenticationCode([], for: message))
        XCTAssertFalse(HMACSHA256Key(Array("Jeff".utf8)).isValidAuthenticationCode(code, for: message))
        for bit in [0, 7, 100, 255] {
            XCTAssertFalse(key.isValidAuthenticationCode(flipping(bit, in: code), for: message), "bit \(bit)")
        }
    }

    func testHS256() throws {
        let verification = try JWTVerification(secret: Self.secret)
        XCTAssertEqual(verification.algorithm, "HS256")
        try assertGoodAndBad(verification, good: Self.hs, otherKey: Self.hsOther)
    }

    // MARK: RS256

    func testRS256WithASubjectPublicKeyInfo() throws {
        let verification = try JWTVerification(publicKeyPEM: Self.rsaPublicKey)
        XCTAssertEqual(verification.algorithm, "RS256")
        try assertGoodAndBad(verification, good: Self.rs, otherKey: Self.rsOther)
    }

    func testRS256WithAPKCS1PublicKey() throws {
        // The same key as `rsaPublicKey`, as `openssl rsa -RSAPublicKey_out` writes it.
        let verification = try JWTVerification(publicKeyPEM: Self.rsaPublicKeyPKCS1)
        XCTAssertEqual(verification.algorithm, "RS256")
        try assertGoodAndBad(verification, good: Self.rs, otherKey: Self.rsOther)
    }

    // MARK: ES256

    func testES256() throws {
        let verification = try JWTVerification(publicKeyPEM: Self.ecPublicKey)
        XCTAssertEqual(verification.algorithm, "ES256")
        try assertGoodAndBad(verification, good: Self.es, otherKey: Self.esOther)
    }

    func testES256RefusesTheSignatureAsDERAndWithRAndSSwapped() throws {
        let key = try XCTUnwrap(SignaturePublicKey(pem: Self.ecPublicKey))
        let (input, signature) = try split(Self.es)
        XCTAssertTrue(key.isValidSignature(signature, for: input))
        XCTAssertFalse(key.isValidSignature(der(r: Array(signature[..<32]), s: Array(signature[32...])), for: input))
        XCTAssertFalse(key.isValidSignature(Array(signature[32...] + signature[..<32]), for: input))
        XCTAssertFalse(key.isValidSignature([UInt8](repeating: 0, count: 64), for: input))
    }

    // MARK: keys

    func testOnlyRSAOf2048BitsOrMoreAndP256PublicKeysAreAccepted() {
        let refused: [(String, String, String)] = [
            ("a 1024-bit RSA key", Self.rsa1024PublicKey, "at least 2048 bits (got 1024)"),
            ("a P-384 key", Self.p384PublicKey, "not a PEM public key"),
            ("an Ed25519 key", Self.ed25519PublicKey, "not a PEM public key"),
            ("an RSA-PSS key", Self.rsaPSSPublicKey, "not a PEM public key"),
            ("a private key", Self.ecPrivateKey, "not a PEM public key"),
            ("no PEM", "hello", "not a PEM public key"),
            ("nothing", "", "not a PEM public key"),
            (
                "a PEM block that is not base64", "-----BEGIN PUBLIC KEY-----\n!!!!\n-----END PUBLIC KEY-----\n",
                "not a PEM public key"
            ),
        ]
        for (name, pem, reason) in refused {
            XCTAssertThrowsError(try JWTVerification(publicKeyPEM: pem), name) { error in
                XCTAssertTrue("\(error)".contains(reason), "\(name): \(error)")
            }
        }
    }

    func testTextAroundTheKeyIsSkippedButASecondKeyIsRefused() throws {
        let verification = try JWTVerification(publicKeyPEM: "a comment line\n" + Self.ecPublicKey + "\nanother\n")
        XCTAssertEqual(verification.algorithm, "ES256")
        XCTAssertNoThrow(try verification.verify(Substring(Self.es), now: Self.now).get())
        // Only one key would be used: the file is refused rather than the second key ignored.
        XCTAssertThrowsError(try JWTVerification(publicKeyPEM: Self.ecPublicKey + "\n" + Self.rsaPublicKey))
    }

    // MARK: helpers

    /// The good token verifies; a flipped bit anywhere in its signature, a signature a byte
    /// short or long, a changed claim, and the same claims signed with another key all fail
    /// with the reason `signature`.
    private func assertGoodAndBad(
        _ verification: JWTVerification, good: String, otherKey: String,
        file: StaticString = #filePath, line: UInt = #line
    ) throws {
        let principal = try verification.verify(Substring(good), now: Self.now).get()
        XCTAssertEqual(principal.subject, "alice", file: file, line: line)

        let parts = good.split(separator: ".").map(String.init)
        let signature = try XCTUnwrap(CompactJWS.base64URLDecode(Substring(parts[2])))
        var bad: [(String, String)] = [
            ("another key", otherKey),
            ("a byte short", parts[0] + "." + parts[1] + "." + base64URL(Array(signature.dropLast()))),
            ("a byte long", parts[0] + "." + parts[1] + "." + base64URL(signature + [0])),
            ("no signature", parts[0] + "." + parts[1] + "."),
            (
                "another subject",
                parts[0] + "." + base64URL(Array(#"{"sub":"alicf","exp":2000000000}"#.utf8)) + "." + parts[2]
            ),
        ]
        for bit in Set([0, 1, 8, signature.count * 4, signature.count * 8 - 1]) {
            bad.append(
                ("bit \(bit) flipped", parts[0] + "." + parts[1] + "." + base64URL(flipping(bit, in: signature))))
        }
        for (name, token) in bad {
            switch verification.verify(Substring(token), now: Self.now) {
            case .success: XCTFail("\(verification.algorithm), \(name): accepted", file: file, line: line)
            case let .failure(rejection):
                XCTAssertEqual(
                    rejection.reason, .signature, "\(verification.algorithm), \(name): \(rejection.detail)",
                    file: file, line: line)
            }
        }
    }

    private func split(_ token: String) throws -> (input: [UInt8], signature: [UInt8]) {
        let parts = token.split(separator: ".")
        return (Array((parts[0] + "." + parts[1]).utf8), try XCTUnwrap(CompactJWS.base64URLDecode(parts[2])))
    }

    private func flipping(_ bit: Int, in bytes: [UInt8]) -> [UInt8] {
        var bytes = bytes
        bytes[bit / 8] ^= UInt8(1) << (bit % 8)
        return bytes
    }

    /// r and s as a DER ECDSA-Sig-Value (both 32 bytes, high bit clear or padded with a zero).
    private func der(r: [UInt8], s: [UInt8]) -> [UInt8] {
        func integer(_ value: [UInt8]) -> [UInt8] {
            let body = value[0] & 0x80 != 0 ? [0] + value : value
            return [0x02, UInt8(body.count)] + body
        }
        let body = integer(r) + integer(s)
        return [0x30, UInt8(body.count)] + body
    }

    private func base64URL(_ bytes: [UInt8]) -> String {
        Data(bytes).base64EncodedString().replacingOccurrences(of: "+", with: "-")
            .replacingOccurrences(of: "/", with: "_").replacingOccurrences(of: "=", with: "")
    }

    private func hex(_ bytes: [UInt8]) -> String {
        bytes.map { String(format: "%02x", $0) }.joined()
    }

    // MARK: vectors

    private static let hs =
        "eyJhbGciOiJIUzI1NiIsInR5cCI6IkpXVCJ9."
        + "eyJzdWIiOiJhbGljZSIsImV4cCI6MjAwMDAwMDAwMH0."
        + "dq4d6ZzSAtIWzjXprZZ0TbiEoofPMoJW7U8x6hQUHLU"
    private static let hsOther =
        "eyJhbGciOiJIUzI1NiIsInR5cCI6IkpXVCJ9."
        + "eyJzdWIiOiJhbGljZSIsImV4cCI6MjAwMDAwMDAwMH0."
        + "7jwVswiHVasvr6fi4517GX5HpeP1vNVLBTnXnQisxzI"
    private static let rs =
        "eyJhbGciOiJSUzI1NiIsInR5cCI6IkpXVCJ9."
        + "eyJzdWIiOiJhbGljZSIsImV4cCI6MjAwMDAwMDAwMH0."
        + "xre4x92aefzyaWFnuxcjDmZf3csvx8I5hEdsnPIaF6Lz-indlUWjlpeAaWl13hcU-vXCAQzt969lPEFJev9AiZtZW4OYmD__hdHN9G6yy_LmMoHdZGmp7zxUok99TTN1IztFAN5dBierPK3P_8rwWmhuxFXOT50UIH3NZid_pILw1p07Y6WOmUk24d55jGI-PYxhEitAArNUA0azw_I0V2dg5YpWxzAjt5CUzrUP3UcasMZwTFc1-CzPosFDk907RhKjvPdCk-6KppPqdBNl7zu_ZXhiwyRSayQ7dRQlc3SfRDSjlsDyD6X8FHTkhIIdk3HHa250Ci1vNKE6NQI_8g"
    private static let rsOther =
        "eyJhbGciOiJSUzI1NiIsInR5cCI6IkpXVCJ9."
        + "eyJzdWIiOiJhbGljZSIsImV4cCI6MjAwMDAwMDAwMH0."
        + "XX59NwGfdCPAt0BuBSYofkKsUrFWjowrMlA7OEiKnvsakCHCgJB10bXILIsCWABhbFvNCw4D8cBst8SjkgvJr0HMfBlD_EwktWkXMIM_XqZzpfZV2JZ6SrSjbEqLLjw5c8xUTlpWtIUlWlyM0uHu11kNZddIWz93S18iZo9SgHFrLVDOehDuON-dWL6Z04JXpwW8TjGzz6Rgz-SYz5OdY8tf2RK4XwQ57rESaSyrBBZCaE_hCRuVPTVYXE_i5Ly5HJLXdPbIfg0Oa7oQee6NFV_-2KVNqapXBz-MhCNEiTObWfsFSKK0tJDAnF7IZf2hckfLMtiza4WJ3EyYBuofBA"
    private static let es =
        "eyJhbGciOiJFUzI1NiIsInR5cCI6IkpXVCJ9."
        + "eyJzdWIiOiJhbGljZSIsImV4cCI6MjAwMDAwMDAwMH0."
        + "9gv7ynPQffvkrzs45q-XgYPbQA5xGwkxWXLdHJ1AE80MZuNgnOcYX7BhTG0oRqpNwbTWunVY7Cm4Iv8_x7sWvw"
    private static let esOther =
        "eyJhbGciOiJFUzI1NiIsInR5cCI6IkpXVCJ9."
        + "eyJzdWIiOiJhbGljZSIsImV4cCI6MjAwMDAwMDAwMH0."
        + "nnBvo-rn6WFLpoAnu_yAhlakyBQI_j7ntTsi-Gj7Wjtmq9kYIYhqLcwP59j-lEHTNK1KYorJhe3egCx1HYL1Rg"

    private static let rsaPublicKey = """
        -----BEGIN PUBLIC KEY-----
        MIIBIjANBgkqhkiG9w0BAQEFAAOCAQ8AMIIBCgKCAQEA7yN2Yi7keZYCarPqUwaz
        Z2FO/ZOJSdO5R8P/W2q2YTXmxcqUP2SU2pbvBn+HelsNadJyb/RjIrcAF4rq/X2X
        QFxG5qjvAI2MyheGwdI64L0HVdRV0Y+ZVuEjchyj/FS7vLoUx8bVUFsv9pdwvGwE
        ZrdVeU/H+3l4n7zzn5ytSNbrG/vgtzFbwe6ovzj08xBFsSkuh7C6f25fHhuRT9tB
        21mRPwo0xnI8+wsTigqmV8KsSmU09TWs4mGdNH90PlIiBcP/bW9ayf1LjgT9HKUs
        ukbd9mxImGLpUrIeFyfXIjj2VfI4XCTagHub47PC03MZ3gXYKh6BSWTbiwBY56Ff
        +wIDAQAB
        -----END PUBLIC KEY-----
        """
    private static let rsaPublicKeyPKCS1 = """
        -----BEGIN RSA PUBLIC KEY-----
        MIIBCgKCAQEA7yN2Yi7keZYCarPqUwazZ2FO/ZOJSdO5R8P/W2q2YTXmxcqUP2SU
        2pbvBn+HelsNadJyb/RjIrcAF4rq/X2XQFxG5qjvAI2MyheGwdI64L0HVdRV0Y+Z
        VuEjchyj/FS7vLoUx8bVUFsv9pdwvGwEZrdVeU/H+3l4n7zzn5ytSNbrG/vgtzFb
        we6ovzj08xBFsSkuh7C6f25fHhuRT9tB21mRPwo0xnI8+wsTigqmV8KsSmU09TWs
        4mGdNH90PlIiBcP/bW9ayf1LjgT9HKUsukbd9mxImGLpUrIeFyfXIjj2VfI4XCTa
        gHub47PC03MZ3gXYKh6BSWTbiwBY56Ff+wIDAQAB
        -----END RSA PUBLIC KEY-----
        """
    private static let ecPublicKey = """
        -----BEGIN PUBLIC KEY-----
        MFkwEwYHKoZIzj0CAQYIKoZIzj0DAQcDQgAE4tzPH2qqUPgsaLfiFNF/FwR3i/hk
        NsZur3ug53bomk0xxuErDEYAvHpOEixFr6mYNwJ3cTHcAR7Gslrk+70Ffw==
        -----END PUBLIC KEY-----
        """
    private static let rsa1024PublicKey = """
        -----BEGIN PUBLIC KEY-----
        MIGfMA0GCSqGSIb3DQEBAQUAA4GNADCBiQKBgQDSTe/WjOhpZ3IWi8hoE2Eocq2K
        /9a2KFulSD+5LaDFqyoGv3blQYzzSLWjm8IBhCHQW5Csm1FP0dFrL+/p8pGDtMIl
        nYGlya6tJrPrp3rzkSZv3NIVQBxoDf4ZAVVvQe2qTK51JMqoYhdk3UrhFKSXBCyJ
        LdNMcue7tmDAPsqYqQIDAQAB
        -----END PUBLIC KEY-----
        """
    private static let p384PublicKey = """
        -----BEGIN PUBLIC KEY-----
        MHYwEAYHKoZIzj0CAQYFK4EEACIDYgAEmnV2CZwjRvmMkoixv1MEnRT9WwzyVmF5
        B4xGvFaTGC78NRo99AkxHOKo4915P0NV0+koiI95q8/WiVbcPhxJ+D45+JStCKqF
        HMrpdRxh35fGlafAC8DYM8KMsFWnEK2z
        -----END PUBLIC KEY-----
        """
    private static let ed25519PublicKey = """
        -----BEGIN PUBLIC KEY-----
        MCowBQYDK2VwAyEA4HJtbJHWJXP97CnjYIFo74qtEEDW5sHTyPJVHTj3p3Q=
        -----END PUBLIC KEY-----
        """
    private static let rsaPSSPublicKey = """
        -----BEGIN PUBLIC KEY-----
        MIIBIDALBgkqhkiG9w0BAQoDggEPADCCAQoCggEBAKZkjebmzaiFPQh+3iwJB1m4
        rmCZY1mfWQI72vbtnjCkpKEx/K+DhJhBf4j2nq9+NK7XoPz7y2m1mO1syIRYUOHg
        SlswLkqo7BWSvvT41ASx9WITbzGH1fk2KJxEtguNWxfOC91fXLEWRmIll+dVYsFr
        s+4MvQV+IuL1T7344sqookdhCAzUjPmFLdSx4HZPaLU2RUCBP1fUB86KshjsOfdE
        +KE2VK6gauu3UG0UI7NRuhgWxhfpWU7XsjJk2pn1jV5J3Qgf9PxFfcteNHQwGS8M
        lecbWKZPSWckFBrzE5GgN0aSirweQMhTGhkimzLRw7cYTIUdmYUBcI6OWy5r83cC
        AwEAAQ==
        -----END PUBLIC KEY-----
        """
    /// Another P-256 key's private half (the one `esOther` is signed with).
    private static let ecPrivateKey = """
        -----BEGIN PRIVATE KEY-----
        MIGHAgEAMBMGByqGSM49AgEGCCqGSM49AwEHBG0wawIBAQQgm4+eLrf1NpKIV7+F
        qbenY77dvh2Se7YzaGehIO7yuwuhRANCAAS84jTqlax8rAwz2NUpl6cE8+9bJKVc
        qbgyD2SpYrkjgffgQvSW9IBG7ciWD710KmwMsZS3M/Y+ib16bszD9DMT
        -----END PRIVATE KEY-----
        """
}
