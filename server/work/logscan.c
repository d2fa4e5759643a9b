/* logscan.c — known failure signatures in a job's log tail (see logscan.h).
 *
 * Owns: recognising a cause in bytes.  Does not own: reading the log
 * (jobs.c) or what the reason says around it.
 */
#include "work/logscan.h"

#include <string.h>

/* One line: [s, s + n) without its '\n' (and a '\r' before it). */
struct line {
	const char *s;
	size_t n;
};

/* The line ending at end (exclusive; end points just past a '\n' or at the
 * buffer's end), scanning back no further than lo. */
static struct line line_before(const char *lo, const char *end)
{
	struct line l;
	const char *p = end;

	if (p > lo && p[-1] == '\n')
		p--;
	l.n = 0;
	while (p > lo && p[-1] != '\n') {
		p--;
		l.n++;
	}
	l.s = p;
	if (l.n && l.s[l.n - 1] == '\r')
		l.n--;
	return l;
}

static int contains(struct line l, const char *needle)
{
	size_t k = strlen(needle);

	if (k == 0 || l.n < k)
		return 0;
	for (size_t i = 0; i + k <= l.n; i++)
		if (memcmp(l.s + i, needle, k) == 0)
			return 1;
	return 0;
}

static int starts(struct line l, const char *prefix)
{
	size_t k = strlen(prefix);

	return l.n >= k && memcmp(l.s, prefix, k) == 0;
}

/* The length of the valid UTF-8 sequence at p[0..n) (1 to 4), or 0. */
static size_t utf8_len(const unsigned char *p, size_t n)
{
	size_t need;
	unsigned char lo = 0x80, hi = 0xbf;

	if (p[0] < 0x80)
		return 1;
	if (p[0] >= 0xc2 && p[0] <= 0xdf)
		need = 1;
	else if (p[0] >= 0xe0 && p[0] <= 0xef) {
		need = 2;
		if (p[0] == 0xe0)
			lo = 0xa0; /* overlong */
		if (p[0] == 0xed)
			hi = 0x9f; /* surrogates */
	} else if (p[0] >= 0xf0 && p[0] <= 0xf4) {
		need = 3;
		if (p[0] == 0xf0)
			lo = 0x90;
		if (p[0] == 0xf4)
			hi = 0x8f;
	} else
		return 0;
	if (n < need + 1 || p[1] < lo || p[1] > hi)
		return 0;
	for (size_t j = 2; j <= need; j++)
		if ((p[j] & 0xc0) != 0x80)
			return 0;
	return need + 1;
}

/* Copies l into out as printable text: control bytes become ' ', invalid
 * UTF-8 '?', leading and trailing blanks go, and a character that does
 * not fit whole is left out. */
static long put(struct line l, char *out, size_t outlen)
{
	const unsigned char *s = (const unsigned char *)l.s;
	size_t i = 0, o = 0;

	while (i < l.n && (s[i] == ' ' || s[i] == '\t'))
		i++;
	while (i < l.n) {
		size_t k = utf8_len(s + i, l.n - i);
		if (k == 0) {
			if (o + 1 >= outlen)
				break;
			out[o++] = '?';
			i++;
			continue;
		}
		if (o + k >= outlen)
			break;
		if (k == 1)
			out[o++] = s[i] < 0x20 || s[i] == 0x7f ? ' ' : (char)s[i];
		else
			memcpy(out + o, s + i, k), o += k;
		i += k;
	}
	while (o > 0 && (out[o - 1] == ' ' || out[o - 1] == '\t'))
		o--;
	out[o] = '\0';
	return (long)o;
}

/* The last line of a Python traceback: after "Traceback (most recent call
 * last):", the first line that is not indented ends it ("ValueError: x",
 * "KeyboardInterrupt", "torch.cuda.OutOfMemoryError: CUDA out of memory").
 * Searches the last traceback in [lo, hi). */
static int traceback(const char *lo, const char *hi, struct line *found)
{
	const char *end = hi, *tb = NULL;
	struct line l;

	/* the last "Traceback" line */
	while (end > lo) {
		l = line_before(lo, end);
		if (starts(l, "Traceback (most recent call last)")) {
			tb = l.s + l.n;
			break;
		}
		end = l.s;
	}
	if (!tb)
		return 0;
	/* forward from it: the first non-empty line that is not indented */
	while (tb < hi) {
		const char *nl = memchr(tb, '\n', (size_t)(hi - tb));
		const char *e = nl ? nl : hi;
		if (tb > lo && tb[-1] != '\n' && nl) {
			tb = nl + 1; /* the rest of the Traceback line itself */
			continue;
		}
		l.s = tb;
		l.n = (size_t)(e - tb);
		if (l.n && l.s[l.n - 1] == '\r')
			l.n--;
		if (l.n > 0 && l.s[0] != ' ' && l.s[0] != '\t' &&
		    !starts(l, "Traceback (most recent call last)") &&
		    !starts(l, "During handling of the above exception") &&
		    !starts(l, "The above exception was the direct cause")) {
			*found = l;
			return 1;
		}
		if (!nl)
			break;
		tb = nl + 1;
	}
	return 0;
}

long logscan_reason(const char *buf, size_t len, int is_tail, char *out, size_t outlen)
{
	static const struct {
		const char *needle;
		const char *says;
	} sigs[] = {
		{ "CUDA out of memory", "CUDA out of memory" },
		{ "CUDA error: out of memory", "CUDA out of memory" },
		{ "NCCL timeout", "NCCL timeout" },
		{ "Watchdog caught collective operation timeout", "NCCL timeout" },
		{ "NCCL error", "NCCL error" },
		{ "NCCL Error", "NCCL error" },
		{ "ncclInternalError", "NCCL error" },
		{ "ncclSystemError", "NCCL error" },
		{ "ncclUnhandledCudaError", "NCCL error" },
		{ "Segmentation fault", "segmentation fault" },
		{ "SIGSEGV", "segmentation fault" },
	};
	const char *lo = buf, *end;
	struct line l;

	if (!outlen)
		return -1;
	out[0] = '\0';
	if (!buf || !len)
		return 0;
	if (is_tail) {
		/* a tail starts mid-line: that line is not whole */
		const char *nl = memchr(buf, '\n', len);
		if (!nl)
			return 0;
		lo = nl + 1;
	}
	if (traceback(lo, buf + len, &l))
		return put(l, out, outlen);
	for (size_t s = 0; s < sizeof(sigs) / sizeof(sigs[0]); s++)
		for (end = buf + len; end > lo;) {
			l = line_before(lo, end);
			if (contains(l, sigs[s].needle)) {
				l.s = sigs[s].says;
				l.n = strlen(sigs[s].says);
				return put(l, out, outlen);
			}
			end = l.s;
		}
	/* the shell's word for a process killed by SIGKILL (the OOM killer) */
	for (end = buf + len; end > lo;) {
		l = line_before(lo, end);
		if ((l.n == 6 && starts(l, "Killed")) || contains(l, " Killed ") ||
		    (l.n > 7 && memcmp(l.s + l.n - 7, " Killed", 7) == 0)) {
			l.s = "killed (SIGKILL; out of memory?)";
			l.n = strlen(l.s);
			return put(l, out, outlen);
		}
		end = l.s;
	}
	return 0;
}
