internal import CLibCrypto

/// SHA-256 (FIPS 180-4), OpenSSL's: for digests that stand for a longer text (an idempotent
/// request), not only for signatures.
package enum SHA256 {
    package static func digest(_ message: [UInt8]) -> [UInt8] {
        [UInt8](unsafeUninitializedCapacity: 32) { digest, count in
            let done = message.withUnsafeBytes { input in
                clibcrypto_sha256(input.baseAddress, input.count, digest.baseAddress)
            }
            // Only a broken libcrypto gets here: the low-level functions neither allocate nor fail.
            precondition(done == 1, "OpenSSL's SHA-256 failed")
            count = 32
        }
    }
}
