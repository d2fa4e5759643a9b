/* nvsmi.c — parsers for the two nvidia-smi outputs GPU discovery reads.
 *
 * Owns the grammar of
 *   nvidia-smi --query-gpu=index,uuid,name,memory.total,mig.mode.current --format=csv,noheader
 * of `nvidia-smi -L`, turning them into struct nvsmi_gpu / nvsmi_mig in
 * caller arrays, and of the "CUDA Version" in plain `nvidia-smi`'s header.  No allocation, no I/O.  Does not own running nvidia-smi,
 * containers, or what the inventory is used for.
 *
 * The parsers are strict: what they accept flows into Docker DeviceRequests
 * and NVIDIA_VISIBLE_DEVICES (a comma-separated list), so a UUID holds only
 * hex digits and dashes after its prefix, a name only printable ASCII, and a
 * field that does not fit its array is refused, never cut.
 *
 * Decisions, beyond what nvsmi.h says:
 * - Empty input (or only blank lines, or only the header) is zero GPUs, not
 *   an error: nvidia-smi itself says "No devices were found" when there are
 *   none, and that text is refused as an error message like the others.
 * - memory.total "[N/A]", "N/A", "[Not Supported]" reads as 0 MiB (unknown);
 *   the same words for mig.mode.current read as MIG disabled.
 * - Blank lines are allowed only after the last row, CR before LF anywhere.
 * - nvsmi_parse_list() starts by clearing every GPU's MIG list and clears
 *   them again when it fails, so on -1 no MIG device is attached.  It refuses
 *   MIG devices under a GPU whose MIG mode the query reported disabled: the
 *   mode changed between the two commands, and discovery should run again.
 * - On -1 from nvsmi_parse_query() the GPU array holds partial results.
 * - nvsmi_parse_cuda() reads only "CUDA Version:" and the version after it
 *   (major.minor, 1..99 each side, as nodes.cuda_max can hold); the rest of
 *   the table is nvidia-smi's business and changes between drivers.  An
 *   error message is reported only when no header is found: a GPU that fell
 *   off the bus prints one above a header that is still right.
 */
#include "engine/nvsmi.h"

#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define NCOLS            5
#define MAX_DIGITS_INDEX 6  /* nvidia-smi indexes are small; keeps int arithmetic safe */
#define MAX_DIGITS_MIB   12 /* about 10^12 MiB: far above any GPU, far below LLONG_MAX */
#define QUOTE_MAX        64 /* bytes of the offending input quoted in err */

struct span {
	const char *p;
	size_t n;
};

/* Text nvidia-smi prints instead of its output, matched anywhere in a line
 * that is not a row.  With a hint for whoever reads the error. */
static const struct {
	const char *text;
	const char *hint;
} smi_errors[] = {
	{ "NVIDIA-SMI has failed", "is the NVIDIA driver loaded on the node?" },
	{ "No devices were found", "the node has no GPU visible to the container" },
	{ "is not a valid field to query", "the nvidia-smi on the node is too old" },
	{ "Driver/library version mismatch", "reboot the node after a driver upgrade" },
	{ "Failed to initialize NVML", "is the NVIDIA driver loaded on the node?" },
	{ "Unable to determine the device handle", "a GPU has fallen off the bus" },
	{ "Insufficient Permissions", "run discovery with the NVIDIA runtime" },
	{ "Unknown Error", "check the node's kernel log for NVIDIA errors" },
};

#if defined(__GNUC__)
static int fail(char *err, size_t errlen, const char *fmt, ...)
        __attribute__((format(printf, 3, 4)));
#endif

/* Writes the reason into err (when there is room for one) and returns -1. */
static int fail(char *err, size_t errlen, const char *fmt, ...)
{
	va_list ap;

	if (err && errlen) {
		va_start(ap, fmt);
		vsnprintf(err, errlen, fmt, ap);
		va_end(ap);
	}
	return -1;
}

/* A printable copy of the start of s for an error message: input text may
 * hold control bytes that have no place in a log line. */
static const char *quote(char *dst, size_t cap, struct span s)
{
	size_t i, n = s.n < cap - 1 ? s.n : cap - 1;

	for (i = 0; i < n; i++) {
		unsigned char c = (unsigned char)s.p[i];

		dst[i] = (c >= 0x20 && c < 0x7f) ? (char)c : '?';
	}
	if (s.n > n && n >= 3)
		memcpy(dst + n - 3, "...", 3);
	dst[n] = '\0';
	return dst;
}

static int is_space(char c)
{
	return c == ' ' || c == '\t';
}

static struct span trim(struct span s)
{
	while (s.n && is_space(s.p[0])) {
		s.p++;
		s.n--;
	}
	while (s.n && is_space(s.p[s.n - 1]))
		s.n--;
	return s;
}

static int lower(int c)
{
	return (c >= 'A' && c <= 'Z') ? c - 'A' + 'a' : c;
}

static int eq_nocase(struct span s, const char *lit)
{
	size_t i, n = strlen(lit);

	if (s.n != n)
		return 0;
	for (i = 0; i < n; i++)
		if (lower((unsigned char)s.p[i]) != lower((unsigned char)lit[i]))
			return 0;
	return 1;
}

static int has_prefix(struct span s, const char *lit)
{
	size_t n = strlen(lit);

	return s.n >= n && memcmp(s.p, lit, n) == 0;
}

static int contains(struct span s, const char *lit)
{
	size_t i, n = strlen(lit);

	for (i = 0; n <= s.n && i <= s.n - n; i++)
		if (memcmp(s.p + i, lit, n) == 0)
			return 1;
	return 0;
}

/* "[N/A]" and friends: nvidia-smi's ways of saying a value is unknown. */
static int is_na(struct span s)
{
	return eq_nocase(s, "[N/A]") || eq_nocase(s, "N/A") || eq_nocase(s, "[Not Supported]") ||
	       eq_nocase(s, "Not Supported");
}

/* Decimal digits only, at most maxd of them. */
static int parse_num(struct span s, size_t maxd, long long *out)
{
	long long v = 0;
	size_t i;

	if (s.n == 0 || s.n > maxd)
		return -1;
	for (i = 0; i < s.n; i++) {
		if (s.p[i] < '0' || s.p[i] > '9')
			return -1;
		v = v * 10 + (s.p[i] - '0');
	}
	*out = v;
	return 0;
}

static int hex_dash(const char *p, size_t n)
{
	size_t i;

	if (n == 0)
		return 0;
	for (i = 0; i < n; i++) {
		char c = p[i];

		if (!((c >= '0' && c <= '9') || (c >= 'a' && c <= 'f') || (c >= 'A' && c <= 'F') ||
		      c == '-'))
			return 0;
	}
	return 1;
}

static int valid_gpu_uuid(struct span s)
{
	return has_prefix(s, "GPU-") && hex_dash(s.p + 4, s.n - 4);
}

/* "MIG-<hex>" (drivers since R470) or "MIG-GPU-<gpu uuid>/<gi>/<ci>"
 * (R450/R460).  For the second form *parent is set to the GPU UUID inside. */
static int valid_mig_uuid(struct span s, struct span *parent)
{
	struct span rest = { s.p + 4, s.n - 4 };
	size_t i, slash = 0, digits = 0;

	parent->p = NULL;
	parent->n = 0;
	if (!has_prefix(s, "MIG-"))
		return 0;
	if (!has_prefix(rest, "GPU-"))
		return hex_dash(rest.p, rest.n);
	for (i = 0; i < rest.n && rest.p[i] != '/'; i++)
		;
	parent->p = rest.p;
	parent->n = i;
	if (!valid_gpu_uuid(*parent))
		return 0;
	/* exactly "/<digits>/<digits>" after the GPU UUID */
	for (; i < rest.n; i++) {
		if (rest.p[i] == '/') {
			if (slash && !digits)
				return 0;
			slash++;
			digits = 0;
		} else if (rest.p[i] >= '0' && rest.p[i] <= '9') {
			digits++;
		} else {
			return 0;
		}
	}
	return slash == 2 && digits > 0;
}

/* Copies s into dst[cap] with its NUL, or refuses when it does not fit. */
static int copy(char *dst, size_t cap, struct span s)
{
	if (s.n >= cap)
		return -1;
	memcpy(dst, s.p, s.n);
	dst[s.n] = '\0';
	return 0;
}

static int printable(struct span s)
{
	size_t i;

	for (i = 0; i < s.n; i++)
		if ((unsigned char)s.p[i] < 0x20 || (unsigned char)s.p[i] >= 0x7f)
			return 0;
	return 1;
}

/* The next line of buf from *off, without its "\n" or "\r\n".  Returns 0 at
 * the end of the input. */
static int next_line(const char *buf, size_t len, size_t *off, struct span *line)
{
	const char *nl;
	size_t start = *off;

	if (start >= len)
		return 0;
	nl = memchr(buf + start, '\n', len - start);
	line->p = buf + start;
	line->n = nl ? (size_t)(nl - line->p) : len - start;
	*off = start + line->n + (nl ? 1 : 0);
	if (line->n && line->p[line->n - 1] == '\r')
		line->n--;
	return 1;
}

/* Refuses NUL bytes anywhere: nvidia-smi never prints one, and the strings
 * handed on must not end early. */
static int check_nul(const char *buf, size_t len, char *err, size_t errlen)
{
	const char *z = len ? memchr(buf, '\0', len) : NULL;

	if (z)
		return fail(err, errlen, "nvidia-smi output has a NUL byte at offset %zu",
		            (size_t)(z - buf));
	return 0;
}

/* Everything from *off on is blank lines. */
static int rest_blank(const char *buf, size_t len, size_t off)
{
	struct span line;

	while (next_line(buf, len, &off, &line))
		if (trim(line).n)
			return 0;
	return 1;
}

/* The reason for a line that is not what the parser expects: nvidia-smi's
 * own error message when it is one, else what; a line number either way. */
static int bad_line(char *err, size_t errlen, int lineno, struct span line, const char *what)
{
	char q[QUOTE_MAX];
	size_t i;

	for (i = 0; i < sizeof(smi_errors) / sizeof(smi_errors[0]); i++)
		if (contains(line, smi_errors[i].text))
			return fail(err, errlen, "nvidia-smi failed: '%s' (%s)",
			            quote(q, sizeof(q), trim(line)), smi_errors[i].hint);
	return fail(err, errlen, "nvidia-smi line %d: %s: '%s'", lineno, what,
	            quote(q, sizeof(q), trim(line)));
}

/* Splits line at ',' into at most NCOLS trimmed fields.  Returns the number
 * of fields there are, which may be more than NCOLS. */
static int split(struct span line, struct span *f)
{
	size_t i, start = 0;
	int n = 0;

	for (i = 0; i <= line.n; i++) {
		if (i < line.n && line.p[i] != ',')
			continue;
		if (n < NCOLS) {
			struct span s = { line.p + start, i - start };

			f[n] = trim(s);
		}
		n++;
		start = i + 1;
	}
	return n;
}

static int is_header(const struct span *f, int nf)
{
	return nf >= 1 && eq_nocase(f[0], "index");
}

static int check_header(const struct span *f, int nf, int lineno, struct span line, char *err,
                        size_t errlen)
{
	if (nf == NCOLS && eq_nocase(f[1], "uuid") && eq_nocase(f[2], "name") &&
	    (eq_nocase(f[3], "memory.total [MiB]") || eq_nocase(f[3], "memory.total")) &&
	    eq_nocase(f[4], "mig.mode.current"))
		return 0;
	return bad_line(err, errlen, lineno, line,
	                "header does not name index, uuid, name, memory.total, mig.mode.current");
}

/* memory.total: "143771 MiB", "143771" (nounits) or unknown (0). */
static int parse_memory(struct span s, long long *mib)
{
	size_t i = 0;
	struct span num, unit;

	if (is_na(s)) {
		*mib = 0;
		return 0;
	}
	while (i < s.n && s.p[i] >= '0' && s.p[i] <= '9')
		i++;
	num.p = s.p;
	num.n = i;
	unit.p = s.p + i;
	unit.n = s.n - i;
	unit = trim(unit);
	if (unit.n && !(unit.n == 3 && memcmp(unit.p, "MiB", 3) == 0))
		return -1;
	return parse_num(num, MAX_DIGITS_MIB, mib);
}

/* mig.mode.current: 1 enabled, 0 disabled or unknown, -1 not a mode. */
static int parse_mig_mode(struct span s)
{
	if (eq_nocase(s, "Enabled"))
		return 1;
	if (eq_nocase(s, "Disabled") || is_na(s))
		return 0;
	return -1;
}

/* One row of the query into g; checks against the n rows before it. */
static int parse_row(const struct span *f, int lineno, struct nvsmi_gpu *gpus, int n, char *err,
                     size_t errlen)
{
	struct nvsmi_gpu *g = &gpus[n];
	char q[QUOTE_MAX];
	long long v;
	int i;

	memset(g, 0, sizeof(*g));
	if (parse_num(f[0], MAX_DIGITS_INDEX, &v) < 0)
		return fail(err, errlen, "nvidia-smi line %d: index '%s' is not a number", lineno,
		            quote(q, sizeof(q), f[0]));
	g->index = (int)v;

	if (f[1].n >= sizeof(g->uuid))
		return fail(err, errlen,
		            "nvidia-smi line %d: uuid '%s' is too long (%zu bytes, at most %zu)",
		            lineno, quote(q, sizeof(q), f[1]), f[1].n, sizeof(g->uuid) - 1);
	if (!valid_gpu_uuid(f[1]))
		return fail(err, errlen,
		            "nvidia-smi line %d: uuid '%s' is not a GPU UUID (expected 'GPU-' and "
		            "hex digits)",
		            lineno, quote(q, sizeof(q), f[1]));
	copy(g->uuid, sizeof(g->uuid), f[1]);

	if (f[2].n == 0 || !printable(f[2]))
		return fail(err, errlen, "nvidia-smi line %d: name '%s' is empty or not printable",
		            lineno, quote(q, sizeof(q), f[2]));
	if (copy(g->name, sizeof(g->name), f[2]) < 0)
		return fail(err, errlen,
		            "nvidia-smi line %d: name '%s' is too long (%zu bytes, at most %zu)",
		            lineno, quote(q, sizeof(q), f[2]), f[2].n, sizeof(g->name) - 1);

	if (parse_memory(f[3], &g->memory_mib) < 0)
		return fail(err, errlen,
		            "nvidia-smi line %d: memory.total '%s' is not a size in MiB (like "
		            "'81920 MiB')",
		            lineno, quote(q, sizeof(q), f[3]));

	g->mig_enabled = parse_mig_mode(f[4]);
	if (g->mig_enabled < 0)
		return fail(err, errlen,
		            "nvidia-smi line %d: mig.mode.current '%s' is not Enabled, Disabled or "
		            "[N/A]",
		            lineno, quote(q, sizeof(q), f[4]));

	for (i = 0; i < n; i++) {
		if (gpus[i].index == g->index)
			return fail(err, errlen, "nvidia-smi line %d: GPU index %d appears twice",
			            lineno, g->index);
		if (strcmp(gpus[i].uuid, g->uuid) == 0)
			return fail(err, errlen, "nvidia-smi line %d: GPU uuid '%s' appears twice",
			            lineno, g->uuid);
	}
	return 0;
}

int nvsmi_parse_query(const char *buf, size_t len, struct nvsmi_gpu *gpus, int max, char *err,
                      size_t errlen)
{
	struct span line, f[NCOLS];
	size_t off = 0;
	int n = 0, nf, lineno = 0, cap = max < NVSMI_MAX_GPUS ? max : NVSMI_MAX_GPUS;
	int seen_line = 0;

	if (err && errlen)
		err[0] = '\0';
	if (!buf)
		len = 0;
	if (check_nul(buf, len, err, errlen) < 0)
		return -1;
	while (next_line(buf, len, &off, &line)) {
		lineno++;
		if (trim(line).n == 0) {
			if (rest_blank(buf, len, off))
				break;
			return fail(err, errlen, "nvidia-smi line %d: blank line before a row",
			            lineno);
		}
		nf = split(line, f);
		if (!seen_line && is_header(f, nf)) {
			seen_line = 1;
			if (check_header(f, nf, lineno, line, err, errlen) < 0)
				return -1;
			continue;
		}
		seen_line = 1;
		if (nf != NCOLS)
			return bad_line(err, errlen, lineno, line,
			                nf < NCOLS ? "too few columns (want index, uuid, name, "
			                             "memory.total, mig.mode.current)"
			                           : "too many columns (want index, uuid, name, "
			                             "memory.total, mig.mode.current)");
		if (n >= cap || !gpus)
			return fail(err, errlen, "nvidia-smi lists more than %d GPUs",
			            cap > 0 ? cap : 0);
		if (parse_row(f, lineno, gpus, n, err, errlen) < 0)
			return -1;
		n++;
	}
	return n;
}

/* A cursor over one line of `nvidia-smi -L`. */
struct cur {
	const char *p, *end;
};

static size_t skip_spaces(struct cur *c)
{
	size_t n = 0;

	while (c->p < c->end && is_space(*c->p)) {
		c->p++;
		n++;
	}
	return n;
}

static int lit(struct cur *c, const char *s)
{
	size_t n = strlen(s);

	if ((size_t)(c->end - c->p) < n || memcmp(c->p, s, n) != 0)
		return 0;
	c->p += n;
	return 1;
}

static int number(struct cur *c, long long *v)
{
	struct span s = { c->p, 0 };

	while (c->p < c->end && *c->p >= '0' && *c->p <= '9') {
		c->p++;
		s.n++;
	}
	return parse_num(s, MAX_DIGITS_INDEX, v) == 0;
}

/* "(UUID: <uuid>)" ending the line; the uuid goes to *u. */
static int uuid_tail(struct cur *c, struct span *u)
{
	if (!lit(c, "(UUID: ") || c->end == c->p || c->end[-1] != ')')
		return 0;
	u->p = c->p;
	u->n = (size_t)(c->end - 1 - c->p);
	c->p = c->end;
	return 1;
}

static struct nvsmi_gpu *find_gpu(struct nvsmi_gpu *gpus, int ngpus, int index)
{
	int i;

	for (i = 0; i < ngpus; i++)
		if (gpus[i].index == index)
			return &gpus[i];
	return NULL;
}

/* "GPU 0: NVIDIA H200 (UUID: GPU-...)".  Returns 1 when the line has that
 * shape (index and uuid set), 0 when it does not. */
static int gpu_line(struct span line, long long *index, struct span *uuid)
{
	struct cur c = { line.p, line.p + line.n };
	const char *name;
	size_t i;

	if (!lit(&c, "GPU") || !skip_spaces(&c) || !number(&c, index) || !lit(&c, ":") ||
	    !skip_spaces(&c))
		return 0;
	/* The name runs up to the last " (UUID: ", so a name may hold parentheses. */
	name = c.p;
	for (i = (size_t)(c.end - name); i > 1; i--) {
		struct cur t = { name + i, c.end };

		if (is_space(name[i - 1]) && lit(&t, "(UUID: "))
			break;
	}
	if (i <= 1)
		return 0; /* no uuid, or no name before it */
	c.p = name + i;
	return uuid_tail(&c, uuid);
}

/* "  MIG 1g.10gb     Device  0: (UUID: MIG-...)". */
static int mig_line(struct span line, struct span *profile, long long *dev, struct span *uuid)
{
	struct cur c = { line.p, line.p + line.n };

	skip_spaces(&c);
	if (!lit(&c, "MIG") || !skip_spaces(&c))
		return 0;
	profile->p = c.p;
	while (c.p < c.end && !is_space(*c.p))
		c.p++;
	profile->n = (size_t)(c.p - profile->p);
	if (!profile->n || !skip_spaces(&c) || !lit(&c, "Device") || !skip_spaces(&c) ||
	    !number(&c, dev) || !lit(&c, ":") || !skip_spaces(&c))
		return 0;
	return uuid_tail(&c, uuid);
}

/* "1g.10gb", "3g.40gb", "1c.2g.20gb", "1g.10gb+me". */
static int valid_profile(struct span s)
{
	size_t i;

	for (i = 0; i < s.n; i++) {
		char c = s.p[i];

		if (!((c >= '0' && c <= '9') || (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') ||
		      c == '.' || c == '+' || c == '_' || c == '-'))
			return 0;
	}
	return s.n > 0;
}

static void clear_mig(struct nvsmi_gpu *gpus, int ngpus)
{
	int i;

	for (i = 0; gpus && i < ngpus; i++)
		gpus[i].nmig = 0;
}

/* Attaches one MIG line to g after checking it against everything so far. */
static int add_mig(struct nvsmi_gpu *g, struct nvsmi_gpu *gpus, int ngpus, int lineno,
                   struct span profile, long long dev, struct span uuid, char *err, size_t errlen)
{
	struct nvsmi_mig *m;
	struct span parent;
	char q[QUOTE_MAX];
	int i, k;

	if (!g->mig_enabled)
		return fail(err, errlen,
		            "nvidia-smi -L line %d: GPU %d lists MIG devices but its MIG mode is "
		            "disabled (did the mode change? run discovery again)",
		            lineno, g->index);
	if (g->nmig >= NVSMI_MAX_MIG)
		return fail(err, errlen,
		            "nvidia-smi -L line %d: GPU %d has more than %d MIG devices", lineno,
		            g->index, NVSMI_MAX_MIG);
	if (!valid_profile(profile) || profile.n >= sizeof(m->profile))
		return fail(err, errlen, "nvidia-smi -L line %d: MIG profile '%s' is not valid",
		            lineno, quote(q, sizeof(q), profile));
	if (uuid.n >= sizeof(m->uuid))
		return fail(
		        err, errlen,
		        "nvidia-smi -L line %d: MIG uuid '%s' is too long (%zu bytes, at most %zu)",
		        lineno, quote(q, sizeof(q), uuid), uuid.n, sizeof(m->uuid) - 1);
	if (!valid_mig_uuid(uuid, &parent))
		return fail(err, errlen,
		            "nvidia-smi -L line %d: uuid '%s' is not a MIG UUID (expected 'MIG-' "
		            "and hex digits)",
		            lineno, quote(q, sizeof(q), uuid));
	if (parent.p && !(parent.n == strlen(g->uuid) && memcmp(parent.p, g->uuid, parent.n) == 0))
		return fail(err, errlen,
		            "nvidia-smi -L line %d: MIG uuid '%s' names another GPU than %d",
		            lineno, quote(q, sizeof(q), uuid), g->index);
	for (i = 0; i < ngpus; i++) {
		for (k = 0; k < gpus[i].nmig; k++) {
			const struct nvsmi_mig *o = &gpus[i].mig[k];

			if (strlen(o->uuid) == uuid.n && memcmp(o->uuid, uuid.p, uuid.n) == 0)
				return fail(err, errlen,
				            "nvidia-smi -L line %d: MIG uuid '%s' appears twice",
				            lineno, o->uuid);
			if (&gpus[i] == g && o->index == dev)
				return fail(
				        err, errlen,
				        "nvidia-smi -L line %d: GPU %d has MIG device %lld twice",
				        lineno, g->index, dev);
		}
	}
	m = &g->mig[g->nmig];
	memset(m, 0, sizeof(*m));
	m->gpu_index = g->index;
	m->index = (int)dev;
	copy(m->profile, sizeof(m->profile), profile);
	copy(m->uuid, sizeof(m->uuid), uuid);
	g->nmig++;
	return 0;
}

static int parse_list(const char *buf, size_t len, struct nvsmi_gpu *gpus, int ngpus, char *err,
                      size_t errlen)
{
	struct nvsmi_gpu *g = NULL;
	struct span line, uuid, profile;
	size_t off = 0;
	long long index, dev;
	int lineno = 0, total = 0, i;
	char q[QUOTE_MAX];
	/* which GPUs have had their line, so a GPU listed twice is caught */
	unsigned char listed[NVSMI_MAX_GPUS] = { 0 };

	while (next_line(buf, len, &off, &line)) {
		lineno++;
		if (trim(line).n == 0) {
			if (rest_blank(buf, len, off))
				break;
			return fail(err, errlen,
			            "nvidia-smi -L line %d: blank line before a GPU or MIG line",
			            lineno);
		}
		if (gpu_line(line, &index, &uuid)) {
			g = find_gpu(gpus, ngpus, (int)index);
			if (!g)
				return fail(err, errlen,
				            "nvidia-smi -L line %d: GPU %lld is not in the "
				            "--query-gpu output",
				            lineno, index);
			if (!(uuid.n == strlen(g->uuid) && memcmp(uuid.p, g->uuid, uuid.n) == 0))
				return fail(err, errlen,
				            "nvidia-smi -L line %d: GPU %lld has uuid '%s', the "
				            "query said '%s'",
				            lineno, index, quote(q, sizeof(q), uuid), g->uuid);
			i = (int)(g - gpus);
			if (listed[i])
				return fail(err, errlen,
				            "nvidia-smi -L line %d: GPU %lld appears twice", lineno,
				            index);
			listed[i] = 1;
			continue;
		}
		if (mig_line(line, &profile, &dev, &uuid)) {
			if (!g)
				return fail(err, errlen,
				            "nvidia-smi -L line %d: MIG device before any GPU line",
				            lineno);
			if (add_mig(g, gpus, ngpus, lineno, profile, dev, uuid, err, errlen) < 0)
				return -1;
			total++;
			continue;
		}
		return bad_line(err, errlen, lineno, line, "not a GPU or MIG line");
	}
	return total;
}

int nvsmi_parse_list(const char *buf, size_t len, struct nvsmi_gpu *gpus, int ngpus, char *err,
                     size_t errlen)
{
	int n;

	if (err && errlen)
		err[0] = '\0';
	if (!buf)
		len = 0;
	if (!gpus || ngpus < 0)
		ngpus = 0;
	if (ngpus > NVSMI_MAX_GPUS)
		return fail(err, errlen, "nvsmi_parse_list: %d GPUs, at most %d", ngpus,
		            NVSMI_MAX_GPUS);
	clear_mig(gpus, ngpus);
	if (check_nul(buf, len, err, errlen) < 0)
		return -1;
	n = parse_list(buf, len, gpus, ngpus, err, errlen);
	if (n < 0)
		clear_mig(gpus, ngpus);
	return n;
}

/* The version after "CUDA Version:" in line at *at: "12.4" -> 12040, "N/A"
 * -> 0; -1 when it is neither.  It must end the line or be followed by a
 * space or the table's '|'. */
static int cuda_value(struct span line, size_t at)
{
	struct cur c = { line.p + at, line.p + line.n };
	long long major, minor;

	skip_spaces(&c);
	if (lit(&c, "N/A"))
		return (c.p == c.end || is_space(*c.p) || *c.p == '|') ? 0 : -1;
	if (!number(&c, &major) || !lit(&c, ".") || !number(&c, &minor))
		return -1;
	if (c.p != c.end && !is_space(*c.p) && *c.p != '|')
		return -1;
	if (major < 1 || major > 99 || minor > 99)
		return -1;
	return (int)(major * 1000 + minor * 10);
}

/* The line holds one of nvidia-smi's error messages. */
static int is_smi_error(struct span line)
{
	size_t i;

	for (i = 0; i < sizeof(smi_errors) / sizeof(smi_errors[0]); i++)
		if (contains(line, smi_errors[i].text))
			return 1;
	return 0;
}

/* Offset just past "CUDA Version:" in line, or 0 when it is not there. */
static size_t cuda_label(struct span line)
{
	static const char label[] = "CUDA Version:";
	size_t i, n = sizeof(label) - 1;

	for (i = 0; n <= line.n && i <= line.n - n; i++)
		if (memcmp(line.p + i, label, n) == 0)
			return i + n;
	return 0;
}

int nvsmi_parse_cuda(const char *buf, size_t len, int *cuda, char *err, size_t errlen)
{
	struct span line, first_err = { NULL, 0 };
	size_t off = 0, at;
	int lineno = 0, found = 0, v = 0, err_line = 0;
	char q[QUOTE_MAX];

	if (err && errlen)
		err[0] = '\0';
	if (cuda)
		*cuda = 0;
	if (!buf)
		len = 0;
	if (check_nul(buf, len, err, errlen) < 0)
		return -1;
	while (next_line(buf, len, &off, &line)) {
		lineno++;
		at = cuda_label(line);
		if (!at) {
			if (!first_err.p && is_smi_error(line)) {
				first_err = line;
				err_line = lineno;
			}
			continue;
		}
		if (found)
			return fail(err, errlen,
			            "nvidia-smi line %d: a second 'CUDA Version' (the first on "
			            "line %d)",
			            lineno, found);
		v = cuda_value(line, at);
		if (v < 0)
			return fail(err, errlen,
			            "nvidia-smi line %d: 'CUDA Version' is not major.minor or N/A: "
			            "'%s'",
			            lineno, quote(q, sizeof(q), trim(line)));
		found = lineno;
	}
	if (!found) {
		if (first_err.p)
			return bad_line(err, errlen, err_line, first_err, "");
		return fail(
		        err, errlen,
		        "nvidia-smi printed no 'CUDA Version' header (a driver older than R410?)");
	}
	if (cuda)
		*cuda = v;
	return v > 0 ? 1 : 0;
}

/* ---- the sampler's utilisation query ---- */

/* "97", "97 %" or unknown (-1); at most 100. */
static int parse_pct(struct span s, int *pct)
{
	size_t i = 0;
	struct span num, unit;
	long long v;

	if (is_na(s)) {
		*pct = -1;
		return 0;
	}
	while (i < s.n && s.p[i] >= '0' && s.p[i] <= '9')
		i++;
	num.p = s.p;
	num.n = i;
	unit.p = s.p + i;
	unit.n = s.n - i;
	unit = trim(unit);
	if (unit.n && !(unit.n == 1 && unit.p[0] == '%'))
		return -1;
	if (parse_num(num, 3, &v) < 0 || v > 100)
		return -1;
	*pct = (int)v;
	return 0;
}

int nvsmi_parse_util(const char *buf, size_t len, struct nvsmi_util *util, int max, char *err,
                     size_t errlen)
{
	struct span line, f[NCOLS];
	size_t off = 0;
	int n = 0, nf, lineno = 0, cap = max < NVSMI_MAX_GPUS ? max : NVSMI_MAX_GPUS;
	char q[QUOTE_MAX];

	if (err && errlen)
		err[0] = '\0';
	if (!buf)
		len = 0;
	if (check_nul(buf, len, err, errlen) < 0)
		return -1;
	while (next_line(buf, len, &off, &line)) {
		struct nvsmi_util *u;
		long long mib;

		lineno++;
		if (trim(line).n == 0) {
			if (rest_blank(buf, len, off))
				break;
			return fail(err, errlen, "nvidia-smi line %d: blank line before a row",
			            lineno);
		}
		nf = split(line, f);
		if (lineno == 1 && nf >= 1 && eq_nocase(f[0], "uuid"))
			continue; /* --format=csv without noheader */
		if (nf != 3)
			return bad_line(err, errlen, lineno, line,
			                "want three columns (uuid, utilization.gpu, memory.used)");
		if (n >= cap || !util)
			return fail(err, errlen, "nvidia-smi lists more than %d GPUs",
			            cap > 0 ? cap : 0);
		u = &util[n];
		memset(u, 0, sizeof(*u));
		if (f[0].n >= sizeof(u->uuid) || !valid_gpu_uuid(f[0]))
			return fail(
			        err, errlen,
			        "nvidia-smi line %d: uuid '%s' is not a GPU UUID (expected 'GPU-' "
			        "and hex digits)",
			        lineno, quote(q, sizeof(q), f[0]));
		copy(u->uuid, sizeof(u->uuid), f[0]);
		if (parse_pct(f[1], &u->util_pct) < 0)
			return fail(err, errlen,
			            "nvidia-smi line %d: utilization.gpu '%s' is not a percentage",
			            lineno, quote(q, sizeof(q), f[1]));
		if (is_na(f[2]))
			mib = -1;
		else if (parse_memory(f[2], &mib) < 0)
			return fail(err, errlen,
			            "nvidia-smi line %d: memory.used '%s' is not a size in MiB",
			            lineno, quote(q, sizeof(q), f[2]));
		u->mem_used_mib = mib;
		for (int i = 0; i < n; i++)
			if (strcmp(util[i].uuid, u->uuid) == 0)
				return fail(err, errlen,
				            "nvidia-smi line %d: GPU uuid '%s' appears twice",
				            lineno, u->uuid);
		n++;
	}
	return n;
}

/* The value of label name inside a sample's {...}: "UUID" in
 * {gpu="0",UUID="GPU-..."}.  Returns 1 and sets *v when present. */
static int dcgm_label(struct span labels, const char *name, struct span *v)
{
	size_t i = 0, n = strlen(name);

	while (i < labels.n) {
		size_t k = i, e;

		while (k < labels.n && labels.p[k] != '=')
			k++;
		if (k + 1 >= labels.n || labels.p[k + 1] != '"')
			return 0;
		for (e = k + 2; e < labels.n && labels.p[e] != '"'; e++)
			if (labels.p[e] == '\\')
				e++;
		if (e >= labels.n)
			return 0;
		if (k - i == n && memcmp(labels.p + i, name, n) == 0) {
			v->p = labels.p + k + 2;
			v->n = e - (k + 2);
			return 1;
		}
		i = e + 1;
		while (i < labels.n && (labels.p[i] == ',' || is_space(labels.p[i])))
			i++;
	}
	return 0;
}

/* "45", "45.5", "1.2e+03" as DCGM prints them, in [0, limit]. */
static int dcgm_value(struct span s, double limit, double *out)
{
	char tmp[40];
	char *end;
	double v;

	if (s.n == 0 || s.n >= sizeof(tmp))
		return -1;
	memcpy(tmp, s.p, s.n);
	tmp[s.n] = '\0';
	if (!((tmp[0] >= '0' && tmp[0] <= '9') || tmp[0] == '.'))
		return -1;
	v = strtod(tmp, &end);
	if (*end != '\0' || !(v >= 0 && v <= limit))
		return -1;
	*out = v;
	return 0;
}

int nvsmi_parse_dcgm(const char *buf, size_t len, struct nvsmi_util *util, int max, char *err,
                     size_t errlen)
{
	struct span line;
	size_t off = 0;
	int n = 0, lineno = 0, cap = max < NVSMI_MAX_GPUS ? max : NVSMI_MAX_GPUS;
	char q[QUOTE_MAX];

	if (err && errlen)
		err[0] = '\0';
	if (!buf)
		len = 0;
	if (check_nul(buf, len, err, errlen) < 0)
		return -1;
	while (next_line(buf, len, &off, &line)) {
		struct span t = trim(line), labels, value, uuid, mig;
		const char *brace, *close;
		int is_util, i;
		double v;

		lineno++;
		if (t.n == 0 || t.p[0] == '#')
			continue;
		is_util = has_prefix(t, "DCGM_FI_DEV_GPU_UTIL{");
		if (!is_util && !has_prefix(t, "DCGM_FI_DEV_FB_USED{"))
			continue;
		brace = memchr(t.p, '{', t.n);
		close = memchr(brace, '}', t.n - (size_t)(brace - t.p));
		if (!close)
			return fail(err, errlen, "DCGM line %d: no '}' after the labels", lineno);
		labels.p = brace + 1;
		labels.n = (size_t)(close - labels.p);
		value.p = close + 1;
		value.n = t.n - (size_t)(value.p - t.p);
		value = trim(value);
		for (i = 0; i < (int)value.n && !is_space(value.p[i]); i++)
			; /* a timestamp may follow the value */
		value.n = (size_t)i;
		if (dcgm_label(labels, "GPU_I_ID", &mig) && mig.n)
			continue; /* a MIG instance, not the whole GPU */
		if (!dcgm_label(labels, "UUID", &uuid) || uuid.n >= sizeof(util[0].uuid) ||
		    !valid_gpu_uuid(uuid))
			return fail(err, errlen, "DCGM line %d: no GPU UUID label: '%s'", lineno,
			            quote(q, sizeof(q), t));
		if (dcgm_value(value, is_util ? 100 : 1e12, &v) < 0)
			return fail(err, errlen,
			            "DCGM line %d: value '%s' is not a number in range", lineno,
			            quote(q, sizeof(q), value));
		for (i = 0; i < n; i++)
			if (strlen(util[i].uuid) == uuid.n &&
			    memcmp(util[i].uuid, uuid.p, uuid.n) == 0)
				break;
		if (i == n) {
			if (n >= cap || !util)
				return fail(err, errlen,
				            "the DCGM exporter lists more than %d GPUs",
				            cap > 0 ? cap : 0);
			memset(&util[n], 0, sizeof(util[n]));
			copy(util[n].uuid, sizeof(util[n].uuid), uuid);
			util[n].util_pct = -1;
			util[n].mem_used_mib = -1;
			n++;
		}
		if (is_util)
			util[i].util_pct = (int)(v + 0.5);
		else
			util[i].mem_used_mib = (long long)v;
	}
	return n;
}
