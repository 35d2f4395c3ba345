internal import CLibCrypto

/// A public key JWS signatures are checked with, read from PEM by OpenSSL: an RSA key (RS256:
/// RSASSA-PKCS1-v1_5 with SHA-256) or a P-256 key (ES256: ECDSA with SHA-256). The kind of key
/// decides the algorithm; no other key is accepted.
///
/// Immutable once made: OpenSSL allows one `EVP_PKEY` to be used for verification by many
/// threads at once as long as nobody changes it, hence `@unchecked Sendable`.
// why: wraps an immutable EVP_PKEY (C), which OpenSSL lets many threads verify with at once.
package final class SignaturePublicKey: @unchecked Sendable {
    package enum Kind: Equatable, Sendable {
        /// RS256; `bits` is the modulus' size.
        case rsa(bits: Int)
        /// ES256.
        case p256
    }

    package let kind: Kind
    private let key: OpaquePointer

    /// The key in `pem`'s one PEM block: `-----BEGIN PUBLIC KEY-----` (SubjectPublicKeyInfo, as
    /// `openssl pkey -pubout` writes it) holding an RSA or P-256 key, or
    /// `-----BEGIN RSA PUBLIC KEY-----` (PKCS #1). Nil for anything else: a private key, another
    /// curve or algorithm, DER with bytes left over, text that is not PEM, a second block (one
    /// key is used: a second one would be ignored without a word).
    package init?(pem: String) {
        defer { ERR_clear_error() }
        guard let (label, der) = Self.onlyPEMBlock(pem) else { return nil }
        let parsed: OpaquePointer? = der.withUnsafeBufferPointer { buffer in
            guard let start = buffer.baseAddress else { return nil }
            var cursor: UnsafePointer<UInt8>? = start
            let key: OpaquePointer?
            switch label {
            case "PUBLIC KEY": key = d2i_PUBKEY(nil, &cursor, buffer.count)
            case "RSA PUBLIC KEY": key = d2i_PublicKey(EVP_PKEY_RSA, nil, &cursor, buffer.count)
            default: return nil
            }
            guard let key else { return nil }
            guard cursor == start + buffer.count else {
                EVP_PKEY_free(key)
                return nil
            }
            return key
        }
        guard let parsed else { return nil }
        switch EVP_PKEY_get_base_id(parsed) {
        case EVP_PKEY_RSA:
            kind = .rsa(bits: Int(EVP_PKEY_get_bits(parsed)))
        case EVP_PKEY_EC where Self.groupName(parsed) == "prime256v1":
            kind = .p256
        default:
            // RSA-PSS keys (restricted to PSS, so not for RS256), other curves, Ed25519, DSA, ...
            EVP_PKEY_free(parsed)
            return nil
        }
        key = parsed
    }

    deinit {
        EVP_PKEY_free(key)
    }

    /// True when `signature` is this key's signature of `message` with SHA-256: PKCS #1 v1.5 for
    /// an RSA key (the signature as long as the modulus), ECDSA for a P-256 key with the
    /// signature as JWS writes it (RFC 7518 3.4: r and s, 32 bytes each, not DER).
    package func isValidSignature(_ signature: [UInt8], for message: [UInt8]) -> Bool {
        defer { ERR_clear_error() }
        switch kind {
        case .rsa:
            return verify(signature, message, padding: RSA_PKCS1_PADDING)
        case .p256:
            guard let der = Self.derECDSASignature(raw: signature) else { return false }
            return verify(der, message, padding: nil)
        }
    }

    private func verify(_ signature: [UInt8], _ message: [UInt8], padding: Int32?) -> Bool {
        guard let context = EVP_MD_CTX_new() else { return false }
        defer { EVP_MD_CTX_free(context) }
        var keyContext: OpaquePointer?
        guard EVP_DigestVerifyInit(context, &keyContext, EVP_sha256(), nil, key) == 1 else { return false }
        if let padding {
            guard EVP_PKEY_CTX_set_rsa_padding(keyContext, padding) == 1 else { return false }
        }
        // 1 is a match; 0 a mismatch and a negative value an error, both a refusal.
        return signature.withUnsafeBufferPointer { signature in
            message.withUnsafeBufferPointer { message in
                EVP_DigestVerify(context, signature.baseAddress, signature.count, message.baseAddress, message.count)
            }
        } == 1
    }

    /// JWS's r || s (32 bytes each) as the DER `ECDSA-Sig-Value` OpenSSL verifies; nil when it is
    /// not 64 bytes.
    private static func derECDSASignature(raw: [UInt8]) -> [UInt8]? {
        guard raw.count == 64, let signature = ECDSA_SIG_new() else { return nil }
        defer { ECDSA_SIG_free(signature) }
        let (r, s) = raw.withUnsafeBufferPointer { raw in
            (BN_bin2bn(raw.baseAddress, 32, nil), BN_bin2bn(raw.baseAddress! + 32, 32, nil))
        }
        // set0 takes both numbers; on failure they are still ours to free.
        guard let r, let s, ECDSA_SIG_set0(signature, r, s) == 1 else {
            BN_free(r)
            BN_free(s)
            return nil
        }
        let length = i2d_ECDSA_SIG(signature, nil)
        guard length > 0 else { return nil }
        var der = [UInt8](repeating: 0, count: Int(length))
        let written = der.withUnsafeMutableBufferPointer { buffer -> Int32 in
            var cursor = buffer.baseAddress
            return i2d_ECDSA_SIG(signature, &cursor)
        }
        return written == length ? der : nil
    }

    /// The PEM block's label and its bytes, decoded by OpenSSL (text around it is skipped); nil
    /// when there is none, or more than one.
    private static func onlyPEMBlock(_ pem: String) -> (label: String, der: [UInt8])? {
        let text = Array(pem.utf8)
        guard !text.isEmpty, text.count <= Int(Int32.max) else { return nil }
        return text.withUnsafeBytes { bytes -> (String, [UInt8])? in
            guard let bio = BIO_new_mem_buf(bytes.baseAddress, Int32(bytes.count)) else { return nil }
            defer { BIO_free(bio) }
            var name: UnsafeMutablePointer<CChar>?
            var header: UnsafeMutablePointer<CChar>?
            var data: UnsafeMutablePointer<UInt8>?
            var length = 0
            defer {
                clibcrypto_free(name)
                clibcrypto_free(header)
                clibcrypto_free(data)
            }
            guard PEM_read_bio(bio, &name, &header, &data, &length) == 1, let name, let data else { return nil }
            // An encrypted block (Proc-Type headers) is a private key's; public keys have none.
            guard header.map({ $0.pointee == 0 }) ?? true else { return nil }
            let block = (String(cString: name), Array(UnsafeBufferPointer(start: data, count: length)))
            var second:
                (
                    name: UnsafeMutablePointer<CChar>?, header: UnsafeMutablePointer<CChar>?,
                    data: UnsafeMutablePointer<UInt8>?
                ) = (nil, nil, nil)
            defer {
                clibcrypto_free(second.name)
                clibcrypto_free(second.header)
                clibcrypto_free(second.data)
            }
            guard PEM_read_bio(bio, &second.name, &second.header, &second.data, &length) != 1 else { return nil }
            return block
        }
    }

    /// The curve's short name (`prime256v1` for P-256), or nil.
    private static func groupName(_ key: OpaquePointer) -> String? {
        var name = [CChar](repeating: 0, count: 64)
        var length = 0
        guard EVP_PKEY_get_group_name(key, &name, name.count, &length) == 1 else { return nil }
        return String(decoding: name.prefix { $0 != 0 }.map { UInt8(bitPattern: $0) }, as: UTF8.self)
    }
}
