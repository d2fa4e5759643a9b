/* rc.c — maps enum rc to HTTP status and error code; the only such table. */
#include "base/rc.h"

static const struct {
	int status;
	const char *code;
} table[RC__COUNT] = {
	[RC_OK] = { 200, "ok" },
	[RC_NOMEM] = { 500, "out_of_memory" },
	[RC_INVALID] = { 400, "invalid" },
	[RC_UNAUTHORIZED] = { 401, "unauthorized" },
	[RC_FORBIDDEN] = { 403, "forbidden" },
	[RC_NOTFOUND] = { 404, "not_found" },
	[RC_METHOD] = { 405, "method_not_allowed" },
	[RC_CONFLICT] = { 409, "conflict" },
	[RC_TOOLARGE] = { 413, "body_too_large" },
	[RC_UNSUPPORTED] = { 415, "unsupported_media_type" },
	[RC_THROTTLED] = { 429, "throttled" },
	[RC_HEADERS] = { 431, "headers_too_large" },
	[RC_URITOOLONG] = { 414, "uri_too_long" },
	[RC_TIMEDOUT_CLIENT] = { 408, "request_timeout" },
	[RC_INSUFFICIENT_STORAGE] = { 507, "insufficient_storage" },
	[RC_UNAVAILABLE] = { 503, "unavailable" },
	[RC_TIMEOUT] = { 504, "timeout" },
	[RC_DB] = { 500, "database_error" },
	[RC_DOCKER] = { 502, "docker_error" },
	[RC_INTERNAL] = { 500, "internal" },
	[RC_PASSWORD_CHANGE] = { 403, "password_change_required" },
	[RC_EXCEEDS_QUOTA] = { 422, "exceeds_quota" },
	[RC_NEVER_FITS] = { 422, "never_fits" },
	[RC_TOO_MANY] = { 422, "too_many" },
};

int rc_http_status(enum rc rc)
{
	if ((unsigned)rc >= RC__COUNT)
		return 500;
	return table[rc].status;
}

const char *rc_code(enum rc rc)
{
	if ((unsigned)rc >= RC__COUNT)
		return "internal";
	return table[rc].code;
}
