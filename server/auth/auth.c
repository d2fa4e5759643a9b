/* auth.c — resolving the caller of a request.
 *
 * Owns: the authentication hook (session cookie or Bearer token, one
 * indexed query each), the copies of versioned caller extensions (kept per
 * user while their version stands), CSRF and Origin checks for cookie-authenticated
 * mutations, scope and role checks, lazy last-seen updates, and audit
 * records, the client address of a request (X-Forwarded-For believed only
 * from trusted_proxies), and password hashing on its own worker lane.
 * Login, logout and password changes live in api_auth.c; this file only
 * reads credentials.
 */
#include "auth/auth.h"

#include <arpa/inet.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

#include <event2/buffer.h>
#include <http_parser.h>

#include "base/config.h"
#include "base/crypto.h"
#include "base/jsonw.h"
#include "base/log.h"
#include "db/db.h"
#include "base/worker.h"

#include <openssl/crypto.h>

static void wipe(char *s)
{
	OPENSSL_cleanse(s, strlen(s));
}

#define TOKEN_PREFIX "gct_"

static const char *const role_names[] = { "student", "researcher", "teacher", "admin" };

int auth_role_parse(const char *s)
{
	for (int i = 0; i < 4; i++)
		if (s && strcmp(s, role_names[i]) == 0)
			return 1 << i;
	return -1;
}

const char *auth_role_name(int role)
{
	for (int i = 0; i < 4; i++)
		if (role == (1 << i))
			return role_names[i];
	return NULL;
}

const char *auth_cookie_name(int tls)
{
	return tls ? "__Host-gc_session" : "gc_session";
}

int auth_cookie_value(const struct http_req *r, char *out, size_t outlen)
{
	const char *name = auth_cookie_name(r->tls);
	size_t nlen = strlen(name);

	/* several Cookie headers may arrive; look at each */
	for (int i = 0; i < r->nhdr; i++) {
		const char *p;
		if (strcasecmp(r->hdr[i].name, "Cookie") != 0)
			continue;
		p = r->hdr[i].value;
		while (p && *p) {
			const char *end;
			size_t len;
			while (*p == ' ' || *p == ';')
				p++;
			end = strchr(p, ';');
			len = end ? (size_t)(end - p) : strlen(p);
			if (len > nlen && strncmp(p, name, nlen) == 0 && p[nlen] == '=') {
				size_t vlen = len - nlen - 1;
				if (vlen + 1 > outlen)
					return -1;
				memcpy(out, p + nlen + 1, vlen);
				out[vlen] = '\0';
				return 0;
			}
			p = end;
		}
	}
	return -1;
}

void auth_info_free(struct auth_info *a)
{
	if (!a)
		return;
	free(a->display_name);
	free(a->email);
	if (a->ext && a->ext_kind)
		a->ext_kind->free_fn(a->ext);
	free(a);
}

int auth_user_write(const struct auth_info *a, struct evbuffer *b)
{
	int rc = evbuffer_add_printf(b, "{\"id\":%lld,\"username\":", (long long)a->user_id) < 0;

	rc |= jsonw_str(b, a->username);
	rc |= jsonw_lit(b, ",\"display_name\":");
	rc |= jsonw_str(b, a->display_name ? a->display_name : "");
	rc |= jsonw_lit(b, ",\"email\":");
	rc |= jsonw_str(b, a->email ? a->email : "");
	rc |= jsonw_lit(b, ",\"role\":");
	rc |= jsonw_str(b, auth_role_name(a->role));
	rc |= jsonw_lit(b, ",\"disabled\":false,\"created_at\":");
	rc |= jsonw_str(b, a->created_at);
	rc |= evbuffer_add_printf(b, ",\"must_change_password\":%s}",
	                          a->must_change_password ? "true" : "false") < 0;
	return rc ? -1 : 0;
}

json_t *auth_user_json(const struct auth_info *a)
{
	struct evbuffer *b = evbuffer_new();
	json_t *j = NULL;

	/* one writer for the object, so /me's and login's cannot drift apart */
	if (b && auth_user_write(a, b) == 0)
		j = json_loadb((const char *)evbuffer_pullup(b, -1), evbuffer_get_length(b), 0,
		               NULL);
	if (b)
		evbuffer_free(b);
	return j;
}

/* ---- the client's address ---- */

#define PROXIES_MAX 64

struct cidr {
	int family;
	unsigned char addr[16];
	int bits;
};

static struct cidr proxies[PROXIES_MAX];
static int nproxies = -1; /* -1: trusted_proxies not parsed yet */

/* "10.0.0.1", "10.0.0.0/8", "::1", "[::1]", "1.2.3.4:5678" (a port is
 * dropped) into a binary address; 0 or -1. */
static int parse_addr(const char *s, size_t len, int *family, unsigned char *addr)
{
	char buf[64];
	const char *colon;

	while (len && (*s == ' ' || *s == '\t'))
		s++, len--;
	while (len && (s[len - 1] == ' ' || s[len - 1] == '\t'))
		len--;
	if (len >= 2 && s[0] == '[') {
		const char *close = memchr(s, ']', len);
		if (!close)
			return -1;
		len = (size_t)(close - s - 1);
		s++;
	}
	if (len == 0 || len >= sizeof(buf))
		return -1;
	memcpy(buf, s, len);
	buf[len] = '\0';
	if (inet_pton(AF_INET6, buf, addr) == 1) {
		*family = AF_INET6;
		return 0;
	}
	colon = strchr(buf, ':');
	if (colon && !strchr(colon + 1, ':'))
		buf[colon - buf] = '\0'; /* IPv4 with a port */
	if (inet_pton(AF_INET, buf, addr) == 1) {
		*family = AF_INET;
		return 0;
	}
	return -1;
}

static void proxies_load(void)
{
	const char *p = cfg.trusted_proxies ? cfg.trusted_proxies : "";

	nproxies = 0;
	while (*p) {
		const char *end = strchr(p, ',');
		size_t len = end ? (size_t)(end - p) : strlen(p);
		const char *slash = memchr(p, '/', len);
		struct cidr c = { 0 };
		size_t alen = slash ? (size_t)(slash - p) : len;
		int max;

		if (len && strspn(p, " \t") < len) {
			if (parse_addr(p, alen, &c.family, c.addr) < 0) {
				log_msg(LOG_WARN, "auth", NULL,
				        "trusted_proxies: '%.*s' is not an address or CIDR; "
				        "ignored",
				        (int)len, p);
				goto next;
			}
			max = c.family == AF_INET ? 32 : 128;
			c.bits = max;
			if (slash) {
				char *e;
				long b = strtol(slash + 1, &e, 10);
				while (*e == ' ' || *e == '\t')
					e++;
				if (e == slash + 1 || (e != p + len) || b < 0 || b > max) {
					log_msg(LOG_WARN, "auth", NULL,
					        "trusted_proxies: bad prefix length in '%.*s'; "
					        "ignored",
					        (int)len, p);
					goto next;
				}
				c.bits = (int)b;
			}
			if (nproxies < PROXIES_MAX)
				proxies[nproxies++] = c;
			else
				log_msg(LOG_WARN, "auth", NULL,
				        "trusted_proxies: more than %d entries; the rest ignored",
				        PROXIES_MAX);
		}
	next:
		if (!end)
			break;
		p = end + 1;
	}
}

static int addr_in(const struct cidr *c, int family, const unsigned char *addr)
{
	int full = c->bits / 8, rest = c->bits % 8;

	if (c->family != family)
		return 0;
	if (memcmp(c->addr, addr, (size_t)full) != 0)
		return 0;
	if (rest) {
		unsigned char mask = (unsigned char)(0xff << (8 - rest));
		if ((c->addr[full] & mask) != (addr[full] & mask))
			return 0;
	}
	return 1;
}

static int trusted(int family, const unsigned char *addr)
{
	unsigned char v4[4];

	/* an IPv4-mapped IPv6 peer matches IPv4 entries */
	if (family == AF_INET6 && memcmp(addr, "\0\0\0\0\0\0\0\0\0\0\xff\xff", 12) == 0) {
		memcpy(v4, addr + 12, 4);
		if (trusted(AF_INET, v4))
			return 1;
	}
	for (int i = 0; i < nproxies; i++)
		if (addr_in(&proxies[i], family, addr))
			return 1;
	return 0;
}

void auth_client_addr(const struct http_req *r, char *out, size_t outlen)
{
	unsigned char addr[16];
	int family;
	char *xff = NULL;
	size_t len = 0;

	snprintf(out, outlen, "%s", r->peer);
	if (nproxies < 0)
		proxies_load();
	if (nproxies == 0 || parse_addr(r->peer, strlen(r->peer), &family, addr) < 0 ||
	    !trusted(family, addr))
		return;
	/* every X-Forwarded-For field, in order, as one list */
	for (int i = 0; i < r->nhdr; i++) {
		size_t n;
		char *grown;
		if (strcasecmp(r->hdr[i].name, "X-Forwarded-For") != 0)
			continue;
		n = strlen(r->hdr[i].value);
		grown = realloc(xff, len + n + 2);
		if (!grown) {
			free(xff);
			return;
		}
		xff = grown;
		if (len)
			xff[len++] = ',';
		memcpy(xff + len, r->hdr[i].value, n);
		len += n;
		xff[len] = '\0';
	}
	/* right to left: each trusted hop vouches for the one before it; the
	 * first address no trusted proxy added is the client's.  A hop that is
	 * not an address ends the walk at the last one believed. */
	while (xff && len) {
		char *start = xff + len;
		char text[INET6_ADDRSTRLEN];
		while (start > xff && start[-1] != ',')
			start--;
		if (parse_addr(start, (size_t)(xff + len - start), &family, addr) < 0)
			break;
		if (inet_ntop(family, addr, text, sizeof(text)))
			snprintf(out, outlen, "%s", text);
		if (!trusted(family, addr))
			break;
		len = start > xff ? (size_t)(start - xff - 1) : 0;
	}
	free(xff);
}

void auth_audit(const struct http_req *r, const struct auth_info *actor, const char *action,
                const char *target, json_t *details)
{
	char actor_id[24] = "", from[64] = "";
	char *d = NULL;
	const char *params[7];

	if (actor)
		snprintf(actor_id, sizeof(actor_id), "%lld", (long long)actor->user_id);
	if (!details)
		details = json_object();
	d = details ? json_dumps(details, JSON_COMPACT) : NULL;
	params[0] = actor ? actor_id : NULL;
	/* no actor and no request: the system acted by itself */
	params[1] = actor ? actor->username : r ? "" : "system";
	params[2] = action;
	params[3] = target ? target : "";
	if (r)
		auth_client_addr(r, from, sizeof(from));
	params[4] = from;
	params[5] = r ? r->reqid : "";
	params[6] = d ? d : "{}";
	db_query("INSERT INTO audit_log (actor_id, actor_name, action, target, ip, request_id, "
	         "details)"
	         " VALUES ($1, $2, $3, $4, $5, $6, $7::jsonb)",
	         7, params, db_ignore, NULL);
	log_msg(LOG_INFO, "audit", r ? r->reqid : NULL, "%s by %s target=%s", action,
	        actor ? actor->username : "-", target ? target : "");
	free(d);
	json_decref(details);
}

/* ---- the hook ---- */

#define CALLER_COLS                                           \
	" u.id, u.username, u.display_name, u.email, u.role," \
	" " DB_TS("u.created_at") ", u.must_change_password"

#define SESSION_SELECT \
	"SELECT s.id, s.csrf_token, (s.last_seen_at < now() - interval '60 seconds')," CALLER_COLS
#define SESSION_JOIN " FROM sessions s JOIN users u ON u.id = s.user_id"
#define SESSION_WHERE                                                                \
	" WHERE s.token_hash = $1 AND s.revoked_at IS NULL AND s.expires_at > now()" \
	" AND s.last_seen_at > now() - make_interval(secs => $2::int) AND NOT u.disabled"
#define TOKEN_SELECT                                   \
	"SELECT t.id, array_to_string(t.scopes, ',')," \
	" (t.last_used_at IS NULL OR t.last_used_at < now() - interval '60 seconds')," CALLER_COLS
#define TOKEN_JOIN " FROM api_tokens t JOIN users u ON u.id = t.user_id"
#define TOKEN_WHERE                                                                  \
	" WHERE t.token_hash = $1 AND t.revoked_at IS NULL AND t.expires_at > now()" \
	" AND NOT u.disabled"

static const char *const lookup_session_sql = SESSION_SELECT SESSION_JOIN SESSION_WHERE;
static const char *const lookup_token_sql = TOKEN_SELECT TOKEN_JOIN TOKEN_WHERE;
#define LOOKUP_NCOLS 10

/* Routes with a caller extension: a handful at most, so a short list. */
#define MAX_EXTS 8
static struct {
	const struct route *rt;
	struct auth_ext *ext;
} exts[MAX_EXTS];
static int nexts;

/* The lookup with ext pasted in.  A versioned extension's lookup reads only
 * its version; its columns come from sql_ext, run when this server holds no
 * copy under that version. */
static char *paste(const char *select, const char *from, const char *where,
                   const struct auth_ext *ext)
{
	char *sql = NULL;
	int n;

	if (ext->version)
		n = asprintf(&sql, "%s, %s%s%s", select, ext->version, from, where);
	else
		n = asprintf(&sql, "%s%s%s%s%s", select, ext->cols, from, ext->join, where);
	return n < 0 ? NULL : sql;
}

int auth_caller_ext(const struct route *rt, struct auth_ext *ext)
{
	if (nexts == MAX_EXTS)
		return -1;
	if (!ext->sql_session) {
		ext->sql_session = paste(SESSION_SELECT, SESSION_JOIN, SESSION_WHERE, ext);
		ext->sql_token = paste(TOKEN_SELECT, TOKEN_JOIN, TOKEN_WHERE, ext);
		if (ext->version &&
		    asprintf(&ext->sql_ext, "SELECT %s%s FROM users u%s WHERE u.id = $1",
		             ext->version, ext->cols, ext->join) < 0)
			ext->sql_ext = NULL;
		if (!ext->sql_session || !ext->sql_token || (ext->version && !ext->sql_ext)) {
			free(ext->sql_session);
			free(ext->sql_token);
			free(ext->sql_ext);
			ext->sql_session = ext->sql_token = ext->sql_ext = NULL;
			return -1;
		}
	}
	exts[nexts].rt = rt;
	exts[nexts].ext = ext;
	nexts++;
	return 0;
}

static struct auth_ext *ext_of(const struct route *rt)
{
	for (int i = 0; i < nexts; i++)
		if (exts[i].rt == rt)
			return exts[i].ext;
	return NULL;
}

static int is_safe_method(int m)
{
	return m == HTTP_GET || m == HTTP_HEAD || m == HTTP_OPTIONS;
}

/* The Origin (or Referer) of a cookie-authenticated mutation must be ours. */
static int origin_ok(const struct http_req *r)
{
	const char *origin = http_header(r, "Origin");
	const char *referer = http_header(r, "Referer");
	char expect[512];
	size_t n;

	if (http_own_origin(r->tls, http_header(r, "Host"), expect, sizeof(expect)) < 0)
		return 0;
	n = strlen(expect);
	if (origin)
		return strcmp(origin, expect) == 0;
	if (referer)
		return strncmp(referer, expect, n) == 0 &&
		       (referer[n] == '/' || referer[n] == '\0');
	return 0;
}

/* ---- the versioned extensions' copies ----
 *
 * A versioned extension's decoded columns are kept per user with the
 * version read with them (every session and token of the user shares
 * them).  The lookup
 * reads the caller's version; when it is the kept one, the request gets a
 * copy of the kept columns (ext->dup), else one more statement reads them
 * with their version in one snapshot, and they are kept.  The version moves
 * in the transaction of any write to what the extension reads, so a copy is
 * exactly what a fresh read would give, whichever replica wrote.  A slot
 * holds one user: another that lands on it replaces it. */
#define EXT_CACHE_SLOTS 1024
static struct ext_cached {
	const struct auth_ext *ext; /* NULL when the slot is free */
	int64_t user_id;
	char *version; /* what ext->version read with data */
	void *data;    /* owned: ext->free_fn frees it */
} ext_cache[EXT_CACHE_SLOTS];

static struct ext_cached *cache_slot(int64_t user_id)
{
	return &ext_cache[(uint64_t)user_id % EXT_CACHE_SLOTS];
}

/* A copy of what is kept for user_id under version (new, for free_fn), or
 * NULL when nothing is or when out of memory. */
static void *cache_get(const struct auth_ext *ext, int64_t user_id, const char *version)
{
	const struct ext_cached *c = cache_slot(user_id);

	if (c->ext != ext || c->user_id != user_id || strcmp(c->version, version) != 0)
		return NULL;
	return ext->dup(c->data);
}

/* Keeps a copy of data under user_id and version (nothing when out of
 * memory: the next lookup reads the columns again). */
static void cache_put(const struct auth_ext *ext, int64_t user_id, const char *version,
                      const void *data)
{
	struct ext_cached *c = cache_slot(user_id);
	char *v = strdup(version);
	void *d = v ? ext->dup(data) : NULL;

	if (!d) {
		free(v);
		return;
	}
	if (c->data)
		c->ext->free_fn(c->data);
	free(c->version);
	c->ext = ext;
	c->user_id = user_id;
	c->version = v;
	c->data = d;
}

void auth_cache_clear(void)
{
	for (size_t i = 0; i < EXT_CACHE_SLOTS; i++) {
		struct ext_cached *c = &ext_cache[i];
		if (c->data)
			c->ext->free_fn(c->data);
		free(c->version);
		memset(c, 0, sizeof(*c));
	}
}

/* The caller of the lookup's row; with an unversioned ext, its columns too. */
static struct auth_info *info_from_row(PGresult *res, const struct auth_ext *ext)
{
	struct auth_info *a = calloc(1, sizeof(*a));
	const char *v;

	if (!a)
		return NULL;
	a->user_id = strtoll(db_val(res, 0, 3), NULL, 10);
	snprintf(a->username, sizeof(a->username), "%s", db_val(res, 0, 4));
	a->display_name = strdup((v = db_val(res, 0, 5)) ? v : "");
	a->email = strdup((v = db_val(res, 0, 6)) ? v : "");
	a->role = auth_role_parse(db_val(res, 0, 7));
	snprintf(a->created_at, sizeof(a->created_at), "%s", (v = db_val(res, 0, 8)) ? v : "");
	a->must_change_password = (v = db_val(res, 0, 9)) && strcmp(v, "t") == 0;
	if (ext && !ext->version) {
		a->ext = ext->decode(res, LOOKUP_NCOLS);
		a->ext_kind = ext;
	}
	if (!a->display_name || !a->email || a->role < 0 || (ext && !ext->version && !a->ext)) {
		auth_info_free(a);
		return NULL;
	}
	return a;
}

/* Role, scope and CSRF checks once the caller is known. */
static void authorize(struct http_req *r)
{
	struct auth_info *a = r->auth;
	const struct route *rt = r->route;

	if (!(rt->roles & (unsigned)a->role)) {
		http_reply_error(r, RC_FORBIDDEN, NULL, "this action needs the %s role",
		                 (rt->roles & ~(unsigned)ROLE_ADMIN) ? "teacher or admin"
		                                                     : "admin");
		return;
	}
	if (a->must_change_password && !(rt->flags & ROUTE_PASSWORD_CHANGE)) {
		http_reply_error(r, RC_PASSWORD_CHANGE,
		                 "choose a new password with POST /api/v1/me/password",
		                 "you must change your password before going on");
		return;
	}
	if (a->token_id) {
		unsigned need = is_safe_method(r->method) ? SCOPE_READ : SCOPE_WRITE;
		if (!(a->scopes & need)) {
			http_reply_error(r, RC_FORBIDDEN, "create a token with the 'write' scope",
			                 "this token lacks the '%s' scope",
			                 need == SCOPE_READ ? "read" : "write");
			return;
		}
	} else if (!is_safe_method(r->method) && !(rt->flags & ROUTE_NO_CSRF)) {
		const char *t = http_header(r, "X-CSRF-Token");
		size_t n = strlen(a->csrf);
		if (!t || strlen(t) != n || !crypto_equal(t, a->csrf, n)) {
			http_reply_error(r, RC_FORBIDDEN,
			                 "send the csrf_token from login or /me in X-CSRF-Token",
			                 "missing or wrong CSRF token");
			return;
		}
		if (!origin_ok(r)) {
			http_reply_error(r, RC_FORBIDDEN, NULL,
			                 "request origin does not match this site");
			return;
		}
	}
	http_resume(r);
}

/* One caller lookup in flight: the request, the credential's hash (the
 * lookup's key) and, while a versioned extension's columns are read, the
 * caller. */
struct lookup {
	struct http_req *r;
	int token; /* Bearer token, else session cookie */
	char key[65];
	struct auth_info *a;
};

static void lookup_finish(struct lookup *l)
{
	struct http_req *r = l->r;

	r->auth = l->a;
	free(l);
	if (!http_req_alive(r))
		http_resume(r); /* frees it */
	else
		authorize(r);
}

static void ext_done(PGresult *res, enum rc rc, void *arg)
{
	struct lookup *l = arg;
	const struct auth_ext *ext = l->a->ext_kind;
	const char *version;

	if (rc != RC_OK || PQntuples(res) != 1) {
		/* the caller was found a moment ago: a failure here is the database's */
		http_reply_error(l->r, rc == RC_UNAVAILABLE ? RC_UNAVAILABLE : RC_DB,
		                 "retry in a few seconds", "cannot read the caller's data now");
		goto fail;
	}
	if (!(l->a->ext = ext->decode(res, 1))) {
		http_reply_error(l->r, RC_NOMEM, NULL, "out of memory");
		goto fail;
	}
	if ((version = db_val(res, 0, 0)))
		cache_put(ext, l->a->user_id, version, l->a->ext);
	lookup_finish(l);
	return;
fail:
	auth_info_free(l->a);
	free(l);
}

static void lookup_done(PGresult *res, enum rc rc, void *arg)
{
	struct lookup *l = arg;
	struct http_req *r = l->r;
	const struct auth_ext *ext = ext_of(r->route);
	struct auth_info *a;
	const char *p[1];

	if (rc != RC_OK) {
		http_reply_error(
		        r, rc == RC_UNAVAILABLE ? RC_UNAVAILABLE : RC_DB, "retry in a few seconds",
		        l->token ? "cannot check the token now" : "cannot check the session now");
		goto fail;
	}
	if (PQntuples(res) != 1) {
		if (l->token)
			http_reply_error(r, RC_UNAUTHORIZED, "create a new API token",
			                 "API token unknown, expired or revoked");
		else
			http_reply_error(r, RC_UNAUTHORIZED, "log in again",
			                 "session expired or revoked");
		goto fail;
	}
	if (!(a = info_from_row(res, ext))) {
		http_reply_error(r, RC_NOMEM, NULL, "out of memory");
		goto fail;
	}
	l->a = a;
	p[0] = db_val(res, 0, 0);
	if (l->token) {
		const char *scopes = db_val(res, 0, 1);
		a->token_id = strtoll(p[0], NULL, 10);
		if (strstr(scopes, "read"))
			a->scopes |= SCOPE_READ;
		if (strstr(scopes, "write"))
			a->scopes |= SCOPE_WRITE | SCOPE_READ;
	} else {
		a->session_id = strtoll(p[0], NULL, 10);
		snprintf(a->csrf, sizeof(a->csrf), "%s", db_val(res, 0, 1));
		a->scopes = SCOPE_READ | SCOPE_WRITE;
	}
	/* last seen / last used, at most once a minute */
	if (strcmp(db_val(res, 0, 2), "t") == 0)
		db_query(l->token ? "UPDATE api_tokens SET last_used_at = now() WHERE id = $1"
		                  : "UPDATE sessions SET last_seen_at = now() WHERE id = $1",
		         1, p, db_ignore, NULL);
	if (ext && ext->version) {
		const char *version = db_val(res, 0, LOOKUP_NCOLS);
		a->ext_kind = ext;
		if (!version || !(a->ext = cache_get(ext, a->user_id, version))) {
			char id[24];
			const char *q[1] = { id };
			if (!http_req_alive(r)) {
				lookup_finish(l); /* frees it */
				return;
			}
			snprintf(id, sizeof(id), "%lld", (long long)a->user_id);
			db_query_kept(ext->sql_ext, 1, q, ext_done, l);
			return; /* l handed on */
		}
	}
	lookup_finish(l);
	return;
fail:
	free(l);
}

void auth_request(struct http_req *r)
{
	const char *authz = http_header(r, "Authorization");
	char cookie[128], idle[24];
	const char *params[2];
	const struct auth_ext *ext = ext_of(r->route);
	struct lookup *l = calloc(1, sizeof(*l));

	if (!l) {
		http_reply_error(r, RC_NOMEM, NULL, "out of memory");
		return;
	}
	l->r = r;
	if (authz) {
		const char *tok;
		if (strncasecmp(authz, "Bearer ", 7) != 0) {
			http_reply_error(r, RC_UNAUTHORIZED, "send 'Authorization: Bearer <token>'",
			                 "unsupported authorization scheme");
			goto fail;
		}
		tok = authz + 7;
		while (*tok == ' ')
			tok++;
		if (strncmp(tok, TOKEN_PREFIX, strlen(TOKEN_PREFIX)) != 0 || strlen(tok) > 100) {
			http_reply_error(r, RC_UNAUTHORIZED, NULL, "malformed API token");
			goto fail;
		}
		l->token = 1;
		crypto_sha256_hex(tok, strlen(tok), l->key);
		params[0] = l->key;
		db_query_kept(ext ? ext->sql_token : lookup_token_sql, 1, params, lookup_done, l);
		return;
	}
	if (auth_cookie_value(r, cookie, sizeof(cookie)) < 0 || !*cookie) {
		http_reply_error(r, RC_UNAUTHORIZED, "log in first", "authentication required");
		goto fail;
	}
	crypto_sha256_hex(cookie, strlen(cookie), l->key);
	snprintf(idle, sizeof(idle), "%d", cfg.session_idle_timeout);
	params[0] = l->key;
	params[1] = idle;
	db_query_kept(ext ? ext->sql_session : lookup_session_sql, 2, params, lookup_done, l);
	return;
fail:
	free(l);
}

/* ---- passwords, off the loop ---- */

/* A well-formed hash with the configured cost: verifying against it costs
 * the same as a real one, so unknown usernames cannot be told apart by
 * time. */
static void dummy_phc(char *out, size_t len)
{
	snprintf(out, len,
	         "$scrypt$ln=%d,r=8,p=1$c2FsdHNhbHRzYWx0c2FsdA$"
	         "ZHVtbXlkdW1teWR1bW15ZHVtbXlkdW1teWR1bW15ZHU",
	         cfg.scrypt_ln);
}

const char *auth_password_policy(const char *password, const char *username)
{
	size_t n = strlen(password);

	if (n < 8)
		return "password must be at least 8 characters";
	if (n > 256)
		return "password must be at most 256 bytes";
	if (username && strcmp(password, username) == 0)
		return "password must differ from the username";
	return NULL;
}

int auth_password_generate(char *out, size_t outlen)
{
	return crypto_token(out, outlen, 16);
}

struct pwjob {
	char *password;
	char *phc;
	char *new_password;
	int ok;
	char out[CRYPTO_PHC_MAX];
	char new_phc[CRYPTO_PHC_MAX];
	int ln;
	void (*hash_cb)(void *arg, const char *phc);
	void (*verify_cb)(void *arg, int ok, const char *new_phc);
	void *arg;
};

static void pwjob_free(struct pwjob *j)
{
	if (!j)
		return;
	if (j->password)
		wipe(j->password);
	if (j->new_password)
		wipe(j->new_password);
	free(j->password);
	free(j->phc);
	free(j->new_password);
	free(j);
}

/* Password work has a lane of its own (threads and a bounded queue), so a
 * login flood cannot take the threads file listings and quota scans need;
 * it starts with the first password to check. */
static int submit_password(void (*work)(void *), void (*done)(void *), void *arg)
{
	if (worker_lane_init(WORKER_PASSWORD, cfg.password_workers, cfg.password_queue) < 0)
		return -1;
	return worker_submit_lane(WORKER_PASSWORD, work, done, arg);
}

static void hash_work(void *arg)
{
	struct pwjob *j = arg;

	j->ok = crypto_password_hash(j->password, j->ln, j->out, sizeof(j->out)) == 0;
}

static void hash_done(void *arg)
{
	struct pwjob *j = arg;

	j->hash_cb(j->arg, j->ok ? j->out : NULL);
	pwjob_free(j);
}

int auth_hash_async(const char *password, void (*cb)(void *arg, const char *phc), void *arg)
{
	struct pwjob *j = calloc(1, sizeof(*j));

	if (!j || !(j->password = strdup(password))) {
		pwjob_free(j);
		return -1;
	}
	j->ln = cfg.scrypt_ln;
	j->hash_cb = cb;
	j->arg = arg;
	if (submit_password(hash_work, hash_done, j) < 0) {
		pwjob_free(j);
		return -1;
	}
	return 0;
}

static void verify_work(void *arg)
{
	struct pwjob *j = arg;

	char dummy[CRYPTO_PHC_MAX];

	dummy_phc(dummy, sizeof(dummy));
	j->ok = crypto_password_verify(j->password, j->phc ? j->phc : dummy);
	if (!j->phc && j->ok == 1)
		j->ok = 0;
	if (j->ok == 1 && j->new_password &&
	    crypto_password_hash(j->new_password, j->ln, j->new_phc, sizeof(j->new_phc)) < 0)
		j->ok = -1;
}

static void verify_done(void *arg)
{
	struct pwjob *j = arg;

	j->verify_cb(j->arg, j->ok, j->ok == 1 && j->new_password ? j->new_phc : NULL);
	pwjob_free(j);
}

int auth_verify_async(const char *password, const char *phc, const char *new_password,
                      void (*cb)(void *arg, int ok, const char *new_phc), void *arg)
{
	struct pwjob *j = calloc(1, sizeof(*j));

	if (!j || !(j->password = strdup(password)) || (phc && !(j->phc = strdup(phc))) ||
	    (new_password && !(j->new_password = strdup(new_password)))) {
		pwjob_free(j);
		return -1;
	}
	j->ln = cfg.scrypt_ln;
	j->verify_cb = cb;
	j->arg = arg;
	if (submit_password(verify_work, verify_done, j) < 0) {
		pwjob_free(j);
		return -1;
	}
	return 0;
}
