/* fuzz_mailer.c — libFuzzer target for notification mails (work/mailer.c):
 * the input is split at NUL bytes into a kind selector, a class name, a
 * notice body, a subject and an address, all as hostile as users make them.
 *
 * Checks what the mailer promises: a text it writes has a subject without
 * control characters and a body without CR; a message it builds has headers
 * of CRLF lines only, no bare CR or LF, no line over 998 bytes, exactly one
 * Subject, From, To, and no header that the input named (Bcc, Cc, ...) —
 * whatever the subject held; and it refuses an address that could break the
 * envelope or the headers.
 */
#include "work/mailer.h"

#include <assert.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

static const char *const kinds[] = {
	"job.succeeded", "job.failed",      "instance.idle_warning", "instance.stopped",
	"quota.storage", "quota.gpu_hours", "class.notice",
};

/* The lines of the header block that begin with name (case-insensitive). */
static int headers_named(const char *head, size_t len, const char *name)
{
	size_t n = strlen(name);
	int count = 0;

	for (size_t i = 0; i < len; i++)
		if ((i == 0 || head[i - 1] == '\n') && i + n <= len &&
		    strncasecmp(head + i, name, n) == 0)
			count++;
	return count;
}

static void check_message(const char *m)
{
	const char *end = strstr(m, "\r\n\r\n");
	size_t len, line = 0;

	assert(end);
	len = (size_t)(end - m) + 2;
	for (size_t i = 0; i < len; i++) {
		if (m[i] == '\r')
			assert(m[i + 1] == '\n');
		if (m[i] == '\n') {
			assert(i > 0 && m[i - 1] == '\r');
			line = 0;
		} else
			assert(++line <= 998);
	}
	assert(headers_named(m, len, "Subject:") == 1);
	assert(headers_named(m, len, "From:") == 1);
	assert(headers_named(m, len, "To:") == 1);
	assert(headers_named(m, len, "Bcc:") == 0);
	assert(headers_named(m, len, "Cc:") == 0);
	assert(headers_named(m, len, "Reply-To:") == 0);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	char *buf = malloc(size + 1), *part[5] = { "", "", "", "", "" }, *p, *s = NULL, *b = NULL,
	     *m;
	int n = 0;
	json_t *params;

	if (!buf)
		return 0;
	memcpy(buf, data, size);
	buf[size] = '\0';
	/* NUL-separated parts (the last runs to the end) */
	for (p = buf, n = 0; n < 5 && p <= buf + size; n++) {
		part[n] = p;
		p += strlen(p) + 1;
	}
	params = json_pack("{s:s, s:s, s:s, s:s, s:s, s:I, s:I}", "class", part[1], "body", part[2],
	                   "name", part[1], "author", part[2], "pool", part[3], "bytes",
	                   (json_int_t)size, "limit_bytes", (json_int_t)(size + 1));
	if (params && mailer_text(kinds[(unsigned char)part[0][0] % 7], params,
	                          (size & 1) ? "zh-CN" : "en", "/x", "https://h/", &s, &b) == 0) {
		for (const char *c = s; *c; c++)
			assert((unsigned char)*c >= 0x20 && *c != 0x7f);
		assert(!strchr(b, '\r'));
		m = mailer_message("gpucloud <noreply@example.edu>", "alice@example.org", s, b,
		                   "id", 0);
		assert(m);
		check_message(m);
		free(m);
	}
	/* the raw subject, and the address as given */
	m = mailer_message("gpucloud <noreply@example.edu>", "alice@example.org", part[3], part[2],
	                   "id", 0);
	if (m) {
		check_message(m);
		free(m);
	}
	m = mailer_message("a@b.c", part[4], "s", "b", "id", 0);
	if (m) {
		assert(!strpbrk(part[4], "\r\n <>,\""));
		check_message(m);
		free(m);
	}
	free(s);
	free(b);
	json_decref(params);
	free(buf);
	return 0;
}
