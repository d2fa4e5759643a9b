/* test_ws.c — websocket framing: RFC 6455 examples, limits, masking, the
 * accept key, UTF-8. */
#include "net/ws.c"

#include "harness.h"

TEST(rfc_examples)
{
	/* RFC 6455 5.7: a single-frame masked text message "Hello" */
	const uint8_t m[] = { 0x81, 0x85, 0x37, 0xfa, 0x21, 0x3d, 0x7f, 0x9f, 0x4d, 0x51, 0x58 };
	uint8_t p[5];
	struct ws_frame f;
	int n = ws_parse_header(m, sizeof(m), 1, 1000, &f);

	CHECK(n == 6);
	CHECK(f.fin && f.opcode == WS_TEXT && f.masked && f.len == 5);
	memcpy(p, m + n, 5);
	ws_unmask(p, 5, f.mask, 0);
	CHECK(memcmp(p, "Hello", 5) == 0);
	/* masking by pieces gives the same as at once */
	memcpy(p, m + n, 5);
	ws_unmask(p, 2, f.mask, 0);
	ws_unmask(p + 2, 3, f.mask, 2);
	CHECK(memcmp(p, "Hello", 5) == 0);
	/* an unmasked frame from a client is an error; from a server fine */
	{
		const uint8_t u[] = { 0x81, 0x05, 'H', 'e', 'l', 'l', 'o' };
		CHECK(ws_parse_header(u, sizeof(u), 1, 1000, &f) == -1);
		CHECK(ws_parse_header(u, sizeof(u), 0, 1000, &f) == 2);
	}
}

TEST(lengths_and_need_more)
{
	uint8_t h[14];
	struct ws_frame f;
	size_t hl;

	hl = ws_header(h, WS_BINARY, 1, 125);
	CHECK(hl == 2 && ws_parse_header(h, hl, 0, 1 << 20, &f) == 2 && f.len == 125);
	hl = ws_header(h, WS_BINARY, 1, 126);
	CHECK(hl == 4 && ws_parse_header(h, hl, 0, 1 << 20, &f) == 4 && f.len == 126);
	hl = ws_header(h, WS_BINARY, 1, 70000);
	CHECK(hl == 10 && ws_parse_header(h, hl, 0, 1 << 20, &f) == 10 && f.len == 70000);
	CHECK(ws_parse_header(h, hl, 0, 65536, &f) == -1); /* over max */
	for (size_t i = 0; i < hl; i++)
		CHECK(ws_parse_header(h, i, 0, 1 << 20, &f) == -2);
	/* non-minimal lengths */
	{
		const uint8_t a[] = { 0x82, 126, 0, 10 };
		const uint8_t b[] = { 0x82, 127, 0, 0, 0, 0, 0, 0, 0x10, 0 };
		const uint8_t c[] = { 0x82, 127, 0x80, 0, 0, 0, 0, 1, 0, 0 };
		CHECK(ws_parse_header(a, sizeof(a), 0, 1 << 20, &f) == -1);
		CHECK(ws_parse_header(b, sizeof(b), 0, 1 << 20, &f) == -1);
		CHECK(ws_parse_header(c, sizeof(c), 0, UINT64_MAX, &f) == -1);
	}
}

TEST(control_and_reserved)
{
	struct ws_frame f;
	const uint8_t frag_ping[] = { 0x09, 0x80, 0, 0, 0, 0 };
	const uint8_t long_ping[] = { 0x89, 0xfe, 0, 126, 0, 0, 0, 0 };
	const uint8_t rsv[] = { 0xc1, 0x80, 0, 0, 0, 0 };
	const uint8_t op3[] = { 0x83, 0x80, 0, 0, 0, 0 };
	const uint8_t close[] = { 0x88, 0x80, 1, 2, 3, 4 };

	CHECK(ws_parse_header(frag_ping, sizeof(frag_ping), 1, 1000, &f) == -1);
	CHECK(ws_parse_header(long_ping, sizeof(long_ping), 1, 1000, &f) == -1);
	CHECK(ws_parse_header(rsv, sizeof(rsv), 1, 1000, &f) == -1);
	CHECK(ws_parse_header(op3, sizeof(op3), 1, 1000, &f) == -1);
	CHECK(ws_parse_header(close, sizeof(close), 1, 1000, &f) == 6 && f.opcode == WS_CLOSE);
}

TEST(accept_key)
{
	char out[29];

	/* RFC 6455 1.3 */
	CHECK(ws_accept("dGhlIHNhbXBsZSBub25jZQ==", out) == 0);
	CHECK_STR(out, "s3pPLMBiTxaQ9kYGzzhZRbK+xOo=");
	CHECK(ws_accept("short==", out) == -1);
	CHECK(ws_accept("dGhlIHNhbXBsZSBub25jZQ!!", out) == -1);
}

TEST(utf8)
{
	CHECK(ws_utf8_ok((const uint8_t *)"h\xc3\xa9llo \xe4\xb8\xad", 10));
	CHECK(!ws_utf8_ok((const uint8_t *)"\xc3", 1));
	CHECK(!ws_utf8_ok((const uint8_t *)"\xed\xa0\x80", 3)); /* surrogate */
	CHECK(!ws_utf8_ok((const uint8_t *)"\xc0\xaf", 2));     /* overlong */
	CHECK(ws_utf8_ok((const uint8_t *)"", 0));
}

int main(void)
{
	RUN(rfc_examples);
	RUN(lengths_and_need_more);
	RUN(control_and_reserved);
	RUN(accept_key);
	RUN(utf8);
	return harness_done("test_ws");
}
