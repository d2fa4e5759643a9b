/* auth.h — who is calling: sessions (cookie + CSRF), API tokens (Bearer),
 * roles and scopes.
 *
 * auth_request() is the http layer's authentication hook: it resolves the
 * caller with one indexed query, checks CSRF and Origin for cookie-
 * authenticated mutations, the token's scope and the route's roles, then
 * calls http_resume() or replies 401/403.  A caller who must change their
 * password (an admin reset it, or an import made the account) is refused
 * every route without ROUTE_PASSWORD_CHANGE: 403 password_change_required.
 */
#ifndef GPUCLOUD_AUTH_H
#define GPUCLOUD_AUTH_H

#include <stdint.h>
#include <jansson.h>
#include <libpq-fe.h>

#include "net/http.h"

enum auth_scope { SCOPE_READ = 1 << 0, SCOPE_WRITE = 1 << 1 };

struct auth_info {
	int64_t user_id;
	char username[40];
	char *display_name;
	char *email;
	int role; /* one ROLE_* bit */
	char created_at[40];
	int must_change_password; /* only /me, logout and the change are open (ROUTE_PASSWORD_CHANGE) */
	int64_t session_id;       /* 0 when authenticated by token */
	int64_t token_id;         /* 0 when authenticated by session */
	unsigned scopes;          /* SCOPE_* (sessions have all) */
	char csrf[64];            /* session only */
	void *ext; /* what the route's caller extension decoded (auth_caller_ext), or NULL */
	const struct auth_ext *ext_kind;
};

/* A caller extension: a route may have the caller lookup read more columns
 * in the same round trip (/me reads its quotas, usage and storage so).  auth
 * pastes cols into the lookup's select list and join into its FROM after the
 * users table (alias u) without knowing what they are; decode(res, col) gets
 * the lookup's row 0 with its first column at col and returns what hangs on
 * auth_info.ext until free_fn (NULL when it fails: the request gets 500 out of memory).
 * cols starts with a comma; join may be "".
 *
 * With version, an SQL expression over the caller (alias u) that changes in
 * the same transaction as anything cols read, the lookup reads only the
 * version, and auth keeps what decode gave per user: while the
 * caller's version is the kept one, the request gets dup(kept), a copy that
 * free_fn frees like decode's (NULL when out of memory); else cols are read
 * by a second statement, "SELECT version cols FROM users u join WHERE u.id =
 * caller" (so join may name only u).  What decode returns must depend on
 * nothing but what cols read. */
struct auth_ext {
	const char *cols;
	const char *join;
	void *(*decode)(const PGresult *res, int col);
	void (*free_fn)(void *ext);
	const char *version;
	void *(*dup)(const void *ext);
	/* auth's own: the lookups with the extension pasted in */
	char *sql_session, *sql_token, *sql_ext;
};

/* Gives route rt (an entry of a table passed to router_add) the caller
 * extension ext; both must outlive the server.  Returns 0, or -1 when out
 * of memory or when too many routes have one. */
int auth_caller_ext(const struct route *rt, struct auth_ext *ext);

/* The http auth hook. */
void auth_request(struct http_req *r);
/* Drops the versioned extensions' kept copies (at shutdown). */
void auth_cache_clear(void);
void auth_info_free(struct auth_info *a);

/* "admin" etc. <-> ROLE_* bit; -1 / NULL when unknown. */
int auth_role_parse(const char *s);
const char *auth_role_name(int role);

/* Name of the session cookie: "__Host-gc_session" under TLS, else "gc_session". */
const char *auth_cookie_name(int tls);
/* Value of the session cookie in r's Cookie header into out; 0 or -1. */
int auth_cookie_value(const struct http_req *r, char *out, size_t outlen);

/* The browser-visible user object of the caller, written into b as JSON
 * text.  Returns 0, or -1 when b could not grow. */
int auth_user_write(const struct auth_info *a, struct evbuffer *b);
/* The same object as a jansson value: new reference, NULL when out of memory. */
json_t *auth_user_json(const struct auth_info *a);

/* The client's address into out: the socket peer, or, when the peer is one
 * of trusted_proxies, the right-most X-Forwarded-For address that no trusted
 * proxy added (all of them trusted: the left-most).  Used for login
 * throttling, sessions and the audit log's "from where". */
void auth_client_addr(const struct http_req *r, char *out, size_t outlen);

/* Records an audit entry (fire and forget; failures are logged).  actor may
 * be NULL (anonymous); details is stolen and may be NULL. */
void auth_audit(const struct http_req *r, const struct auth_info *actor, const char *action,
                const char *target, json_t *details);

/* ---- passwords, off the loop ---- */

/* Checks a new password against the policy (length 8..256 bytes, not the
 * username).  Returns NULL when fine, else a message for the user. */
const char *auth_password_policy(const char *password, const char *username);

/* Writes a random 22-character password into out (>= 23 bytes). 0 or -1. */
int auth_password_generate(char *out, size_t outlen);

/* Both run on the worker lane WORKER_PASSWORD (cfg.password_workers threads,
 * cfg.password_queue jobs waiting at most), never on the general one.
 *
 * Hashes password (copied) on a worker thread with cfg.scrypt_ln; then
 * cb(arg, phc) on the loop, phc NULL on failure.  Returns 0, or -1 when the
 * pool is full (cb will not be called). */
int auth_hash_async(const char *password, void (*cb)(void *arg, const char *phc), void *arg);

/* Verifies password against phc (both copied) on a worker, and when
 * new_password is not NULL also hashes it; then cb(arg, ok, new_phc) on the
 * loop: ok 1 match, 0 mismatch, -1 error; new_phc NULL unless ok == 1 and a
 * new password was given.  A NULL phc verifies against a dummy hash (same
 * cost) and reports 0.  Returns 0 or -1 as above. */
int auth_verify_async(const char *password, const char *phc, const char *new_password,
                      void (*cb)(void *arg, int ok, const char *new_phc), void *arg);
#endif
