internal import CLibCrypto

/// SHA-256 (FIPS 180-4), OpenSSL's: for digests that stand for a longer text (an idempotent
/// request), not only for signatures.
package enum SHA256 {
    package static func digest(_ message: [UInt8]) -> [UInt8] {
        var digest = [UInt8](repeating: 0, count: 32)
        var length: UInt32 = 0
        let done = message.withUnsafeBufferPointer { input in
            digest.withUnsafeMutableBufferPointer { output in
                EVP_Digest(input.baseAddress, input.count, output.baseAddress, &length, EVP_sha256(), nil)
            }
        }
        // Only an allocation failure inside OpenSSL gets here.
        precondition(done == 1 && length == 32, "OpenSSL's SHA-256 failed")
        return digest
    }
}
