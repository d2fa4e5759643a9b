/* rc.h — the one result enum of gpucloudd and its mapping to HTTP.
 *
 * Every fallible function returns enum rc.  The HTTP status and the
 * machine-readable error code for each value live in rc.c and nowhere else.
 */
#ifndef GPUCLOUD_RC_H
#define GPUCLOUD_RC_H

enum rc {
	RC_OK = 0,
	RC_NOMEM,                /* allocation failed                         -> 500 */
	RC_INVALID,              /* bad input the client can fix              -> 400 */
	RC_UNAUTHORIZED,         /* no or bad credentials                     -> 401 */
	RC_FORBIDDEN,            /* authenticated but not allowed             -> 403 */
	RC_NOTFOUND,             /* no such resource                          -> 404 */
	RC_METHOD,               /* path exists, method does not              -> 405 */
	RC_CONFLICT,             /* unique/state conflict                     -> 409 */
	RC_TOOLARGE,             /* body over the route's limit               -> 413 */
	RC_UNSUPPORTED,          /* unsupported media type                    -> 415 */
	RC_THROTTLED,            /* too many attempts                         -> 429 */
	RC_HEADERS,              /* header section too large                  -> 431 */
	RC_URITOOLONG,           /* request target too long                   -> 414 */
	RC_TIMEDOUT_CLIENT,      /* client too slow sending its request    -> 408 */
	RC_INSUFFICIENT_STORAGE, /* quota or disk full                -> 507 */
	RC_UNAVAILABLE,          /* a dependency (database) is down           -> 503 */
	RC_TIMEOUT,              /* a dependency did not answer in time       -> 504 */
	RC_DB,                   /* unexpected database error                 -> 500 */
	RC_DOCKER,               /* unexpected Docker engine error            -> 502 */
	RC_INTERNAL,             /* a bug                                     -> 500 */
	RC_PASSWORD_CHANGE,      /* must choose a new password first          -> 403 */
	RC_EXCEEDS_QUOTA,        /* asks more than the caller's limit allows  -> 422 */
	RC_NEVER_FITS,           /* no node could ever hold it as asked       -> 422 */
	RC_TOO_MANY,             /* more than one request may make (runs)     -> 422 */
	RC__COUNT
};

/* HTTP status for rc. */
int rc_http_status(enum rc rc);
/* Stable machine-readable code, e.g. "invalid", "not_found". Static string. */
const char *rc_code(enum rc rc);

#endif
