/* crypto.c — password hashing (scrypt, PHC strings), random tokens, SHA-256
 * digests and constant-time comparison, all on OpenSSL 3.
 *
 * Owns the PHC encoding and its strict parser.  Does not own where hashes or
 * tokens are stored, nor which thread runs the slow scrypt calls (worker.c).
 */
#include "base/crypto.h"

#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <pthread.h>
#include <stdlib.h>
#include <unistd.h>
#include <stdint.h>
#include <stdio.h>
#include <string.h>

#include <openssl/crypto.h>
#include <openssl/evp.h>
#include <openssl/rand.h>

#define SALT_LEN 16
#define HASH_LEN 32
#define SALT_MIN 8 /* accepted when verifying strings made elsewhere */
#define SALT_MAX 64

#define LN_MIN 10
#define LN_MAX 20
#define R_MIN  1
#define R_MAX  16
#define P_MIN  1
#define P_MAX  4

#define HASH_R 8
#define HASH_P 1

static const char b64_std[] = "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/";
static const char b64_url[] = "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789-_";

/* Length of the unpadded base64 text for len bytes. */
static size_t b64_len(size_t len)
{
	return len / 3 * 4 + (len % 3 ? len % 3 + 1 : 0);
}

/* Unpadded base64 of len bytes with alphabet abc into out, NUL-terminated.
 * Returns the text length, or 0 if out is too small. */
static size_t b64_encode(const char *abc, const unsigned char *in, size_t len, char *out,
                         size_t outlen)
{
	size_t n = b64_len(len), i, o = 0;

	if (len > (SIZE_MAX - 1) / 4 * 3 || outlen < n + 1)
		return 0;
	for (i = 0; i + 2 < len; i += 3) {
		uint32_t v = (uint32_t)in[i] << 16 | (uint32_t)in[i + 1] << 8 | in[i + 2];
		out[o++] = abc[v >> 18 & 63];
		out[o++] = abc[v >> 12 & 63];
		out[o++] = abc[v >> 6 & 63];
		out[o++] = abc[v & 63];
	}
	if (len - i == 1) {
		uint32_t v = (uint32_t)in[i] << 16;
		out[o++] = abc[v >> 18 & 63];
		out[o++] = abc[v >> 12 & 63];
	} else if (len - i == 2) {
		uint32_t v = (uint32_t)in[i] << 16 | (uint32_t)in[i + 1] << 8;
		out[o++] = abc[v >> 18 & 63];
		out[o++] = abc[v >> 12 & 63];
		out[o++] = abc[v >> 6 & 63];
	}
	out[o] = '\0';
	return o;
}

static int b64_std_value(char c)
{
	if (c >= 'A' && c <= 'Z')
		return c - 'A';
	if (c >= 'a' && c <= 'z')
		return c - 'a' + 26;
	if (c >= '0' && c <= '9')
		return c - '0' + 52;
	if (c == '+')
		return 62;
	if (c == '/')
		return 63;
	return -1;
}

/* Strict decoding of unpadded standard base64 in[0..len) into out (at most
 * outmax bytes).  Rejects padding, foreign characters, impossible lengths
 * and non-zero trailing bits, so each byte string has exactly one accepted
 * spelling.  Returns the decoded length or -1. */
static long b64_decode(const char *in, size_t len, unsigned char *out, size_t outmax)
{
	size_t i, o = 0, need;
	uint32_t acc = 0;
	int bits = 0;

	if (len % 4 == 1)
		return -1;
	need = len / 4 * 3 + (len % 4 ? len % 4 - 1 : 0);
	if (need > outmax)
		return -1;
	for (i = 0; i < len; i++) {
		int v = b64_std_value(in[i]);

		if (v < 0)
			return -1;
		acc = acc << 6 | (uint32_t)v;
		bits += 6;
		if (bits >= 8) {
			bits -= 8;
			out[o++] = (unsigned char)(acc >> bits & 0xff);
		}
	}
	if (bits && (acc & ((1u << bits) - 1)))
		return -1;
	return (long)o;
}

/* Reads "<name>=<decimal>" at *s, advancing *s past it.  Digits only, no
 * sign, no leading zero, at most two digits (every bound here is < 100). */
static int parse_param(const char **s, const char *name, int *val)
{
	size_t nl = strlen(name);
	const char *p = *s;
	int v = 0, nd = 0;

	if (strncmp(p, name, nl) != 0 || p[nl] != '=')
		return -1;
	p += nl + 1;
	if (*p == '0')
		return -1;
	while (*p >= '0' && *p <= '9') {
		if (++nd > 2)
			return -1;
		v = v * 10 + (*p - '0');
		p++;
	}
	if (nd == 0)
		return -1;
	*val = v;
	*s = p;
	return 0;
}

static int scrypt_raw(const char *password, const unsigned char *salt, size_t saltlen, int ln,
                      int r, int p, unsigned char *key, size_t keylen)
{
	uint64_t N = (uint64_t)1 << ln;
	/* OpenSSL needs 128*r*(N+2) bytes for V plus 128*r*p for B. */
	uint64_t maxmem =
	        128 * (uint64_t)r * (N + 2) + 128 * (uint64_t)r * (uint64_t)p + (1u << 20);

	if (EVP_PBE_scrypt(password, strlen(password), salt, saltlen, N, (uint64_t)r, (uint64_t)p,
	                   maxmem, key, keylen) != 1)
		return -1;
	return 0;
}

int crypto_password_hash(const char *password, int ln, char *out, size_t outlen)
{
	unsigned char salt[SALT_LEN], key[HASH_LEN];
	char salt64[32], key64[48];
	int n, ret = -1;

	if (!password || !out || ln < LN_MIN || ln > LN_MAX)
		return -1;
	if (crypto_random(salt, sizeof(salt)) != 0)
		goto out;
	if (scrypt_raw(password, salt, sizeof(salt), ln, HASH_R, HASH_P, key, sizeof(key)) != 0)
		goto out;
	if (!b64_encode(b64_std, salt, sizeof(salt), salt64, sizeof(salt64)) ||
	    !b64_encode(b64_std, key, sizeof(key), key64, sizeof(key64)))
		goto out;
	n = snprintf(out, outlen, "$scrypt$ln=%d,r=%d,p=%d$%s$%s", ln, HASH_R, HASH_P, salt64,
	             key64);
	if (n < 0 || (size_t)n >= outlen) {
		if (outlen)
			out[0] = '\0';
		goto out;
	}
	ret = 0;
out:
	OPENSSL_cleanse(key, sizeof(key));
	OPENSSL_cleanse(key64, sizeof(key64));
	return ret;
}

int crypto_password_verify(const char *password, const char *phc)
{
	static const char prefix[] = "$scrypt$";
	unsigned char salt[SALT_MAX], want[HASH_LEN], got[HASH_LEN];
	const char *s, *salt64, *hash64, *end;
	int ln, r, p, ret = -1;
	long saltlen;

	if (!password || !phc)
		return -1;
	if (strncmp(phc, prefix, sizeof(prefix) - 1) != 0)
		return -1;
	s = phc + sizeof(prefix) - 1;
	if (parse_param(&s, "ln", &ln) != 0 || *s++ != ',' || parse_param(&s, "r", &r) != 0 ||
	    *s++ != ',' || parse_param(&s, "p", &p) != 0 || *s++ != '$')
		return -1;
	if (ln < LN_MIN || ln > LN_MAX || r < R_MIN || r > R_MAX || p < P_MIN || p > P_MAX)
		return -1;

	salt64 = s;
	hash64 = strchr(salt64, '$');
	if (!hash64)
		return -1;
	saltlen = b64_decode(salt64, (size_t)(hash64 - salt64), salt, sizeof(salt));
	if (saltlen < SALT_MIN)
		return -1;
	hash64++;
	end = hash64 + strlen(hash64);
	if (b64_decode(hash64, (size_t)(end - hash64), want, sizeof(want)) != HASH_LEN)
		return -1;

	if (scrypt_raw(password, salt, (size_t)saltlen, ln, r, p, got, sizeof(got)) != 0)
		goto out;
	ret = CRYPTO_memcmp(got, want, sizeof(got)) == 0 ? 1 : 0;
out:
	OPENSSL_cleanse(got, sizeof(got));
	OPENSSL_cleanse(want, sizeof(want));
	return ret;
}

int crypto_random(void *buf, size_t len)
{
	unsigned char *p = buf;

	while (len > 0) {
		int n = len > INT_MAX ? INT_MAX : (int)len;

		if (RAND_bytes(p, n) != 1)
			return -1;
		p += n;
		len -= (size_t)n;
	}
	return 0;
}

int crypto_token(char *out, size_t outlen, size_t nbytes)
{
	/* Whole 3-byte groups encode independently, so the token is built
	 * chunk by chunk without a heap buffer. */
	unsigned char chunk[48];
	size_t o = 0;
	int ret = -1;

	if (!out || outlen == 0)
		return -1;
	out[0] = '\0';
	if (nbytes > (SIZE_MAX - 1) / 4 || outlen < 4 * ((nbytes + 2) / 3) + 1)
		return -1;
	while (nbytes > 0) {
		size_t n = nbytes < sizeof(chunk) ? nbytes : sizeof(chunk);
		size_t w;

		if (crypto_random(chunk, n) != 0)
			goto out;
		w = b64_encode(b64_url, chunk, n, out + o, outlen - o);
		if (w == 0)
			goto out;
		o += w;
		nbytes -= n;
	}
	ret = 0;
out:
	OPENSSL_cleanse(chunk, sizeof(chunk));
	if (ret != 0)
		OPENSSL_cleanse(out, outlen);
	return ret;
}

/* SHA-256 fetched from its provider once: EVP_sha256() makes every
 * EVP_Digest() fetch it again, half the cost of hashing a session cookie. */
static EVP_MD *sha256_md;
static pthread_once_t sha256_once = PTHREAD_ONCE_INIT;

static void sha256_fetch(void)
{
	sha256_md = EVP_MD_fetch(NULL, "SHA256", NULL);
}

void crypto_sha256_hex(const void *data, size_t len, char out[65])
{
	static const char hex[] = "0123456789abcdef";
	unsigned char md[EVP_MAX_MD_SIZE];
	unsigned int mdlen = 0, i;

	pthread_once(&sha256_once, sha256_fetch);
	if (EVP_Digest(data, len, md, &mdlen, sha256_md ? sha256_md : EVP_sha256(), NULL) != 1 ||
	    mdlen != 32) {
		out[0] = '\0';
		return;
	}
	for (i = 0; i < mdlen; i++) {
		out[2 * i] = hex[md[i] >> 4];
		out[2 * i + 1] = hex[md[i] & 15];
	}
	out[64] = '\0';
}

size_t crypto_b64url(const void *data, size_t len, char *out, size_t outlen)
{
	if (!out)
		return 0;
	return b64_encode(b64_url, data, len, out, outlen);
}

int crypto_equal(const void *a, const void *b, size_t len)
{
	return CRYPTO_memcmp(a, b, len) == 0;
}

/* ---- secrets at rest: AES-256-GCM under a master key file ---- */

#define SEAL_PREFIX "v1:"
#define NONCE_LEN   12
#define TAG_LEN     16

static unsigned char master_key[32];
static int master_loaded;

int crypto_master_key_load(const char *path)
{
	unsigned char key[32];
	int fd = open(path, O_RDONLY | O_CLOEXEC | O_NOFOLLOW);
	ssize_t n;

	if (fd < 0 && errno == ENOENT) {
		/* first start: a new random key, readable by this user only */
		if (crypto_random(key, sizeof(key)) < 0)
			return -1;
		fd = open(path, O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC | O_NOFOLLOW, 0600);
		if (fd < 0)
			return -1;
		n = write(fd, key, sizeof(key));
		if (close(fd) != 0 || n != (ssize_t)sizeof(key))
			return -1;
		fd = open(path, O_RDONLY | O_CLOEXEC | O_NOFOLLOW);
	}
	if (fd < 0)
		return -1;
	n = read(fd, key, sizeof(key));
	close(fd);
	if (n != (ssize_t)sizeof(key))
		return -1;
	memcpy(master_key, key, sizeof(key));
	OPENSSL_cleanse(key, sizeof(key));
	master_loaded = 1;
	return 0;
}

char *crypto_seal(const void *plain, size_t len, const char *aad)
{
	unsigned char *buf = NULL;
	char *out = NULL;
	EVP_CIPHER_CTX *ctx = NULL;
	int n, ok = 0;
	size_t total = NONCE_LEN + len + TAG_LEN, outlen;

	if (!master_loaded || len > INT_MAX / 2)
		return NULL;
	buf = malloc(total);
	outlen = strlen(SEAL_PREFIX) + b64_len(total) + 1;
	out = malloc(outlen);
	ctx = EVP_CIPHER_CTX_new();
	if (!buf || !out || !ctx || crypto_random(buf, NONCE_LEN) < 0)
		goto done;
	if (EVP_EncryptInit_ex(ctx, EVP_aes_256_gcm(), NULL, master_key, buf) != 1 ||
	    (aad &&
	     EVP_EncryptUpdate(ctx, NULL, &n, (const unsigned char *)aad, (int)strlen(aad)) != 1) ||
	    EVP_EncryptUpdate(ctx, buf + NONCE_LEN, &n, plain, (int)len) != 1 ||
	    EVP_EncryptFinal_ex(ctx, buf + NONCE_LEN + n, &n) != 1 ||
	    EVP_CIPHER_CTX_ctrl(ctx, EVP_CTRL_GCM_GET_TAG, TAG_LEN, buf + NONCE_LEN + len) != 1)
		goto done;
	memcpy(out, SEAL_PREFIX, strlen(SEAL_PREFIX));
	ok = b64_encode(b64_std, buf, total, out + strlen(SEAL_PREFIX),
	                outlen - strlen(SEAL_PREFIX)) > 0;
done:
	EVP_CIPHER_CTX_free(ctx);
	free(buf);
	if (!ok) {
		free(out);
		return NULL;
	}
	return out;
}

char *crypto_open(const char *sealed, const char *aad, size_t *len)
{
	size_t plen = strlen(SEAL_PREFIX), slen;
	unsigned char *buf = NULL;
	char *plain = NULL;
	EVP_CIPHER_CTX *ctx = NULL;
	long n;
	int k, ok = 0;

	if (!master_loaded || strncmp(sealed, SEAL_PREFIX, plen) != 0)
		return NULL;
	slen = strlen(sealed + plen);
	buf = malloc(slen);
	if (!buf)
		return NULL;
	n = b64_decode(sealed + plen, slen, buf, slen);
	if (n < NONCE_LEN + TAG_LEN)
		goto done;
	plain = malloc((size_t)n - NONCE_LEN - TAG_LEN + 1);
	ctx = EVP_CIPHER_CTX_new();
	if (!plain || !ctx)
		goto done;
	if (EVP_DecryptInit_ex(ctx, EVP_aes_256_gcm(), NULL, master_key, buf) != 1 ||
	    (aad &&
	     EVP_DecryptUpdate(ctx, NULL, &k, (const unsigned char *)aad, (int)strlen(aad)) != 1) ||
	    EVP_DecryptUpdate(ctx, (unsigned char *)plain, &k, buf + NONCE_LEN,
	                      (int)(n - NONCE_LEN - TAG_LEN)) != 1 ||
	    EVP_CIPHER_CTX_ctrl(ctx, EVP_CTRL_GCM_SET_TAG, TAG_LEN, buf + n - TAG_LEN) != 1 ||
	    EVP_DecryptFinal_ex(ctx, (unsigned char *)plain + k, &k) != 1)
		goto done;
	*len = (size_t)n - NONCE_LEN - TAG_LEN;
	plain[*len] = '\0';
	ok = 1;
done:
	EVP_CIPHER_CTX_free(ctx);
	free(buf);
	if (!ok) {
		free(plain);
		return NULL;
	}
	return plain;
}
