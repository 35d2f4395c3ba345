internal import CLibCrypto

/// SHA-256 (FIPS 180-4), OpenSSL's: for digests that stand for a longer text (an idempotent
/// request), not only for signatures.
package enum SHA256 {
    /// Fetched once: with `EVP_sha256()`, OpenSSL 3 looks the algorithm up in its provider on
    /// every digest (about 6,000 instructions of a keyed action's). A fetched EVP_MD is read-only
    /// and shared by every thread.
    nonisolated(unsafe) private static let algorithm = EVP_MD_fetch(nil, "SHA256", nil) ?? EVP_sha256()

    package static func digest(_ message: [UInt8]) -> [UInt8] {
        var digest = [UInt8](repeating: 0, count: 32)
        var length: UInt32 = 0
        let done = message.withUnsafeBufferPointer { input in
            digest.withUnsafeMutableBufferPointer { output in
                EVP_Digest(input.baseAddress, input.count, output.baseAddress, &length, algorithm, nil)
            }
        }
        // Only an allocation failure inside OpenSSL gets here.
        precondition(done == 1 && length == 32, "OpenSSL's SHA-256 failed")
        return digest
    }
}
