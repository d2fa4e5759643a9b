/* metricline.h — the scalars a job reports, one line at a time (pure).
 *
 * A job reports scalars with lines like
 *     GPUCLOUD_METRIC {"step": 10, "loss": 0.42, "val/acc": 0.9}
 * in its log (stdout or stderr), or lines holding just the object in
 * metrics.jsonl in its job directory.  The object is flat: "step" (a
 * whole number from 0 to 2^53 - 1, optional) and up to METRICLINE_MAX_VALUES
 * named numbers, each name of [A-Za-z0-9_./-]{1,64}.  A line with anything
 * else — a nested value, a string, NaN or an infinity (as text, or a
 * number too large for a double), a number beyond ±1e300, a name twice,
 * trailing bytes — is rejected whole: it is not a metric line.
 * No allocation, no I/O: small enough to fuzz alone.
 */
#ifndef GPUCLOUD_METRICLINE_H
#define GPUCLOUD_METRICLINE_H

#include <stddef.h>

#define METRICLINE_MAX_VALUES 32
#define METRICLINE_NAME_MAX   64
#define METRICLINE_PREFIX     "GPUCLOUD_METRIC"
/* the largest step: every one stays exact in a double (the web's numbers) */
#define METRICLINE_STEP_MAX 9007199254740991LL
/* the largest magnitude a value may have */
#define METRICLINE_VALUE_MAX 1e300

struct metricline {
	int has_step;
	long long step;
	int n; /* values */
	struct {
		char name[METRICLINE_NAME_MAX + 1];
		double value;
	} v[METRICLINE_MAX_VALUES];
};

/* Parses buf[0..len) as one metric object (surrounding blanks and a final
 * "\r\n" or "\n" allowed).  Returns the number of values (1 or more) with
 * *out filled, or -1 when it is not a metric object (*out undefined). */
int metricline_parse_json(const char *buf, size_t len, struct metricline *out);

/* Parses one log line: the object after METRICLINE_PREFIX and one or more
 * blanks, wherever the prefix is on the line (a logger may put a time
 * before it).  Returns as metricline_parse_json(); -1 also when the line
 * has no prefix. */
int metricline_parse_log(const char *buf, size_t len, struct metricline *out);

#endif
