/* log.c — structured log lines (logfmt) on stderr.
 *
 * Owns the level filter and the line format; does not know about requests
 * beyond the id string it is handed.  One write(2) per line so lines from
 * worker threads never interleave.
 */
#include "base/log.h"

#include <stdio.h>
#include <string.h>
#include <sys/time.h>
#include <time.h>
#include <unistd.h>

static enum log_level min_level = LOG_INFO;
static const char *const names[] = { "debug", "info", "warn", "error" };

void log_set_level(enum log_level level)
{
	min_level = level;
}

int log_level_parse(const char *s)
{
	for (size_t i = 0; i < sizeof(names) / sizeof(names[0]); i++)
		if (strcmp(s, names[i]) == 0)
			return (int)i;
	return -1;
}

/* Appends s to buf as a logfmt quoted value; returns the new length. */
static size_t put_quoted(char *buf, size_t n, size_t cap, const char *s)
{
	if (n < cap)
		buf[n++] = '"';
	for (; *s && n + 2 < cap; s++) {
		unsigned char c = (unsigned char)*s;
		if (c == '"' || c == '\\') {
			buf[n++] = '\\';
			buf[n++] = (char)c;
		} else if (c == '\n') {
			buf[n++] = '\\';
			buf[n++] = 'n';
		} else if (c < 0x20 || c == 0x7f) {
			buf[n++] = '?';
		} else {
			buf[n++] = (char)c;
		}
	}
	if (n < cap)
		buf[n++] = '"';
	return n;
}

void log_vmsg(enum log_level level, const char *module, const char *reqid, const char *fmt,
              va_list ap)
{
	char msg[2048], line[4096];
	struct timeval tv;
	struct tm tm;
	size_t n;
	int k;

	if (level < min_level)
		return;
	gettimeofday(&tv, NULL);
	gmtime_r(&tv.tv_sec, &tm);
	vsnprintf(msg, sizeof(msg), fmt, ap);
	k = snprintf(line, sizeof(line),
	             "ts=%04d-%02d-%02dT%02d:%02d:%02d.%03dZ level=%s module=%s", tm.tm_year + 1900,
	             tm.tm_mon + 1, tm.tm_mday, tm.tm_hour, tm.tm_min, tm.tm_sec,
	             (int)(tv.tv_usec / 1000), names[level], module ? module : "-");
	n = k < 0 ? 0 : (size_t)k;
	if (reqid && *reqid && n < sizeof(line)) {
		k = snprintf(line + n, sizeof(line) - n, " req=%s", reqid);
		n += k < 0 ? 0 : (size_t)k;
	}
	if (n + 5 < sizeof(line)) {
		memcpy(line + n, " msg=", 5);
		n += 5;
	}
	n = put_quoted(line, n, sizeof(line) - 1, msg);
	line[n++] = '\n';
	if (write(STDERR_FILENO, line, n) < 0) {
		/* nowhere left to report it */
	}
}

void log_msg(enum log_level level, const char *module, const char *reqid, const char *fmt, ...)
{
	va_list ap;

	va_start(ap, fmt);
	log_vmsg(level, module, reqid, fmt, ap);
	va_end(ap);
}
