/* test_jsonw.c — JSON strings written straight: escapes, UTF-8 kept or
 * replaced, and every output read back by jansson as the string meant. */
#include "base/jsonw.c"

#include "harness.h"

#include <jansson.h>
#include <stdlib.h>

/* s as jsonw_str writes it, read back through jansson: the value, or NULL
 * when jansson rejects the text.  Caller frees. */
static char *round_trip(const char *s, char *text, size_t textlen)
{
	struct evbuffer *b = evbuffer_new();
	json_t *j;
	char *out = NULL;
	size_t n;

	if (!b || jsonw_str(b, s) != 0)
		goto out;
	n = evbuffer_get_length(b);
	if (text && n < textlen) {
		evbuffer_copyout(b, text, n);
		text[n] = '\0';
	}
	j = json_loadb((const char *)evbuffer_pullup(b, -1), n, JSON_DECODE_ANY, NULL);
	if (json_is_string(j))
		out = strdup(json_string_value(j));
	json_decref(j);
out:
	if (b)
		evbuffer_free(b);
	return out;
}

static int writes(const char *s, const char *want_text, const char *want_value)
{
	char text[256] = "";
	char *v = round_trip(s, text, sizeof(text));
	int ok = v && strcmp(text, want_text) == 0 && strcmp(v, want_value) == 0;

	if (!ok)
		fprintf(stderr, "  wrote %s, read back '%s'; want %s, '%s'\n", text,
		        v ? v : "(rejected)", want_text, want_value);
	free(v);
	return ok;
}

TEST(plain_and_escaped)
{
	CHECK(writes("", "\"\"", ""));
	CHECK(writes("alice", "\"alice\"", "alice"));
	CHECK(writes("say \"hi\"", "\"say \\\"hi\\\"\"", "say \"hi\""));
	CHECK(writes("a\\b", "\"a\\\\b\"", "a\\b"));
	CHECK(writes("l1\nl2\r\t", "\"l1\\nl2\\r\\t\"", "l1\nl2\r\t"));
	CHECK(writes("\x01\x1f", "\"\\u0001\\u001f\"", "\x01\x1f"));
	CHECK(writes("del\x7f", "\"del\x7f\"", "del\x7f"));
	CHECK(writes("</script>", "\"</script>\"", "</script>"));
}

TEST(utf8_kept_invalid_replaced)
{
	CHECK(writes("张三", "\"张三\"", "张三"));
	CHECK(writes("é\"😀", "\"é\\\"😀\"", "é\"😀"));
	/* a stray continuation byte, a cut sequence, an overlong '/', a
	 * surrogate, past U+10FFFF, 0xff */
	CHECK(writes("a\x80z", "\"a\\ufffdz\"", "a\xef\xbf\xbdz"));
	CHECK(writes("\xe5\xbc", "\"\\ufffd\\ufffd\"", "\xef\xbf\xbd\xef\xbf\xbd"));
	CHECK(writes("\xc0\xaf", "\"\\ufffd\\ufffd\"", "\xef\xbf\xbd\xef\xbf\xbd"));
	CHECK(writes("\xed\xa0\x80", "\"\\ufffd\\ufffd\\ufffd\"",
	             "\xef\xbf\xbd\xef\xbf\xbd\xef\xbf\xbd"));
	CHECK(writes("\xf4\x90\x80\x80", "\"\\ufffd\\ufffd\\ufffd\\ufffd\"",
	             "\xef\xbf\xbd\xef\xbf\xbd\xef\xbf\xbd\xef\xbf\xbd"));
	CHECK(writes("\xff", "\"\\ufffd\"", "\xef\xbf\xbd"));
}

TEST(null_is_null)
{
	struct evbuffer *b = evbuffer_new();
	char text[8] = "";

	CHECK(jsonw_str(b, NULL) == 0);
	CHECK(evbuffer_get_length(b) == 4);
	evbuffer_copyout(b, text, 4);
	CHECK_STR(text, "null");
	evbuffer_free(b);
}

/* Random bytes (no NUL): jansson must accept every output, and read back
 * exactly the input whenever the input was valid UTF-8. */
TEST(random_bytes_always_valid_json)
{
	unsigned seed = 12345;
	char in[64];

	for (int round = 0; round < 20000; round++) {
		size_t n = (size_t)(round % 63);
		int valid = 1;
		char *v;

		for (size_t i = 0; i < n; i++) {
			seed = seed * 1103515245u + 12345u;
			/* mostly high bytes and the escaped ones, so sequences form */
			unsigned char c = (unsigned char)(seed >> 16);
			if (c == 0)
				c = '"';
			in[i] = (char)c;
		}
		in[n] = '\0';
		for (const unsigned char *p = (const unsigned char *)in; *p;) {
			int k = jsonw_utf8_len(p);
			if (k == 0) {
				valid = 0;
				break;
			}
			p += k;
		}
		v = round_trip(in, NULL, 0);
		CHECK(v != NULL);
		if (v && valid)
			CHECK(strcmp(v, in) == 0);
		free(v);
	}
}

int main(void)
{
	RUN(plain_and_escaped);
	RUN(utf8_kept_invalid_replaced);
	RUN(null_is_null);
	RUN(random_bytes_always_valid_json);
	return harness_done("test_jsonw");
}
