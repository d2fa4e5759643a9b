/* test_seal.c — secrets at rest: the master key file and AES-256-GCM
 * sealing (round trip, tampering, wrong context, wrong key). */
#include "base/crypto.c"
#include "harness.h"

#include <sys/stat.h>

static char dir[] = "/tmp/gpucloud-seal-XXXXXX";
static char keyfile[128];

TEST(master_key_created_0600_and_reused)
{
	struct stat st;
	unsigned char first[32];

	snprintf(keyfile, sizeof(keyfile), "%s/master.key", dir);
	CHECK(crypto_master_key_load(keyfile) == 0);
	CHECK(stat(keyfile, &st) == 0);
	CHECK((st.st_mode & 0777) == 0600);
	CHECK(st.st_size == 32);
	memcpy(first, master_key, 32);
	CHECK(crypto_master_key_load(keyfile) == 0);
	CHECK(memcmp(first, master_key, 32) == 0);
}

TEST(seal_round_trip)
{
	const char *secret = "-----BEGIN PRIVATE KEY-----\nabc\n-----END PRIVATE KEY-----\n";
	char *s = crypto_seal(secret, strlen(secret), "node-tls-key:a");
	char *o;
	size_t len = 0;

	CHECK(s != NULL);
	CHECK(strncmp(s, "v1:", 3) == 0);
	CHECK(strstr(s, "PRIVATE") == NULL);
	o = crypto_open(s, "node-tls-key:a", &len);
	CHECK(o != NULL && len == strlen(secret) && strcmp(o, secret) == 0);
	free(o);
	/* a fresh nonce every time */
	o = crypto_seal(secret, strlen(secret), "node-tls-key:a");
	CHECK(o && strcmp(o, s) != 0);
	free(o);
	free(s);
}

TEST(seal_rejects_tampering_and_other_contexts)
{
	char *s = crypto_seal("hunter2", 7, "ctx");
	size_t len, n = strlen(s);
	char *o;

	CHECK(crypto_open(s, "other", &len) == NULL);
	CHECK(crypto_open(s, NULL, &len) == NULL);
	for (size_t i = 3; i < n; i += 5) {
		char saved = s[i];
		s[i] = s[i] == 'A' ? 'B' : 'A';
		o = crypto_open(s, "ctx", &len);
		CHECK(o == NULL);
		free(o);
		s[i] = saved;
	}
	CHECK(crypto_open("v1:", "ctx", &len) == NULL);
	CHECK(crypto_open("v2:AAAA", "ctx", &len) == NULL);
	CHECK(crypto_open("plain text", "ctx", &len) == NULL);
	o = crypto_open(s, "ctx", &len);
	CHECK(o && strcmp(o, "hunter2") == 0);
	free(o);
	free(s);
}

TEST(seal_empty_and_wrong_key)
{
	char *s = crypto_seal("", 0, NULL), *o;
	size_t len = 1;

	CHECK(s != NULL);
	o = crypto_open(s, NULL, &len);
	CHECK(o && len == 0);
	free(o);
	master_key[0] ^= 1; /* another master key */
	CHECK(crypto_open(s, NULL, &len) == NULL);
	master_key[0] ^= 1;
	free(s);
}

int main(void)
{
	if (!mkdtemp(dir))
		return 1;
	RUN(master_key_created_0600_and_reused);
	RUN(seal_round_trip);
	RUN(seal_rejects_tampering_and_other_contexts);
	RUN(seal_empty_and_wrong_key);
	unlink(keyfile);
	rmdir(dir);
	return harness_done("test_seal");
}
