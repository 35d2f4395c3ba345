#ifndef CLIBCRYPTO_SHIM_H
#define CLIBCRYPTO_SHIM_H
// OpenSSL's libcrypto (the system's, 3.0 or later), seen from Swift: the few headers JWS
// verification uses. Only Sources/JWSSignatures imports this module.
#include <openssl/bio.h>
#include <openssl/bn.h>
#include <openssl/crypto.h>
#include <openssl/ec.h>
#include <openssl/err.h>
#include <openssl/evp.h>
#include <openssl/hmac.h>
#include <openssl/pem.h>
#include <openssl/rsa.h>
#include <openssl/sha.h>
#include <openssl/x509.h>

// OPENSSL_free is a macro (it passes the caller's file and line), which Swift cannot call.
static inline void clibcrypto_free(void *pointer) {
    OPENSSL_free(pointer);
}

// SHA-256 on a context on the stack: EVP_Digest allocates a context and its provider's state
// and dispatches through them on every call, several times the cost of hashing a short message.
// The low-level functions are deprecated in OpenSSL 3 (for EVP), not removed.
#pragma clang diagnostic push
#pragma clang diagnostic ignored "-Wdeprecated-declarations"
static inline int clibcrypto_sha256(const void *message, size_t count, unsigned char digest[32]) {
    SHA256_CTX context;
    return SHA256_Init(&context) && SHA256_Update(&context, message, count) && SHA256_Final(digest, &context);
}
#pragma clang diagnostic pop

#endif
