/* jsonw.c — JSON strings written straight into an evbuffer.
 *
 * Owns escaping a C string into a JSON string literal.  Does not own the
 * shape of any answer: its callers write their own members.
 */
#include "base/jsonw.h"

#include <event2/buffer.h>
#include <stdio.h>
#include <string.h>

int jsonw_utf8_len(const unsigned char *p)
{
	int n;

	if (p[0] < 0x80)
		return 1;
	if (p[0] >= 0xc2 && p[0] <= 0xdf)
		n = 2;
	else if (p[0] >= 0xe0 && p[0] <= 0xef)
		n = 3;
	else if (p[0] >= 0xf0 && p[0] <= 0xf4)
		n = 4;
	else
		return 0;
	/* a NUL is not a continuation byte, so this never reads past it */
	for (int k = 1; k < n; k++)
		if ((p[k] & 0xc0) != 0x80)
			return 0;
	if (n == 3 && ((p[0] == 0xe0 && p[1] < 0xa0) || (p[0] == 0xed && p[1] >= 0xa0)))
		return 0; /* overlong, surrogate */
	if (n == 4 && ((p[0] == 0xf0 && p[1] < 0x90) || (p[0] == 0xf4 && p[1] >= 0x90)))
		return 0; /* overlong, past U+10FFFF */
	return n;
}

int jsonw_str(struct evbuffer *b, const char *s)
{
	const unsigned char *p = (const unsigned char *)s, *run;
	char esc[8];
	int rc = 0;

	if (!s)
		return evbuffer_add(b, "null", 4);
	rc |= evbuffer_add(b, "\"", 1);
	while (*p) {
		/* the bytes that go out as they are, in one piece */
		run = p;
		while (*p >= 0x20 && *p != '"' && *p != '\\' && *p < 0x80)
			p++;
		while (*p >= 0x80) {
			int n = jsonw_utf8_len(p);
			if (n == 0)
				break;
			p += n;
			while (*p >= 0x20 && *p != '"' && *p != '\\' && *p < 0x80)
				p++;
		}
		if (p > run)
			rc |= evbuffer_add(b, run, (size_t)(p - run));
		if (!*p)
			break;
		switch (*p) {
		case '"': rc |= evbuffer_add(b, "\\\"", 2); break;
		case '\\': rc |= evbuffer_add(b, "\\\\", 2); break;
		case '\n': rc |= evbuffer_add(b, "\\n", 2); break;
		case '\r': rc |= evbuffer_add(b, "\\r", 2); break;
		case '\t': rc |= evbuffer_add(b, "\\t", 2); break;
		default:
			if (*p < 0x20) {
				snprintf(esc, sizeof(esc), "\\u%04x", *p);
				rc |= evbuffer_add(b, esc, 6);
			} else {
				rc |= evbuffer_add(b, "\\ufffd", 6); /* not UTF-8 */
			}
		}
		p++;
	}
	rc |= evbuffer_add(b, "\"", 1);
	return rc ? -1 : 0;
}
