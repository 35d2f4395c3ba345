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
#include <openssl/x509.h>

// OPENSSL_free is a macro (it passes the caller's file and line), which Swift cannot call.
static inline void clibcrypto_free(void *pointer) {
    OPENSSL_free(pointer);
}

#endif
