/* api_auth.c — /auth/login, /auth/logout, /me and /me/password.
 *
 * Owns login throttling (per account in the database, per client address in
 * memory), session creation and rotation, and password changes.  Resolving
 * an existing session or token is auth.c's job.
 */
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include <http_parser.h>

#include "api.h"
#include "auth.h"
#include "config.h"
#include "crypto.h"
#include "db.h"
#include "files.h"
#include "log.h"

/* ---- per-address throttling ---- */

#define IP_SLOTS  4096
#define IP_FACTOR 10 /* an address (a classroom behind NAT) gets 10x an account's free failures */

struct ip_slot {
	char ip[64];
	int fails;
	time_t last;
};

static struct ip_slot ip_table[IP_SLOTS];

static unsigned ip_hash(const char *s)
{
	unsigned h = 2166136261u;

	for (; *s; s++)
		h = (h ^ (unsigned char)*s) * 16777619u;
	return h;
}

/* The slot for ip; an old slot is reused when the table is crowded. */
static struct ip_slot *ip_slot(const char *ip, int create)
{
	unsigned h = ip_hash(ip);
	struct ip_slot *victim = NULL;
	time_t now = time(NULL);

	for (int i = 0; i < 8; i++) {
		struct ip_slot *s = &ip_table[(h + (unsigned)i) % IP_SLOTS];
		if (strcmp(s->ip, ip) == 0) {
			if (now - s->last > 3600)
				s->fails = 0;
			return s;
		}
		if (!victim || s->last < victim->last)
			victim = s;
	}
	if (!create)
		return NULL;
	snprintf(victim->ip, sizeof(victim->ip), "%s", ip);
	victim->fails = 0;
	victim->last = now;
	return victim;
}

/* Seconds to wait after n failures with free failures allowed. */
static int backoff(int n, int free_failures)
{
	int over = n - free_failures;

	if (over < 0)
		return 0;
	if (over > 12)
		return cfg.login_max_delay;
	return (1 << over) < cfg.login_max_delay ? (1 << over) : cfg.login_max_delay;
}

static int ip_wait(const char *ip)
{
	struct ip_slot *s = ip_slot(ip, 0);
	long wait;

	if (!s)
		return 0;
	wait = (long)s->last + backoff(s->fails, cfg.login_free_failures * IP_FACTOR) - time(NULL);
	return wait > 0 ? (int)wait : 0;
}

static void ip_failed(const char *ip)
{
	struct ip_slot *s = ip_slot(ip, 1);

	s->fails++;
	s->last = time(NULL);
}

static void reply_throttled(struct http_req *r, int seconds)
{
	char buf[16];

	snprintf(buf, sizeof(buf), "%d", seconds < 1 ? 1 : seconds);
	http_add_header(r, "Retry-After", buf);
	http_reply_error(r, RC_THROTTLED, "wait before trying again",
	                 "too many failed logins; try again in %s seconds", buf);
}

/* ---- login ---- */

struct login {
	struct http_req *r;
	json_t *body;
	int found;
	int disabled;
	char user_id[24];
	char session_token[64];
	char csrf[64];
	struct auth_info info;
};

static void login_free(void *p)
{
	struct login *l = p;

	json_decref(l->body);
	free(l->info.display_name);
	free(l->info.email);
	free(l);
}

static const char *body_str(json_t *body, const char *name)
{
	const char *s = json_string_value(json_object_get(body, name));
	return s ? s : "";
}

static void set_session_cookie(struct http_req *r, const char *value, int max_age)
{
	char buf[256];

	snprintf(buf, sizeof(buf), "%s=%s; Path=/; Max-Age=%d; HttpOnly; SameSite=Lax%s",
	         auth_cookie_name(r->tls), value, max_age, r->tls ? "; Secure" : "");
	http_add_header(r, "Set-Cookie", buf);
}

static void login_session_done(PGresult *res, enum rc rc, void *arg)
{
	struct login *l = arg;
	struct http_req *r = l->r;
	json_t *out;

	(void)res;
	if (rc != RC_OK) {
		api_reply_db_error(r, rc, "could not create a session");
		return;
	}
	set_session_cookie(r, l->session_token, cfg.session_max_age);
	out = json_pack("{s:o, s:s}", "user", auth_user_json(&l->info), "csrf_token", l->csrf);
	auth_audit(r, &l->info, "login.success", l->info.username, NULL);
	http_reply_json(r, 200, out);
}

static void login_failed_done(PGresult *res, enum rc rc, void *arg)
{
	struct login *l = arg;

	(void)res;
	(void)rc;
	http_reply_error(l->r, RC_UNAUTHORIZED, "check the username and password",
	                 "invalid username or password");
}

static void login_verified(void *arg, int ok, const char *new_phc)
{
	struct login *l = arg;
	struct http_req *r = l->r;
	char hash[65], ttl[24], old[128];
	const char *p[6];

	(void)new_phc;
	if (ok < 0) {
		http_reply_error(r, RC_INTERNAL, NULL,
		                 "stored password hash is unusable; ask an admin to reset it");
		return;
	}
	if (ok == 0) {
		json_t *d = json_pack("{s:s}", "username", body_str(l->body, "username"));
		ip_failed(r->peer);
		auth_audit(r, NULL, "login.failure", body_str(l->body, "username"), d);
		if (!l->found) {
			login_failed_done(NULL, RC_OK, l);
			return;
		}
		char freef[16], maxd[16];
		snprintf(freef, sizeof(freef), "%d", cfg.login_free_failures);
		snprintf(maxd, sizeof(maxd), "%d", cfg.login_max_delay);
		p[0] = l->user_id;
		p[1] = freef;
		p[2] = maxd;
		/* failures older than an hour are forgotten; past the free ones each
		 * failure doubles the wait, capped, so an account sees at most
		 * free + 3600/max_delay attempts an hour */
		db_query("UPDATE users SET"
		         " failed_logins = CASE WHEN last_failed_at < now() - interval '1 hour'"
		         "  THEN 1 ELSE failed_logins + 1 END,"
		         " last_failed_at = now(),"
		         " locked_until = CASE WHEN (CASE WHEN last_failed_at < now() - interval "
		         "'1 hour'"
		         "  THEN 1 ELSE failed_logins + 1 END) >= $2::int"
		         "  THEN now() + make_interval(secs => least(power(2, least((CASE WHEN "
		         "last_failed_at <"
		         "  now() - interval '1 hour' THEN 1 ELSE failed_logins + 1 END) - "
		         "$2::int, 20)), $3::int))"
		         "  ELSE NULL END"
		         " WHERE id = $1",
		         3, p, login_failed_done, l);
		return;
	}
	if (l->disabled) {
		auth_audit(r, &l->info, "login.disabled", l->info.username, NULL);
		http_reply_error(r, RC_FORBIDDEN, "ask an administrator to enable it",
		                 "this account is disabled");
		return;
	}
	if (crypto_token(l->session_token, sizeof(l->session_token), 32) < 0 ||
	    crypto_token(l->csrf, sizeof(l->csrf), 32) < 0) {
		http_reply_error(r, RC_INTERNAL, NULL, "no randomness available");
		return;
	}
	/* rotation: a session presented with the login is ended */
	if (auth_cookie_value(r, old, sizeof(old)) == 0 && *old) {
		char oldhash[65];
		const char *q[1] = { oldhash };
		crypto_sha256_hex(old, strlen(old), oldhash);
		db_query("UPDATE sessions SET revoked_at = now() WHERE token_hash = $1 AND "
		         "revoked_at IS NULL",
		         1, q, api_db_ignore, NULL);
	}
	crypto_sha256_hex(l->session_token, strlen(l->session_token), hash);
	snprintf(ttl, sizeof(ttl), "%d", cfg.session_max_age);
	p[0] = l->user_id;
	p[1] = hash;
	p[2] = l->csrf;
	p[3] = r->peer;
	p[4] = http_header(r, "User-Agent") ? http_header(r, "User-Agent") : "";
	p[5] = ttl;
	db_query("WITH reset AS (UPDATE users SET failed_logins = 0, locked_until = NULL"
	         "  WHERE id = $1 AND (failed_logins <> 0 OR locked_until IS NOT NULL))"
	         " INSERT INTO sessions (user_id, token_hash, csrf_token, ip, user_agent, "
	         "expires_at)"
	         " VALUES ($1, $2, $3, $4, left($5, 200), now() + make_interval(secs => $6::int))",
	         6, p, login_session_done, l);
}

static void login_user_done(PGresult *res, enum rc rc, void *arg)
{
	struct login *l = arg;
	struct http_req *r = l->r;
	const char *phc = NULL;
	const char *v;

	if (rc != RC_OK) {
		api_reply_db_error(r, rc, "");
		return;
	}
	if (PQntuples(res) == 1) {
		int wait = (int)strtol(db_val(res, 0, 3), NULL, 10);
		if (wait > 0) {
			reply_throttled(r, wait);
			return;
		}
		l->found = 1;
		snprintf(l->user_id, sizeof(l->user_id), "%s", db_val(res, 0, 0));
		phc = db_val(res, 0, 1);
		l->disabled = strcmp(db_val(res, 0, 2), "t") == 0;
		l->info.user_id = strtoll(l->user_id, NULL, 10);
		snprintf(l->info.username, sizeof(l->info.username), "%s", db_val(res, 0, 7));
		l->info.display_name = strdup((v = db_val(res, 0, 4)) ? v : "");
		l->info.email = strdup((v = db_val(res, 0, 5)) ? v : "");
		l->info.role = auth_role_parse(db_val(res, 0, 6));
		snprintf(l->info.created_at, sizeof(l->info.created_at), "%s", db_val(res, 0, 8));
		if (!l->info.display_name || !l->info.email) {
			http_reply_error(r, RC_NOMEM, NULL, "out of memory");
			return;
		}
	}
	if (auth_verify_async(body_str(l->body, "password"), phc, NULL, login_verified, l) < 0)
		http_reply_error(r, RC_UNAVAILABLE, "retry in a few seconds",
		                 "too many logins in progress");
}

static const struct jfield login_spec[] = {
	{ "username", J_STRING, 1, 64 },
	{ "password", J_STRING, 1, 1024 },
	{ NULL, 0, 0, 0 },
};

static void login(struct http_req *r)
{
	struct login *l;
	json_t *body = api_json_body(r, login_spec);
	const char *p[1];
	int wait;

	if (!body)
		return;
	wait = ip_wait(r->peer);
	if (wait > 0) {
		json_decref(body);
		reply_throttled(r, wait);
		return;
	}
	l = api_state(r, sizeof(*l), login_free);
	if (!l) {
		json_decref(body);
		return;
	}
	l->r = r;
	l->body = body;
	p[0] = body_str(body, "username");
	db_query("SELECT id, password_hash, disabled,"
	         " CASE WHEN locked_until > now() THEN ceil(extract(epoch FROM locked_until - "
	         "now()))::int"
	         "  ELSE 0 END,"
	         " display_name, email, role, username,"
	         " to_char(created_at AT TIME ZONE 'UTC', 'YYYY-MM-DD\"T\"HH24:MI:SS\"Z\"')"
	         " FROM users WHERE username = lower($1)",
	         1, p, login_user_done, l);
}

/* ---- logout ---- */

static void logout_done(PGresult *res, enum rc rc, void *arg)
{
	struct http_req *r = arg;

	(void)res;
	if (rc != RC_OK) {
		api_reply_db_error(r, rc, "");
		return;
	}
	set_session_cookie(r, "", 0);
	http_reply(r, 204, NULL, NULL, 0);
}

static void logout(struct http_req *r)
{
	char id[24];
	const char *p[1] = { id };

	if (!r->auth->session_id) {
		http_reply_error(r, RC_INVALID, "revoke the token with DELETE /api/v1/tokens/{id}",
		                 "logout ends browser sessions; this request used an API token");
		return;
	}
	snprintf(id, sizeof(id), "%lld", (long long)r->auth->session_id);
	auth_audit(r, r->auth, "logout", r->auth->username, NULL);
	db_query("UPDATE sessions SET revoked_at = now() WHERE id = $1", 1, p, logout_done, r);
}

/* ---- me ---- */

/* Who I am, my quotas per pool, and what I use: slices held now,
 * allocated GPU-seconds over the last 7 days and my home's storage, all read
 * by the caller lookup (the route has ROUTE_USAGE): one query per /me. */
static void me(struct http_req *r)
{
	struct auth_info *a = r->auth;
	json_t *quotas = json_object(), *usage = json_object(), *out, *rows, *row;
	size_t i;

	/* no pool at all (admins, new users) reads "[]": nothing to parse */
	rows = a->usage_json && strcmp(a->usage_json, "[]") != 0
	               ? json_loads(a->usage_json, 0, NULL)
	               : NULL;
	json_array_foreach(rows, i, row)
	{
		const char *pool = json_string_value(json_object_get(row, "pool"));
		json_t *q = json_object_get(row, "quota");
		if (!pool)
			continue;
		if (json_is_object(q))
			json_object_set(quotas, pool, q);
		json_object_set_new(
		        usage, pool,
		        json_pack("{s:O, s:f}", "slices_in_use",
		                  json_object_get(row, "slices_in_use"), "gpu_seconds_7d",
		                  json_number_value(json_object_get(row, "gpu_seconds_7d"))));
	}
	json_decref(rows);
	out = json_pack("{s:o, s:s, s:o, s:o}", "user", auth_user_json(a), "auth",
	                a->session_id ? "session" : "token", "quotas", quotas, "usage", usage);
	if (out && a->session_id)
		json_object_set_new(out, "csrf_token", json_string(a->csrf));
	if (out && a->token_id) {
		json_t *sc = json_array();
		if (a->scopes & SCOPE_READ)
			json_array_append_new(sc, json_string("read"));
		if (a->scopes & SCOPE_WRITE)
			json_array_append_new(sc, json_string("write"));
		json_object_set_new(out, "scopes", sc);
	}
	if (a->storage_missing)
		files_me_home_create(a->user_id);
	if (!out) {
		http_reply_error(r, RC_NOMEM, NULL, "out of memory");
		return;
	}
	/* read with the lookup too: no second round trip */
	json_object_set_new(out, "storage", a->storage ? json_incref(a->storage) : json_null());
	http_reply_json(r, 200, out);
}

/* ---- password change ---- */

struct pwchange {
	struct http_req *r;
	json_t *body;
};

static void pwchange_free(void *p)
{
	struct pwchange *c = p;

	json_decref(c->body);
	free(c);
}

static void pwchange_saved(PGresult *res, enum rc rc, void *arg)
{
	struct pwchange *c = arg;

	(void)res;
	if (rc != RC_OK) {
		api_reply_db_error(c->r, rc, "");
		return;
	}
	auth_audit(c->r, c->r->auth, "password.change", c->r->auth->username, NULL);
	http_reply(c->r, 204, NULL, NULL, 0);
}

static void pwchange_verified(void *arg, int ok, const char *new_phc)
{
	struct pwchange *c = arg;
	char uid[24], sid[24];
	const char *p[3] = { uid, new_phc, sid };

	if (ok != 1 || !new_phc) {
		if (ok == 0)
			http_reply_error(c->r, RC_FORBIDDEN, NULL, "current password is wrong");
		else
			http_reply_error(c->r, RC_INTERNAL, NULL,
			                 "could not hash the new password");
		return;
	}
	snprintf(uid, sizeof(uid), "%lld", (long long)c->r->auth->user_id);
	snprintf(sid, sizeof(sid), "%lld", (long long)c->r->auth->session_id);
	/* other sessions end: whoever knew the old password is logged out */
	db_query("WITH s AS (UPDATE sessions SET revoked_at = now()"
	         "  WHERE user_id = $1 AND id <> $3 AND revoked_at IS NULL)"
	         " UPDATE users SET password_hash = $2, password_changed_at = now(), updated_at = "
	         "now()"
	         " WHERE id = $1",
	         3, p, pwchange_saved, c);
}

static void pwchange_loaded(PGresult *res, enum rc rc, void *arg)
{
	struct pwchange *c = arg;

	if (rc != RC_OK || PQntuples(res) != 1) {
		api_reply_db_error(c->r, rc == RC_OK ? RC_DB : rc, "");
		return;
	}
	if (auth_verify_async(body_str(c->body, "current_password"), db_val(res, 0, 0),
	                      body_str(c->body, "new_password"), pwchange_verified, c) < 0)
		http_reply_error(c->r, RC_UNAVAILABLE, "retry in a few seconds", "server busy");
}

static const struct jfield pwchange_spec[] = {
	{ "current_password", J_STRING, 1, 1024 },
	{ "new_password", J_STRING, 1, 1024 },
	{ NULL, 0, 0, 0 },
};

static void password_change(struct http_req *r)
{
	json_t *body = api_json_body(r, pwchange_spec);
	struct pwchange *c;
	const char *why;
	char uid[24];
	const char *p[1] = { uid };

	if (!body)
		return;
	why = auth_password_policy(body_str(body, "new_password"), r->auth->username);
	if (why) {
		json_decref(body);
		http_reply_error(r, RC_INVALID, NULL, "%s", why);
		return;
	}
	if (!r->auth->session_id) {
		json_decref(body);
		http_reply_error(r, RC_FORBIDDEN, "change your password from a browser session",
		                 "API tokens cannot change passwords");
		return;
	}
	c = api_state(r, sizeof(*c), pwchange_free);
	if (!c) {
		json_decref(body);
		return;
	}
	c->r = r;
	c->body = body;
	snprintf(uid, sizeof(uid), "%lld", (long long)r->auth->user_id);
	db_query("SELECT password_hash FROM users WHERE id = $1", 1, p, pwchange_loaded, c);
}

const struct route api_auth_routes[] = {
	{ HTTP_POST, "/api/v1/auth/login", login, ROLES_PUBLIC, ROUTE_NO_CSRF, 8192, NULL },
	{ HTTP_POST, "/api/v1/auth/logout", logout, ROLES_ALL, 0, 0, NULL },
	{ HTTP_GET, "/api/v1/me", me, ROLES_ALL, ROUTE_USAGE, 0, NULL },
	{ HTTP_POST, "/api/v1/me/password", password_change, ROLES_ALL, 0, 8192, NULL },
	{ 0, NULL, NULL, 0, 0, 0, NULL },
};
