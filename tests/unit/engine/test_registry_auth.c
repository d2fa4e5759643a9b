/* test_registry_auth.c — the registry credentials path in
 * images.c: the X-Registry-Auth header the engine receives decodes
 * (base64url with padding, as Go's base64.URLEncoding reads it) to JSON
 * whose password is exactly the stored one, however many quotes,
 * backslashes, slashes, '+', '=' or non-ASCII characters it holds; the
 * header has no line break (it could not smuggle a second header); the
 * copies are wiped; and a sealed secret bound to another registry name is
 * refused rather than sent. */
#include "engine/images.c"

#include <stdlib.h>
#include <sys/stat.h>
#include <unistd.h>

#include <openssl/evp.h>

#include "harness.h"

static char dir[] = "/tmp/test_registry_auth-XXXXXX";

/* base64url (padded) -> bytes, NUL-terminated; NULL when not valid. */
static char *unb64url(const char *s)
{
	size_t n = strlen(s);
	char *std = malloc(n + 1), *out = malloc(n + 1);
	int len;
	size_t pad = 0;

	for (size_t i = 0; i < n; i++) {
		if (s[i] == '+' || s[i] == '/') { /* not the URL alphabet */
			free(std);
			free(out);
			return NULL;
		}
		std[i] = s[i] == '-' ? '+' : s[i] == '_' ? '/' : s[i];
	}
	std[n] = '\0';
	if (n % 4) {
		free(std);
		free(out);
		return NULL;
	}
	while (pad < n && std[n - 1 - pad] == '=')
		pad++;
	len = EVP_DecodeBlock((unsigned char *)out, (unsigned char *)std, (int)n);
	free(std);
	if (len < 0) {
		free(out);
		return NULL;
	}
	out[len - (int)pad] = '\0';
	return out;
}

static json_t *header_json(const char *password, const char *registry, const char *seal_as,
                           const char *server)
{
	char aad[400], *sealed, *doc;
	struct pull p;
	json_t *j;

	memset(&p, 0, sizeof(p));
	p.kind = PULL;
	images_secret_aad(seal_as, "127.0.0.1:5055", aad, sizeof(aad));
	sealed = crypto_seal(password, strlen(password), aad);
	CHECK(sealed != NULL);
	if (build_auth(&p, registry, server, "$oauthtoken", sealed) < 0) {
		free(sealed);
		return NULL;
	}
	free(sealed);
	CHECK(p.auth && !strncmp(p.auth, "X-Registry-Auth: ", 17));
	CHECK(!strpbrk(p.auth, "\r\n"));
	doc = unb64url(p.auth + 17);
	CHECK(doc != NULL);
	j = doc ? json_loads(doc, 0, NULL) : NULL;
	free(doc);
	wipe_free(p.auth);
	return j;
}

TEST(password_with_json_and_base64_specials_survives)
{
	static const char *const pws[] = {
		"plain-key",
		"q\"uo\"te",
		"back\\slash\\\\",
		"\"},\"username\":\"admin",
		"slash/plus+eq=",
		"\xc3\xa9t\xc3\xa9 \xe4\xbd\xa0\xe5\xa5\xbd",
		"nl\r\nX-Evil: 1",
		"?\?>>?\?", /* bytes whose base64 has '+' and '/' in the standard alphabet */
	};

	for (size_t i = 0; i < sizeof(pws) / sizeof(pws[0]); i++) {
		json_t *j = header_json(pws[i], "r1", "r1", "127.0.0.1:5055");
		CHECK(j != NULL);
		if (!j)
			continue;
		CHECK_STR(json_string_value(json_object_get(j, "password")), pws[i]);
		CHECK_STR(json_string_value(json_object_get(j, "username")), "$oauthtoken");
		CHECK_STR(json_string_value(json_object_get(j, "serveraddress")), "127.0.0.1:5055");
		CHECK(json_object_size(j) == 3);
		json_decref(j);
	}
}

TEST(secret_sealed_for_another_registry_is_not_sent)
{
	json_t *j = header_json("k", "r2", "r1", "127.0.0.1:5055");

	CHECK(j == NULL);
	json_decref(j);
}

/* The same registry pointed at another host: the key is not sent there. */
TEST(secret_sealed_for_another_server_is_not_sent)
{
	json_t *j = header_json("k", "r1", "r1", "attacker.example:443");

	CHECK(j == NULL);
	json_decref(j);
}

int main(void)
{
	char key[128];

	CHECK(mkdtemp(dir) != NULL);
	snprintf(key, sizeof(key), "%s/master.key", dir);
	CHECK(crypto_master_key_load(key) == 0);
	RUN(password_with_json_and_base64_specials_survives);
	RUN(secret_sealed_for_another_registry_is_not_sent);
	RUN(secret_sealed_for_another_server_is_not_sent);
	unlink(key);
	rmdir(dir);
	return harness_done("test_registry_auth");
}
