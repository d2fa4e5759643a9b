/* log.h — levelled, structured (logfmt) logging.
 *
 * One line per event on stderr:
 *   ts=2026-11-30T00:00:00.123Z level=info module=http req=4f2a.. msg="..." k=v
 * The request id is optional.  Secrets are never passed to these functions;
 * log_kv_secret() exists so call sites can say "present" without the value.
 */
#ifndef GPUCLOUD_LOG_H
#define GPUCLOUD_LOG_H

#include <stdarg.h>

enum log_level { LOG_DEBUG = 0, LOG_INFO, LOG_WARN, LOG_ERROR };

void log_set_level(enum log_level level);
/* Parses "debug", "info", "warn", "error"; returns -1 on anything else. */
int log_level_parse(const char *s);

/* msg is a printf format; the result is quoted and escaped.  reqid may be NULL. */
void log_msg(enum log_level level, const char *module, const char *reqid, const char *fmt, ...)
        __attribute__((format(printf, 4, 5)));
void log_vmsg(enum log_level level, const char *module, const char *reqid, const char *fmt,
              va_list ap);

#define LOG_D(mod, ...) log_msg(LOG_DEBUG, mod, NULL, __VA_ARGS__)
#define LOG_I(mod, ...) log_msg(LOG_INFO, mod, NULL, __VA_ARGS__)
#define LOG_W(mod, ...) log_msg(LOG_WARN, mod, NULL, __VA_ARGS__)
#define LOG_E(mod, ...) log_msg(LOG_ERROR, mod, NULL, __VA_ARGS__)

#endif
