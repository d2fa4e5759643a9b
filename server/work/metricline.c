/* metricline.c — the metric line parser (see metricline.h).
 *
 * Owns: the grammar of one flat JSON object of named numbers, strictly
 * (RFC 8259 numbers; names without escapes), and finding the object on a
 * log line.  Does not own: reading files or streams, storing points
 * (metrics.c).
 */
#include "work/metricline.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

static int blank(char c)
{
	return c == ' ' || c == '\t' || c == '\r' || c == '\n';
}

static int name_char(char c)
{
	return (c >= 'A' && c <= 'Z') || (c >= 'a' && c <= 'z') || (c >= '0' && c <= '9') ||
	       c == '_' || c == '.' || c == '/' || c == '-';
}

static int digit(char c)
{
	return c >= '0' && c <= '9';
}

/* A JSON number at buf[*i..len) into *v; -1 when there is none, or it is
 * longer than 64 bytes, not finite or beyond METRICLINE_VALUE_MAX. */
static int number(const char *buf, size_t len, size_t *i, double *v)
{
	size_t s = *i, p = *i;
	char tmp[72];

	if (p < len && buf[p] == '-')
		p++;
	if (p >= len || !digit(buf[p]))
		return -1;
	if (buf[p] == '0')
		p++;
	else
		while (p < len && digit(buf[p]))
			p++;
	if (p < len && buf[p] == '.') {
		p++;
		if (p >= len || !digit(buf[p]))
			return -1;
		while (p < len && digit(buf[p]))
			p++;
	}
	if (p < len && (buf[p] == 'e' || buf[p] == 'E')) {
		p++;
		if (p < len && (buf[p] == '+' || buf[p] == '-'))
			p++;
		if (p >= len || !digit(buf[p]))
			return -1;
		while (p < len && digit(buf[p]))
			p++;
	}
	if (p - s > 64)
		return -1;
	memcpy(tmp, buf + s, p - s);
	tmp[p - s] = '\0';
	*v = strtod(tmp, NULL);
	if (!isfinite(*v) || fabs(*v) > METRICLINE_VALUE_MAX)
		return -1;
	*i = p;
	return 0;
}

int metricline_parse_json(const char *buf, size_t len, struct metricline *out)
{
	size_t i = 0;

	out->has_step = 0;
	out->step = 0;
	out->n = 0;
	while (i < len && blank(buf[i]))
		i++;
	if (i >= len || buf[i++] != '{')
		return -1;
	for (;;) {
		size_t ns, nl;
		double v;

		while (i < len && blank(buf[i]))
			i++;
		if (i < len && buf[i] == '}' && out->n == 0 && !out->has_step) {
			return -1; /* {} reports nothing */
		}
		if (i >= len || buf[i++] != '"')
			return -1;
		ns = i;
		while (i < len && name_char(buf[i]))
			i++;
		nl = i - ns;
		if (i >= len || buf[i++] != '"' || nl == 0 || nl > METRICLINE_NAME_MAX)
			return -1;
		while (i < len && blank(buf[i]))
			i++;
		if (i >= len || buf[i++] != ':')
			return -1;
		while (i < len && blank(buf[i]))
			i++;
		if (number(buf, len, &i, &v) < 0)
			return -1;
		if (nl == 4 && memcmp(buf + ns, "step", 4) == 0) {
			if (out->has_step || v < 0 || v >= (double)METRICLINE_STEP_MAX + 1 ||
			    v != floor(v))
				return -1;
			out->has_step = 1;
			out->step = (long long)v;
		} else {
			if (out->n >= METRICLINE_MAX_VALUES)
				return -1;
			for (int k = 0; k < out->n; k++)
				if (strlen(out->v[k].name) == nl &&
				    memcmp(out->v[k].name, buf + ns, nl) == 0)
					return -1;
			memcpy(out->v[out->n].name, buf + ns, nl);
			out->v[out->n].name[nl] = '\0';
			out->v[out->n].value = v;
			out->n++;
		}
		while (i < len && blank(buf[i]))
			i++;
		if (i < len && buf[i] == ',') {
			i++;
			continue;
		}
		if (i < len && buf[i] == '}') {
			i++;
			break;
		}
		return -1;
	}
	while (i < len && blank(buf[i]))
		i++;
	if (i != len || out->n == 0)
		return -1;
	return out->n;
}

int metricline_parse_log(const char *buf, size_t len, struct metricline *out)
{
	const size_t pl = sizeof(METRICLINE_PREFIX) - 1;
	const char *p = len >= pl ? memmem(buf, len, METRICLINE_PREFIX, pl) : NULL;
	size_t i;

	if (!p)
		return -1;
	i = (size_t)(p - buf) + pl;
	if (i >= len || (buf[i] != ' ' && buf[i] != '\t'))
		return -1;
	return metricline_parse_json(buf + i, len - i, out);
}
