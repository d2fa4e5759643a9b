/* crypto.h — password hashing, random tokens and digests (OpenSSL 3).
 *
 * Passwords: scrypt (N = 2^ln, r = 8, p = 1) stored as a PHC-style string
 *   $scrypt$ln=17,r=8,p=1$<salt, base64 no padding>$<hash, base64 no padding>
 * with a 16-byte salt and a 32-byte hash.  Hashing and verifying are slow on
 * purpose (~0.1–0.5 s, 128 MiB at ln=17): call them only from worker threads.
 * Everything else here is fast and may run on the loop.
 */
#ifndef GPUCLOUD_CRYPTO_H
#define GPUCLOUD_CRYPTO_H

#include <stddef.h>

#define CRYPTO_PHC_MAX 160

/* Writes a PHC string for password into out (>= CRYPTO_PHC_MAX).  ln in
 * [10, 20].  Returns 0 or -1. Blocking. */
int crypto_password_hash(const char *password, int ln, char *out, size_t outlen);

/* 1 if password matches phc, 0 if not, -1 if phc is malformed or its
 * parameters are out of bounds (ln outside 10..20, r outside 1..16, p
 * outside 1..4, salt under 8 bytes, hash not 32 bytes).  Constant time in
 * the comparison.  Blocking. */
int crypto_password_verify(const char *password, const char *phc);

/* Fills buf with len cryptographically random bytes. Returns 0 or -1. */
int crypto_random(void *buf, size_t len);

/* base64url without padding of nbytes random bytes, NUL-terminated.
 * outlen must be >= 4 * ((nbytes + 2) / 3) + 1.  Returns 0 or -1. */
int crypto_token(char *out, size_t outlen, size_t nbytes);

/* SHA-256 of data as 64 lowercase hex chars + NUL. */
void crypto_sha256_hex(const void *data, size_t len, char out[65]);

/* base64url (no padding) of len bytes into out (NUL-terminated).  Returns
 * the length written, or 0 if outlen is too small. */
size_t crypto_b64url(const void *data, size_t len, char *out, size_t outlen);

/* Constant-time equality of two equal-length buffers: 1 equal, 0 not. */
int crypto_equal(const void *a, const void *b, size_t len);

/* Secrets at rest (node TLS keys, registry passwords): AES-256-GCM under a
 * 32-byte master key kept in a file (created 0600 with a random key on first
 * start; every replica must read the same file). */

/* Loads (or creates) the master key at path.  Returns 0 or -1. */
int crypto_master_key_load(const char *path);

/* Encrypts len bytes of plain, binding aad (a context string such as
 * "node:12:tls_key", may be NULL) so a value cannot be moved to another
 * record.  Returns "v1:" + base64(nonce | ciphertext | tag), malloc'd (caller
 * frees), or NULL. */
char *crypto_seal(const void *plain, size_t len, const char *aad);

/* Decrypts what crypto_seal made with the same aad.  Returns the plaintext
 * (malloc'd, NUL-terminated, caller frees) with its length in *len, or NULL
 * when the value was tampered with, the aad differs or the key is wrong. */
char *crypto_open(const char *sealed, const char *aad, size_t *len);

#endif
