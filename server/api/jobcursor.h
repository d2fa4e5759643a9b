/* jobcursor.h — the jobs list's page cursor: where a page ends in the
 * order it was asked for, as (sort key, id).
 *
 * Clients treat it as opaque.  Its text is "<sort><dir>.<id>.<key>":
 * sort one of c s f n r (created, started, finished, name, runtime), dir a
 * or d, id the last job shown, key that job's sort key — microseconds (a
 * signed decimal) for times and runtimes, the name for name.  A cursor of
 * digits only is the id of a created-descending page (what the list gave
 * before it had sorts).  Pure: no allocation, no I/O (fuzzed alone).
 */
#ifndef GPUCLOUD_JOBCURSOR_H
#define GPUCLOUD_JOBCURSOR_H

#include <stddef.h>

#define JOBCURSOR_KEY_MAX 64 /* key bytes (a job name is at most 63) */

struct jobcursor {
	char sort; /* 'c', 's', 'f', 'n' or 'r' */
	char dir;  /* 'a' or 'd' */
	long long id;
	char key[JOBCURSOR_KEY_MAX + 1]; /* "" for created */
};

/* Parses s[0..len).  Returns 0 with *c set, or -1 when it is not a cursor
 * this module writes: an id of 1 to 18 digits, or the form above with a key
 * of the sort's shape (a decimal of at most 19 digits, or a job name);
 * numbers without leading zeros, so a cursor has one spelling. */
int jobcursor_parse(const char *s, size_t len, struct jobcursor *c);

/* Writes c as text into out (NUL-terminated).  Returns the length, or -1
 * when outlen is too small. */
int jobcursor_format(const struct jobcursor *c, char *out, size_t outlen);

#endif
