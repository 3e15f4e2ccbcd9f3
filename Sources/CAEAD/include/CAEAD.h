#ifndef SIMP_CAEAD_H
#define SIMP_CAEAD_H

#include <stddef.h>
#include <stdint.h>

/// ChaCha20-Poly1305 (RFC 8439) through OpenSSL's libcrypto, called directly: swift-crypto's
/// generic wrapper cost six times the cipher per datagram (docs/PERFORMANCE.md). Each thread
/// keeps one cipher context. Key: 32 bytes; nonce: 12; tag: 16, after the ciphertext.

/// Seals `length` bytes into `out`, which has room for `length + 16`. Returns 1, or 0 on failure.
int simp_aead_seal(const uint8_t *key, const uint8_t *nonce, const uint8_t *aad, size_t aad_length,
                   const uint8_t *plaintext, size_t length, uint8_t *out);

/// Opens `sealed_length` bytes (ciphertext then tag) into `out`, which has room for
/// `sealed_length - 16`. Returns 1, or 0 when the tag does not verify (or on failure).
int simp_aead_open(const uint8_t *key, const uint8_t *nonce, const uint8_t *aad, size_t aad_length,
                   const uint8_t *sealed, size_t sealed_length, uint8_t *out);

/// Makes the calling thread's context now (and with it OpenSSL's own set-up), so the first
/// datagram does not pay for it. Returns 1, or 0 when the context cannot be made.
int simp_aead_prepare(void);

#endif
