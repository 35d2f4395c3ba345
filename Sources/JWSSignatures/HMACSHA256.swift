internal import CLibCrypto

/// An HMAC-SHA256 key (RFC 2104), as JWS's HS256 uses it: the MAC is OpenSSL's, the comparison
/// constant-time (`CRYPTO_memcmp`), so a forger learns nothing from how long a refusal takes.
package struct HMACSHA256Key: Sendable {
    private let secret: [UInt8]

    /// The MAC's length in bytes (SHA-256's output).
    package static let codeLength = 32

    package init(_ secret: [UInt8]) {
        self.secret = secret
    }

    /// HMAC-SHA256 of `message`: 32 bytes.
    package func authenticationCode(for message: [UInt8]) -> [UInt8] {
        var code = [UInt8](repeating: 0, count: Self.codeLength)
        var length: UInt32 = 0
        let done = secret.withUnsafeBytes { key in
            message.withUnsafeBufferPointer { input in
                code.withUnsafeMutableBufferPointer { output in
                    HMAC(
                        EVP_sha256(), key.baseAddress, Int32(key.count), input.baseAddress, input.count,
                        output.baseAddress, &length)
                }
            }
        }
        // Only an allocation failure inside OpenSSL gets here; a MAC that cannot be made is
        // not a MAC that matches, and no caller may go on as if it were.
        precondition(done != nil && length == UInt32(Self.codeLength), "OpenSSL's HMAC-SHA256 failed")
        return code
    }

    /// True when `code` is `message`'s HMAC-SHA256 under this key. The length is not secret and
    /// is checked first; the bytes are compared in constant time.
    package func isValidAuthenticationCode(_ code: [UInt8], for message: [UInt8]) -> Bool {
        guard code.count == Self.codeLength else { return false }
        let expected = authenticationCode(for: message)
        return expected.withUnsafeBytes { expected in
            code.withUnsafeBytes { code in
                CRYPTO_memcmp(expected.baseAddress, code.baseAddress, Self.codeLength) == 0
            }
        }
    }
}
