/* test_crypto.c — PHC password strings, tokens, digests, base64url. */
#include "base/crypto.c"

#include "harness.h"

/* RFC 7914 §12: scrypt("pleaseletmein", "SodiumChloride", N=16384, r=8,
 * p=1); the PHC hash is the first 32 bytes of the 64-byte vector. */
#define RFC_PASSWORD "pleaseletmein"
#define RFC_PHC "$scrypt$ln=14,r=8,p=1$U29kaXVtQ2hsb3JpZGU$" \
		"cCO9yzr9c0hGHAbNgf046/2o+7qQT44+qbVD9lRdofI"

static int in_alphabet(const char *s, size_t n, const char *abc)
{
	size_t i;

	for (i = 0; i < n; i++)
		if (!s[i] || !strchr(abc, s[i]))
			return 0;
	return 1;
}

/* Checks the exact shape "$scrypt$ln=<ln>,r=8,p=1$<22 b64>$<43 b64>". */
static int phc_shape_ok(const char *phc, int ln)
{
	char prefix[32];
	size_t pl;

	snprintf(prefix, sizeof(prefix), "$scrypt$ln=%d,r=8,p=1$", ln);
	pl = strlen(prefix);
	return strncmp(phc, prefix, pl) == 0 &&
	       strlen(phc) == pl + 22 + 1 + 43 &&
	       in_alphabet(phc + pl, 22, b64_std) && phc[pl + 22] == '$' &&
	       in_alphabet(phc + pl + 23, 43, b64_std);
}

TEST(known_vector_verifies)
{
	CHECK(crypto_password_verify(RFC_PASSWORD, RFC_PHC) == 1);
	CHECK(crypto_password_verify("pleaseletmeim", RFC_PHC) == 0);
	CHECK(crypto_password_verify("", RFC_PHC) == 0);
}

TEST(other_parameters_verify)
{
	/* r=1, p=2, a 16-byte salt: made by an independent scrypt. */
	const char *phc = "$scrypt$ln=10,r=1,p=2$AAECAwQFBgcICQoLDA0ODw$"
			  "u+QlvmMmKkxy7FcVbt6de1eJ+r7EJy5TJraQBKO5sSU";

	CHECK(crypto_password_verify("correct horse", phc) == 1);
	CHECK(crypto_password_verify("correct horsf", phc) == 0);
}

TEST(hash_round_trip_ln14)
{
	char a[CRYPTO_PHC_MAX], b[CRYPTO_PHC_MAX];

	CHECK(crypto_password_hash("hunter2", 14, a, sizeof(a)) == 0);
	CHECK(phc_shape_ok(a, 14));
	CHECK(crypto_password_verify("hunter2", a) == 1);
	CHECK(crypto_password_verify("hunter3", a) == 0);
	CHECK(crypto_password_verify("hunter", a) == 0);
	CHECK(crypto_password_verify("hunter22", a) == 0);

	/* A fresh salt each time: same password, different strings. */
	CHECK(crypto_password_hash("hunter2", 14, b, sizeof(b)) == 0);
	CHECK(strcmp(a, b) != 0);
	CHECK(crypto_password_verify("hunter2", b) == 1);
}

TEST(hash_round_trip_ln17)
{
	char a[CRYPTO_PHC_MAX];

	CHECK(crypto_password_hash("Tr0ub4dor&3 ünïcode", 17, a,
				   sizeof(a)) == 0);
	CHECK(phc_shape_ok(a, 17));
	CHECK(crypto_password_verify("Tr0ub4dor&3 ünïcode", a) == 1);
}

TEST(empty_password_hashes)
{
	char a[CRYPTO_PHC_MAX];

	CHECK(crypto_password_hash("", 10, a, sizeof(a)) == 0);
	CHECK(phc_shape_ok(a, 10));
	CHECK(crypto_password_verify("", a) == 1);
	CHECK(crypto_password_verify(" ", a) == 0);
}

TEST(hash_rejects_bad_arguments)
{
	char a[CRYPTO_PHC_MAX];

	CHECK(crypto_password_hash("x", 9, a, sizeof(a)) == -1);
	CHECK(crypto_password_hash("x", 21, a, sizeof(a)) == -1);
	CHECK(crypto_password_hash(NULL, 14, a, sizeof(a)) == -1);
	CHECK(crypto_password_hash("x", 10, NULL, sizeof(a)) == -1);
	/* Too small for the string: fails and leaves no partial hash. */
	CHECK(crypto_password_hash("x", 10, a, 40) == -1);
	CHECK(a[0] == '\0');
}

TEST(malformed_phc_rejected)
{
	static const char *bad[] = {
		"",
		"$",
		"$scrypt$",
		"scrypt$ln=14,r=8,p=1$U29kaXVtQ2hsb3JpZGU$cCO9yzr9c0hGHAbNgf046/2o+7qQT44+qbVD9lRdofI",
		"$scrypt2$ln=14,r=8,p=1$U29kaXVtQ2hsb3JpZGU$cCO9yzr9c0hGHAbNgf046/2o+7qQT44+qbVD9lRdofI",
		"$argon2id$v=19$m=65536,t=3,p=4$U29kaXVtQ2hsb3JpZGU$cCO9yzr9c0hGHAbNgf046/2o+7qQT44+qbVD9lRdofI",
		"$SCRYPT$ln=14,r=8,p=1$U29kaXVtQ2hsb3JpZGU$cCO9yzr9c0hGHAbNgf046/2o+7qQT44+qbVD9lRdofI",
		/* parameters out of bounds */
		"$scrypt$ln=9,r=8,p=1$U29kaXVtQ2hsb3JpZGU$cCO9yzr9c0hGHAbNgf046/2o+7qQT44+qbVD9lRdofI",
		"$scrypt$ln=21,r=8,p=1$U29kaXVtQ2hsb3JpZGU$cCO9yzr9c0hGHAbNgf046/2o+7qQT44+qbVD9lRdofI",
		"$scrypt$ln=0,r=8,p=1$U29kaXVtQ2hsb3JpZGU$cCO9yzr9c0hGHAbNgf046/2o+7qQT44+qbVD9lRdofI",
		"$scrypt$ln=14,r=0,p=1$U29kaXVtQ2hsb3JpZGU$cCO9yzr9c0hGHAbNgf046/2o+7qQT44+qbVD9lRdofI",
		"$scrypt$ln=14,r=17,p=1$U29kaXVtQ2hsb3JpZGU$cCO9yzr9c0hGHAbNgf046/2o+7qQT44+qbVD9lRdofI",
		"$scrypt$ln=14,r=8,p=0$U29kaXVtQ2hsb3JpZGU$cCO9yzr9c0hGHAbNgf046/2o+7qQT44+qbVD9lRdofI",
		"$scrypt$ln=14,r=8,p=5$U29kaXVtQ2hsb3JpZGU$cCO9yzr9c0hGHAbNgf046/2o+7qQT44+qbVD9lRdofI",
		/* number syntax */
		"$scrypt$ln=014,r=8,p=1$U29kaXVtQ2hsb3JpZGU$cCO9yzr9c0hGHAbNgf046/2o+7qQT44+qbVD9lRdofI",
		"$scrypt$ln=+14,r=8,p=1$U29kaXVtQ2hsb3JpZGU$cCO9yzr9c0hGHAbNgf046/2o+7qQT44+qbVD9lRdofI",
		"$scrypt$ln=-14,r=8,p=1$U29kaXVtQ2hsb3JpZGU$cCO9yzr9c0hGHAbNgf046/2o+7qQT44+qbVD9lRdofI",
		"$scrypt$ln=,r=8,p=1$U29kaXVtQ2hsb3JpZGU$cCO9yzr9c0hGHAbNgf046/2o+7qQT44+qbVD9lRdofI",
		"$scrypt$ln=4294967310,r=8,p=1$U29kaXVtQ2hsb3JpZGU$cCO9yzr9c0hGHAbNgf046/2o+7qQT44+qbVD9lRdofI",
		"$scrypt$ln=14 ,r=8,p=1$U29kaXVtQ2hsb3JpZGU$cCO9yzr9c0hGHAbNgf046/2o+7qQT44+qbVD9lRdofI",
		/* parameter set shape */
		"$scrypt$r=8,ln=14,p=1$U29kaXVtQ2hsb3JpZGU$cCO9yzr9c0hGHAbNgf046/2o+7qQT44+qbVD9lRdofI",
		"$scrypt$ln=14,r=8$U29kaXVtQ2hsb3JpZGU$cCO9yzr9c0hGHAbNgf046/2o+7qQT44+qbVD9lRdofI",
		"$scrypt$ln=14,r=8,p=1,x=1$U29kaXVtQ2hsb3JpZGU$cCO9yzr9c0hGHAbNgf046/2o+7qQT44+qbVD9lRdofI",
		"$scrypt$ln=14;r=8;p=1$U29kaXVtQ2hsb3JpZGU$cCO9yzr9c0hGHAbNgf046/2o+7qQT44+qbVD9lRdofI",
		"$scrypt$LN=14,r=8,p=1$U29kaXVtQ2hsb3JpZGU$cCO9yzr9c0hGHAbNgf046/2o+7qQT44+qbVD9lRdofI",
		/* salt */
		"$scrypt$ln=14,r=8,p=1$$cCO9yzr9c0hGHAbNgf046/2o+7qQT44+qbVD9lRdofI",
		"$scrypt$ln=14,r=8,p=1$U29kaXVtQ2hsb3JpZGU=$cCO9yzr9c0hGHAbNgf046/2o+7qQT44+qbVD9lRdofI",
		"$scrypt$ln=14,r=8,p=1$U29kaXVt-2hsb3JpZGU$cCO9yzr9c0hGHAbNgf046/2o+7qQT44+qbVD9lRdofI",
		"$scrypt$ln=14,r=8,p=1$U29kaXVtQ2hsb3JpZGV$cCO9yzr9c0hGHAbNgf046/2o+7qQT44+qbVD9lRdofI",
		"$scrypt$ln=14,r=8,p=1$U29kaXV$cCO9yzr9c0hGHAbNgf046/2o+7qQT44+qbVD9lRdofI",
		"$scrypt$ln=14,r=8,p=1$c2hvcnQ$cCO9yzr9c0hGHAbNgf046/2o+7qQT44+qbVD9lRdofI",
		/* hash */
		"$scrypt$ln=14,r=8,p=1$U29kaXVtQ2hsb3JpZGU",
		"$scrypt$ln=14,r=8,p=1$U29kaXVtQ2hsb3JpZGU$",
		"$scrypt$ln=14,r=8,p=1$U29kaXVtQ2hsb3JpZGU$cCO9yzr9c0hGHAbNgf046/2o+7qQT44+qbVD9lRdofI=",
		"$scrypt$ln=14,r=8,p=1$U29kaXVtQ2hsb3JpZGU$cCO9yzr9c0hGHAbNgf046/2o+7qQT44+qbVD9lRdofJ",
		"$scrypt$ln=14,r=8,p=1$U29kaXVtQ2hsb3JpZGU$cCO9yzr9c0hGHAbNgf046_2o-7qQT44-qbVD9lRdofI",
		"$scrypt$ln=14,r=8,p=1$U29kaXVtQ2hsb3JpZGU$cCO9yzr9c0hGHAbNgf046/2o+7qQT44+qbVD9lRdof",
		"$scrypt$ln=14,r=8,p=1$U29kaXVtQ2hsb3JpZGU$cCO9yzr9c0hGHAbNgf046/2o+7qQT44+qbVD9lRdofIA",
		"$scrypt$ln=14,r=8,p=1$U29kaXVtQ2hsb3JpZGU$cCO9yzr9c0hGHAbNgf046/2o+7qQT44+qbVD9lRdofIAAA",
		"$scrypt$ln=14,r=8,p=1$U29kaXVtQ2hsb3JpZGU$cCO9yzr9c0hGHAbNgf046/2o+7qQT44+qbVD9lRdofI$",
		"$scrypt$ln=14,r=8,p=1$U29kaXVtQ2hsb3JpZGU$cCO9yzr9c0hGHAbNgf046/2o+7qQT44+qbVD9lRdofI ",
		"$scrypt$ln=14,r=8,p=1$U29kaXVtQ2hsb3JpZGU$cCO9yzr9c0hGHAbNgf046/2o+7qQT44+qbVD9lRdofI\n",
		"$scrypt$ln=14,r=8,p=1$U29kaXVtQ2hsb3JpZGU$$cCO9yzr9c0hGHAbNgf046/2o+7qQT44+qbVD9lRdofI",
		"$scrypt$$ln=14,r=8,p=1$U29kaXVtQ2hsb3JpZGU$cCO9yzr9c0hGHAbNgf046/2o+7qQT44+qbVD9lRdofI",
	};
	size_t i;

	for (i = 0; i < sizeof(bad) / sizeof(bad[0]); i++) {
		int rc = crypto_password_verify(RFC_PASSWORD, bad[i]);

		if (rc != -1)
			fprintf(stderr, "  accepted (%d): '%s'\n", rc, bad[i]);
		CHECK(rc == -1);
	}
	CHECK(crypto_password_verify(RFC_PASSWORD, NULL) == -1);
	CHECK(crypto_password_verify(NULL, RFC_PHC) == -1);
}

TEST(b64_decode_strict)
{
	unsigned char out[8];

	CHECK(b64_decode("Zm9v", 4, out, sizeof(out)) == 3);
	CHECK(memcmp(out, "foo", 3) == 0);
	CHECK(b64_decode("Zm8", 3, out, sizeof(out)) == 2);
	CHECK(b64_decode("Zg", 2, out, sizeof(out)) == 1 && out[0] == 'f');
	CHECK(b64_decode("", 0, out, sizeof(out)) == 0);
	CHECK(b64_decode("Z", 1, out, sizeof(out)) == -1);
	CHECK(b64_decode("Zh", 2, out, sizeof(out)) == -1);  /* stray bits */
	CHECK(b64_decode("Zm9", 3, out, sizeof(out)) == -1); /* stray bits */
	CHECK(b64_decode("Zg==", 4, out, sizeof(out)) == -1);
	CHECK(b64_decode("Zm9vYmFy", 8, out, 5) == -1);      /* too long */
	CHECK(b64_decode("+/+/", 4, out, sizeof(out)) == 3);
	CHECK(out[0] == 0xfb && out[1] == 0xff && out[2] == 0xbf);
}

TEST(sha256_known_vectors)
{
	char hex[65];

	crypto_sha256_hex("abc", 3, hex);
	CHECK_STR(hex, "ba7816bf8f01cfea414140de5dae2223"
		       "b00361a396177a9cb410ff61f20015ad");
	crypto_sha256_hex("", 0, hex);
	CHECK_STR(hex, "e3b0c44298fc1c149afbf4c8996fb924"
		       "27ae41e4649b934ca495991b7852b855");
	crypto_sha256_hex("abcdbcdecdefdefgefghfghighijhijkijkljklmklmnlmnomnopnopq",
			  56, hex);
	CHECK_STR(hex, "248d6a61d20638b8e5c026930c3e6039"
		       "a33ce45964ff2167f6ecedd419db06c1");
}

TEST(b64url_vectors)
{
	static const unsigned char bin[] = { 0xfb, 0xff, 0xbf, 0x00, 0x3e };
	char out[16];

	CHECK(crypto_b64url("", 0, out, sizeof(out)) == 0);
	CHECK_STR(out, "");
	CHECK(crypto_b64url("f", 1, out, sizeof(out)) == 2);
	CHECK_STR(out, "Zg");
	CHECK(crypto_b64url("fo", 2, out, sizeof(out)) == 3);
	CHECK_STR(out, "Zm8");
	CHECK(crypto_b64url("foo", 3, out, sizeof(out)) == 4);
	CHECK_STR(out, "Zm9v");
	CHECK(crypto_b64url("foobar", 6, out, sizeof(out)) == 8);
	CHECK_STR(out, "Zm9vYmFy");
	/* The url alphabet: '-' and '_' where standard base64 has '+' '/'. */
	CHECK(crypto_b64url(bin, sizeof(bin), out, sizeof(out)) == 7);
	CHECK_STR(out, "-_-_AD4");
	/* Needs room for the NUL. */
	CHECK(crypto_b64url("foo", 3, out, 4) == 0);
	CHECK(crypto_b64url("foo", 3, out, 5) == 4);
	CHECK(crypto_b64url("f", 1, out, 0) == 0);
}

TEST(tokens)
{
	static const char url[] =
		"ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789-_";
	char a[200], b[200];

	CHECK(crypto_token(a, sizeof(a), 32) == 0);
	CHECK(strlen(a) == 43);
	CHECK(in_alphabet(a, 43, url));
	CHECK(crypto_token(b, sizeof(b), 32) == 0);
	CHECK(strcmp(a, b) != 0);

	CHECK(crypto_token(a, sizeof(a), 16) == 0 && strlen(a) == 22);
	CHECK(crypto_token(a, sizeof(a), 1) == 0 && strlen(a) == 2);
	/* Longer than one internal chunk. */
	CHECK(crypto_token(a, sizeof(a), 100) == 0 && strlen(a) == 134);
	CHECK(in_alphabet(a, 134, url));
	CHECK(crypto_token(a, sizeof(a), 0) == 0 && a[0] == '\0');

	/* The header's bound: 4 * ((32 + 2) / 3) + 1 = 45. */
	CHECK(crypto_token(a, 45, 32) == 0);
	CHECK(crypto_token(a, 44, 32) == -1);
	CHECK(crypto_token(a, 0, 32) == -1);
}

TEST(random_bytes)
{
	unsigned char a[32], b[32], zero[32] = { 0 };

	CHECK(crypto_random(a, sizeof(a)) == 0);
	CHECK(crypto_random(b, sizeof(b)) == 0);
	CHECK(memcmp(a, b, sizeof(a)) != 0);
	CHECK(memcmp(a, zero, sizeof(a)) != 0);
	CHECK(crypto_random(a, 0) == 0);
}

TEST(equal)
{
	CHECK(crypto_equal("abcd", "abcd", 4) == 1);
	CHECK(crypto_equal("abcd", "abce", 4) == 0);
	CHECK(crypto_equal("xbcd", "abcd", 4) == 0);
	CHECK(crypto_equal("a", "b", 0) == 1);
}

int main(void)
{
	RUN(known_vector_verifies);
	RUN(other_parameters_verify);
	RUN(hash_round_trip_ln14);
	RUN(hash_round_trip_ln17);
	RUN(empty_password_hashes);
	RUN(hash_rejects_bad_arguments);
	RUN(malformed_phc_rejected);
	RUN(b64_decode_strict);
	RUN(sha256_known_vectors);
	RUN(b64url_vectors);
	RUN(tokens);
	RUN(random_bytes);
	RUN(equal);
	return harness_done("test_crypto");
}
