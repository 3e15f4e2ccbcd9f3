#include "CAEAD.h"

// Linux only: SIMPCore depends on this target there (Package.swift); elsewhere it compiles
// empty, since other SDKs have no OpenSSL, and swift-crypto seals instead.
#if defined(__linux__)

#include <limits.h>
#include <pthread.h>
#include <openssl/evp.h>

enum { TAG_SIZE = 16 };

static pthread_key_t context_key;
static pthread_once_t context_once = PTHREAD_ONCE_INIT;
// The thread's context, also registered under `context_key` so it is freed when the thread ends.
static __thread EVP_CIPHER_CTX *thread_context;

// Runs on the ending thread: a seal in a later destructor of that thread makes a new context
// rather than use this freed one.
static void free_context(void *context) {
    thread_context = NULL;
    EVP_CIPHER_CTX_free(context);
}

static void make_key(void) { pthread_key_create(&context_key, free_context); }

static EVP_CIPHER_CTX *context(void) {
    if (thread_context) return thread_context;
    pthread_once(&context_once, make_key);
    EVP_CIPHER_CTX *made = EVP_CIPHER_CTX_new();
    if (!made) return NULL;
    if (EVP_CipherInit_ex(made, EVP_chacha20_poly1305(), NULL, NULL, NULL, 1) != 1) {
        EVP_CIPHER_CTX_free(made);
        return NULL;
    }
    pthread_setspecific(context_key, made);
    thread_context = made;
    return made;
}

int simp_aead_prepare(void) { return context() != NULL; }

int simp_aead_seal(const uint8_t *key, const uint8_t *nonce, const uint8_t *aad, size_t aad_length,
                   const uint8_t *plaintext, size_t length, uint8_t *out) {
    EVP_CIPHER_CTX *ctx = context();
    if (!ctx || length > INT_MAX - TAG_SIZE || aad_length > INT_MAX) return 0;
    int written = 0, final = 0;
    if (EVP_CipherInit_ex(ctx, NULL, NULL, key, nonce, 1) != 1) return 0;
    if (EVP_CipherUpdate(ctx, NULL, &written, aad, (int)aad_length) != 1) return 0;
    if (EVP_CipherUpdate(ctx, out, &written, plaintext, (int)length) != 1) return 0;
    if (EVP_CipherFinal_ex(ctx, out + written, &final) != 1) return 0;
    return EVP_CIPHER_CTX_ctrl(ctx, EVP_CTRL_AEAD_GET_TAG, TAG_SIZE, out + length) == 1;
}

int simp_aead_open(const uint8_t *key, const uint8_t *nonce, const uint8_t *aad, size_t aad_length,
                   const uint8_t *sealed, size_t sealed_length, uint8_t *out) {
    EVP_CIPHER_CTX *ctx = context();
    if (!ctx || sealed_length < TAG_SIZE || sealed_length > INT_MAX || aad_length > INT_MAX) return 0;
    size_t length = sealed_length - TAG_SIZE;
    int written = 0, final = 0;
    if (EVP_CipherInit_ex(ctx, NULL, NULL, key, nonce, 0) != 1) return 0;
    // The tag is set before the data: Final checks it.
    if (EVP_CIPHER_CTX_ctrl(ctx, EVP_CTRL_AEAD_SET_TAG, TAG_SIZE, (void *)(sealed + length)) != 1) return 0;
    if (EVP_CipherUpdate(ctx, NULL, &written, aad, (int)aad_length) != 1) return 0;
    if (EVP_CipherUpdate(ctx, out, &written, sealed, (int)length) != 1) return 0;
    return EVP_CipherFinal_ex(ctx, out + written, &final) == 1;
}

#endif
