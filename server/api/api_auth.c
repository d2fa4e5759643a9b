/* api_auth.c — /auth/login, /auth/logout, /me and /me/password.
 *
 * Owns login throttling, session creation and rotation, and password
 * changes.  Resolving an existing session or token is auth.c's job.
 *
 * Login throttling.  Every attempt is reserved before its password is
 * hashed, so attempts in flight count as much as finished ones, and one
 * that is refused costs no hash (429 with Retry-After):
 *
 *  - per (account, client address) pair, in the database (login_reserve()
 *    and login_settle() in 0014_login_throttle.sql): one attempt verified at
 *    a time; after login_free_failures failures each failure doubles the
 *    wait, up to login_max_delay seconds; a success clears the pair.  This
 *    is the backoff someone guessing sees, and only their own address gets
 *    it: a flood from one address does not stop the owner elsewhere.
 *  - per account and hour, in the database: login_account_failures attempts
 *    from all addresses together.  Once they are spent, two reserves of
 *    login_reserve_failures each remain, one for addresses this account
 *    logged in from in the last 30 days (a known address: the owner's own
 *    failures are all that can shut it out), one for addresses that have not
 *    failed at this account in the hour (the owner on a new network).  Every
 *    reserved attempt is charged; a successful one is refunded.  So an
 *    account sees at most account + 2 x reserve verified failures an hour
 *    (90 by default; the settings cap it at 100), whatever the number of
 *    replicas or concurrent requests.
 *  - per client address, in memory (each replica): 10x login_free_failures
 *    failures on any accounts (a classroom behind NAT) before the same
 *    doubling backoff; attempts under way count as failures, so concurrent
 *    ones beyond that are refused too.  Unknown usernames meet only this.
 *  - at most login_queue logins wait for a password thread (503 beyond);
 *    password hashing has its own worker lane, so a flood cannot stall file
 *    work.
 *
 * The client address is auth_client_addr(): X-Forwarded-For counts only
 * from trusted_proxies.  A disabled account answers exactly as a wrong
 * password does (401), and the attempt is audited as login.disabled.
 */
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include <event2/buffer.h>
#include <http_parser.h>

#include "api/api.h"
#include "auth/auth.h"
#include "base/config.h"
#include "base/crypto.h"
#include "base/jsonw.h"
#include "db/db.h"
#include "storage/areas.h"
#include "base/log.h"
#include "base/worker.h"

/* ---- per-address throttling ---- */

#define IP_SLOTS  4096
#define IP_FACTOR 10 /* an address (a classroom behind NAT) gets 10x an account's free failures */

struct ip_slot {
	char ip[64];
	int fails;
	int inflight; /* attempts reserved and not settled */
	time_t last;  /* last failure (or when the slot was taken) */
};

static struct ip_slot ip_table[IP_SLOTS];

static unsigned ip_hash(const char *s)
{
	unsigned h = 2166136261u;

	for (; *s; s++)
		h = (h ^ (unsigned char)*s) * 16777619u;
	return h;
}

/* The slot for ip; an old slot with nothing in flight is reused when the
 * table is crowded. */
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
		if (!victim || (victim->inflight && !s->inflight) ||
		    (!victim->inflight == !s->inflight && s->last < victim->last))
			victim = s;
	}
	if (!create)
		return NULL;
	snprintf(victim->ip, sizeof(victim->ip), "%s", ip);
	victim->fails = 0;
	victim->inflight = 0;
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
		return cfg.login_max_delay_s;
	return (1 << over) < cfg.login_max_delay_s ? (1 << over) : cfg.login_max_delay_s;
}

/* Seconds ip must wait before another attempt, counting those in flight as
 * failed: past the free ones, attempts go one at a time. */
static int ip_wait(const char *ip)
{
	struct ip_slot *s = ip_slot(ip, 0);
	int free_ip = cfg.login_free_failures * IP_FACTOR;
	long wait;

	if (!s)
		return 0;
	wait = (long)s->last + backoff(s->fails, free_ip) - time(NULL);
	if (wait <= 0 && s->inflight > 0 && s->fails + s->inflight >= free_ip)
		wait = 1;
	return wait > 0 ? (int)wait : 0;
}

static void ip_reserve(const char *ip)
{
	ip_slot(ip, 1)->inflight++;
}

static void ip_settle(const char *ip, int failed)
{
	struct ip_slot *s = ip_slot(ip, 1);

	if (s->inflight > 0)
		s->inflight--;
	if (failed) {
		s->fails++;
		s->last = time(NULL);
	}
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
	char addr[64];  /* the client's address (auth_client_addr) */
	int ip_held;    /* ip_reserve() not yet settled */
	int pair_held;  /* login_reserve() granted and not yet settled */
	char budget[8]; /* what login_reserve() charged */
	int found;
	int disabled;
	char user_id[24];
	char session_token[64];
	char csrf[64];
	struct auth_info info;
};

/* Ends the pair's reservation: ok 1 success, 0 failure, -1 not checked.
 * done may be NULL (fire and forget). */
static void pair_settle(struct login *l, int ok, void (*done)(PGresult *, enum rc, void *))
{
	struct db_args a = DB_ARGS_INIT;

	l->pair_held = 0;
	db_arg_str(&a, l->user_id);
	db_arg_str(&a, l->addr);
	db_arg_str(&a, l->budget);
	db_arg_str(&a, ok < 0 ? NULL : ok ? "t" : "f");
	db_arg_ll(&a, cfg.login_free_failures);
	db_arg_ll(&a, cfg.login_max_delay_s);
	db_query_args("SELECT login_settle($1, $2, $3, $4::boolean, $5::int, $6::int)", &a,
	              done ? done : db_ignore, done ? (void *)l : NULL);
}

static void login_free(void *p)
{
	struct login *l = p;

	/* a request that ended before its attempt was settled (a database
	 * error, the pool full) gives the reservation back */
	if (l->pair_held)
		pair_settle(l, -1, NULL);
	if (l->ip_held)
		ip_settle(l->addr, 0);
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
	set_session_cookie(r, l->session_token, cfg.session_max_age_s);
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
	char hash[65], old[128];
	struct db_args a = DB_ARGS_INIT;

	(void)new_phc;
	if (l->ip_held) {
		l->ip_held = 0;
		ip_settle(l->addr, ok == 0 || (ok == 1 && l->disabled));
	}
	if (ok < 0) {
		if (l->found)
			pair_settle(l, -1, NULL);
		http_reply_error(r, RC_INTERNAL, NULL,
		                 "stored password hash is unusable; ask an admin to reset it");
		return;
	}
	if (ok == 1 && l->disabled) {
		/* the same answer as a wrong password: no oracle for the right
		 * one; it counts as a failed attempt */
		auth_audit(r, &l->info, "login.disabled", l->info.username, NULL);
		pair_settle(l, 0, login_failed_done);
		return;
	}
	if (ok == 0) {
		json_t *d = json_pack("{s:s}", "username", body_str(l->body, "username"));
		auth_audit(r, NULL, "login.failure", body_str(l->body, "username"), d);
		if (!l->found) {
			login_failed_done(NULL, RC_OK, l);
			return;
		}
		/* the answer waits for the failure to be recorded: the next
		 * attempt sees it */
		pair_settle(l, 0, login_failed_done);
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
		struct db_args q = DB_ARGS_INIT;
		crypto_sha256_hex(old, strlen(old), oldhash);
		db_arg_str(&q, oldhash);
		db_query_args("UPDATE sessions SET revoked_at = now() WHERE token_hash = $1 AND "
		              "revoked_at IS NULL",
		              &q, db_ignore, NULL);
	}
	crypto_sha256_hex(l->session_token, strlen(l->session_token), hash);
	db_arg_str(&a, l->user_id);
	db_arg_str(&a, hash);
	db_arg_str(&a, l->csrf);
	db_arg_str(&a, l->addr);
	db_arg_str(&a, http_header(r, "User-Agent") ? http_header(r, "User-Agent") : "");
	db_arg_ll(&a, cfg.session_max_age_s);
	db_arg_str(&a, l->budget);
	db_arg_ll(&a, cfg.login_free_failures);
	db_arg_ll(&a, cfg.login_max_delay_s);
	/* the success settles the attempt (refund, the address becomes known)
	 * in the same statement */
	l->pair_held = 0;
	db_query_args(
	        "INSERT INTO sessions (user_id, token_hash, csrf_token, ip, user_agent, "
	        "expires_at)"
	        " SELECT $1, $2, $3, $4, left($5, 200), now() + make_interval(secs => $6::int)"
	        " FROM login_settle($1, $4, $7, true, $8::int, $9::int)",
	        &a, login_session_done, l);
}

/* The account row with the attempt's reservation (budget NULL: refused). */
#define LOGIN_COLS(FIRST, COL)                       \
	FIRST(LOGIN_ID, "u.id")                      \
	COL(LOGIN_PHC, "u.password_hash")            \
	COL(LOGIN_DISABLED, "u.disabled")            \
	COL(LOGIN_DISPLAY_NAME, "u.display_name")    \
	COL(LOGIN_EMAIL, "u.email")                  \
	COL(LOGIN_ROLE, "u.role")                    \
	COL(LOGIN_USERNAME, "u.username")            \
	COL(LOGIN_CREATED_AT, DB_TS("u.created_at")) \
	COL(LOGIN_BUDGET, "x.budget")                \
	COL(LOGIN_WAIT_S, "x.wait_s")                \
	COL(LOGIN_MUST_CHANGE, "u.must_change_password")
enum login_col { DB_COLS_ENUM(LOGIN_COLS) };
#define LOGIN_LIST DB_COLS_SQL(LOGIN_COLS)

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
		snprintf(l->user_id, sizeof(l->user_id), "%s", db_val(res, 0, LOGIN_ID));
		if (!db_val(res, 0, LOGIN_BUDGET)) {
			reply_throttled(r, (int)strtol(db_val(res, 0, LOGIN_WAIT_S), NULL, 10));
			return;
		}
		l->pair_held = 1;
		snprintf(l->budget, sizeof(l->budget), "%s", db_val(res, 0, LOGIN_BUDGET));
		l->found = 1;
		phc = db_val(res, 0, LOGIN_PHC);
		l->disabled = strcmp(db_val(res, 0, LOGIN_DISABLED), "t") == 0;
		l->info.user_id = strtoll(l->user_id, NULL, 10);
		snprintf(l->info.username, sizeof(l->info.username), "%s",
		         db_val(res, 0, LOGIN_USERNAME));
		l->info.display_name = strdup((v = db_val(res, 0, LOGIN_DISPLAY_NAME)) ? v : "");
		l->info.email = strdup((v = db_val(res, 0, LOGIN_EMAIL)) ? v : "");
		l->info.role = auth_role_parse(db_val(res, 0, LOGIN_ROLE));
		snprintf(l->info.created_at, sizeof(l->info.created_at), "%s",
		         db_val(res, 0, LOGIN_CREATED_AT));
		l->info.must_change_password = strcmp(db_val(res, 0, LOGIN_MUST_CHANGE), "t") == 0;
		if (!l->info.display_name || !l->info.email) {
			http_reply_error(r, RC_NOMEM, NULL, "out of memory");
			return;
		}
	}
	if (auth_verify_async(body_str(l->body, "password"), phc, NULL, login_verified, l) < 0) {
		http_add_header(r, "Retry-After", "1");
		http_reply_error(r, RC_UNAVAILABLE, "retry in a few seconds",
		                 "too many logins in progress");
	}
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
	struct db_args a = DB_ARGS_INIT;
	int wait;

	if (!body)
		return;
	l = api_state(r, sizeof(*l), login_free);
	if (!l) {
		json_decref(body);
		return;
	}
	l->r = r;
	l->body = body;
	auth_client_addr(r, l->addr, sizeof(l->addr));
	wait = ip_wait(l->addr);
	if (wait > 0) {
		reply_throttled(r, wait);
		return;
	}
	if (worker_lane_pending(WORKER_PASSWORD) >= cfg.login_queue) {
		http_add_header(r, "Retry-After", "1");
		http_reply_error(r, RC_UNAVAILABLE, "retry in a few seconds",
		                 "too many logins in progress");
		return;
	}
	ip_reserve(l->addr);
	l->ip_held = 1;
	db_arg_str(&a, body_str(body, "username"));
	db_arg_str(&a, l->addr);
	db_arg_ll(&a, cfg.login_account_failures);
	db_arg_ll(&a, cfg.login_reserve_failures);
	/* the attempt is reserved in the same round trip that finds the account */
	db_query_args("SELECT " LOGIN_LIST " FROM users u, LATERAL login_reserve(u.id, $2, "
	              "$3::int, $4::int) x"
	              " WHERE u.username = lower($1)",
	              &a, login_user_done, l);
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
	struct db_args a = DB_ARGS_INIT;

	if (!r->auth->session_id) {
		http_reply_error(r, RC_INVALID, "revoke the token with DELETE /api/v1/tokens/{id}",
		                 "logout ends browser sessions; this request used an API token");
		return;
	}
	db_arg_ll(&a, r->auth->session_id);
	auth_audit(r, r->auth, "logout", r->auth->username, NULL);
	db_query_args("UPDATE sessions SET revoked_at = now() WHERE id = $1", &a, logout_done, r);
}

/* ---- me ---- */

/* Who I am, my quotas per pool, and what I use: slices held now,
 * allocated GPU-seconds over the last 7 days and my home's storage, read
 * with the caller (the route's caller extension).  The extension is
 * versioned (me_versions, 0041): while nothing it reads changed, /me is the
 * caller lookup alone, and the rest is the copy auth kept; after a change,
 * one more statement reads it. */

/* Per pool the caller's quota, slices held and GPU-seconds of the last 7
 * days. */
#define ME_USAGE_COL                                                                                   \
	", (SELECT COALESCE(json_agg(json_build_object('pool', p.name, 'quota',"                       \
	"  (SELECT json_build_object('max_slices', q.max_slices, 'max_cpu_millis',"                    \
	"  q.max_cpu_millis, 'max_mem_mib', q.max_mem_mib, 'gpu_hours_per_week',"                      \
	"  q.gpu_hours_per_week, 'max_runtime_s', q.max_runtime_s) FROM quotas q"                      \
	"  WHERE q.user_id = u.id AND q.pool_id = p.id),"                                              \
	"  'slices_in_use', (SELECT count(*) FROM alloc_requests r JOIN allocations a"                 \
	"  ON a.request_id = r.id AND a.released_at IS NULL WHERE r.user_id = u.id"                    \
	"  AND r.pool_id = p.id AND r.state = 'allocated'),"                                           \
	"  'gpu_seconds_7d', (SELECT COALESCE(sum(gpu_seconds), 0) FROM gpu_usage g"                   \
	"  WHERE g.user_id = u.id AND g.pool_id = p.id AND g.day > current_date - 7))"                 \
	"  ORDER BY p.name), '[]')" /* only the pools this user has anything in: three index probes */ \
	"  FROM pools p WHERE p.id IN (SELECT pool_id FROM quotas WHERE user_id = u.id"                \
	"  UNION SELECT pool_id FROM gpu_usage WHERE user_id = u.id"                                   \
	"   AND day > current_date - 7"                                                                \
	"  UNION SELECT pool_id FROM alloc_requests WHERE user_id = u.id"                              \
	"   AND state = 'allocated'))::text"

/* Whether TensorBoard is set up: the image of the tensorboard_image
 * setting (0017) is in the catalog, so POST /tensorboards can start it.
 * The setting is read as gc_setting() reads it, but inline: a call of that
 * SQL function plans its body anew in every statement, half of what
 * PostgreSQL spent on a /me. */
#define ME_FEATURES_COL                                                            \
	", EXISTS (SELECT 1 FROM images me_tb WHERE me_tb.owner_id IS NULL"        \
	" AND me_tb.reference = (SELECT COALESCE(me_st.value, me_st.config_value)" \
	"  FROM site_settings me_st WHERE me_st.name = 'tensorboard_image'))"

/* What the caller extension decodes: everything of /me past the caller,
 * serialised once per version (the part auth keeps), and whether the home
 * has no area row yet. */
struct me_ext {
	char *tail; /* "\"quotas\":{...},\"usage\":{...},\"storage\":...,\"features\":{...}" */
	int storage_missing;
};

static void me_ext_free(void *p)
{
	struct me_ext *m = p;

	free(m->tail);
	free(m);
}

/* quotas and usage objects from the usage column's rows (per pool). */
static void me_usage(const char *usage_json, json_t *quotas, json_t *usage)
{
	/* no pool at all (admins, new users) reads "[]": nothing to parse */
	json_t *rows = usage_json && strcmp(usage_json, "[]") != 0 ? json_loads(usage_json, 0, NULL)
	                                                           : NULL,
	       *row;
	size_t i;

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
}

static void *me_ext_decode(const PGresult *res, int col)
{
	struct me_ext *m = calloc(1, sizeof(*m));
	json_t *out = NULL, *quotas = json_object(), *usage = json_object();
	json_t *storage = NULL;
	const char *tb;
	char *s = NULL;
	size_t n;

	if (!m)
		goto fail;
	me_usage(db_val(res, 0, col), quotas, usage);
	storage = areas_me_storage(res, col + 1, &m->storage_missing);
	tb = db_val(res, 0, col + 1 + AREAS_ME_NCOLS);
	out = json_pack("{s:o, s:o, s:o, s:{s:b}}", "quotas", quotas, "usage", usage, "storage",
	                storage ? storage : json_null(), "features", "tensorboard",
	                tb && tb[0] == 't');
	quotas = usage = storage = NULL; /* handed off */
	if (!out || !(s = json_dumps(out, JSON_COMPACT | JSON_ENSURE_ASCII)))
		goto fail;
	/* the members alone, to follow the caller's in /me's object */
	n = strlen(s);
	memmove(s, s + 1, n - 2);
	s[n - 2] = '\0';
	m->tail = s;
	json_decref(out);
	return m;
fail:
	json_decref(quotas);
	json_decref(usage);
	json_decref(storage);
	json_decref(out);
	free(m);
	return NULL;
}

/* A copy for the next /me of the same user. */
static void *me_ext_dup(const void *p)
{
	const struct me_ext *m = p;
	struct me_ext *c = calloc(1, sizeof(*c));

	if (!c || !(c->tail = strdup(m->tail))) {
		free(c);
		return NULL;
	}
	c->storage_missing = m->storage_missing;
	return c;
}

/* What the columns read moves me_versions (0041): the caller's counter for
 * their quotas, allocated requests and allocations, GPU-seconds and home;
 * the site's for pools, storage defaults, settings and images.  The 7-day
 * window moves with the date. */
#define ME_VERSION                                                                           \
	"u.id::text || ':' || COALESCE((SELECT v FROM me_versions WHERE user_id = u.id), 0)" \
	" || ':' || (SELECT v FROM me_versions WHERE user_id = 0) || ':' || current_date"

static struct auth_ext me_ext = {
	.cols = ME_USAGE_COL AREAS_ME_COLS ME_FEATURES_COL,
	.join = AREAS_ME_JOIN,
	.decode = me_ext_decode,
	.free_fn = me_ext_free,
	.version = ME_VERSION,
	.dup = me_ext_dup,
};

static void me(struct http_req *r)
{
	struct auth_info *a = r->auth;
	const struct me_ext *m = a->ext;
	struct evbuffer *b = evbuffer_new();
	int rc = -1;

	if (m->storage_missing)
		areas_home_create(a->user_id);
	/* written straight, not through jansson: building and dumping the tree
	 * was a quarter of this request's instructions */
	if (b) {
		rc = jsonw_lit(b, "{\"user\":");
		rc |= auth_user_write(a, b);
		if (a->session_id) {
			rc |= jsonw_lit(b, ",\"auth\":\"session\",\"csrf_token\":");
			rc |= jsonw_str(b, a->csrf);
		} else {
			rc |= jsonw_lit(b, ",\"auth\":\"token\",\"scopes\":[");
			if (a->scopes & SCOPE_READ)
				rc |= jsonw_lit(b, "\"read\"");
			if ((a->scopes & SCOPE_READ) && (a->scopes & SCOPE_WRITE))
				rc |= jsonw_lit(b, ",");
			if (a->scopes & SCOPE_WRITE)
				rc |= jsonw_lit(b, "\"write\"");
			rc |= jsonw_lit(b, "]");
		}
		/* then the kept members */
		rc |= jsonw_lit(b, ",");
		rc |= evbuffer_add(b, m->tail, strlen(m->tail));
		rc |= jsonw_lit(b, "}");
	}
	if (rc != 0) {
		if (b)
			evbuffer_free(b);
		http_reply_error(r, RC_NOMEM, NULL, "out of memory");
		return;
	}
	http_add_header(r, "Cache-Control", "no-store");
	http_reply_evbuffer(r, 200, "application/json", b);
	evbuffer_free(b);
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
	struct db_args a = DB_ARGS_INIT;

	if (ok != 1 || !new_phc) {
		if (ok == 0)
			http_reply_error(c->r, RC_FORBIDDEN, NULL, "current password is wrong");
		else
			http_reply_error(c->r, RC_INTERNAL, NULL,
			                 "could not hash the new password");
		return;
	}
	db_arg_ll(&a, c->r->auth->user_id);
	db_arg_str(&a, new_phc);
	db_arg_ll(&a, c->r->auth->session_id);
	/* other sessions end: whoever knew the old password is logged out; and
	 * every API token is revoked, since one may have been made by whoever
	 * knew it (scripts need new tokens: the safe choice, and the UI says so) */
	db_query_args("WITH s AS (UPDATE sessions SET revoked_at = now()"
	              "  WHERE user_id = $1 AND id <> $3 AND revoked_at IS NULL),"
	              " t AS (UPDATE api_tokens SET revoked_at = now()"
	              "  WHERE user_id = $1 AND revoked_at IS NULL)"
	              " UPDATE users SET password_hash = $2, password_changed_at = now(),"
	              " must_change_password = false, updated_at = now()"
	              " WHERE id = $1",
	              &a, pwchange_saved, c);
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
	struct db_args a = DB_ARGS_INIT;

	if (!body)
		return;
	why = auth_password_policy(body_str(body, "new_password"), r->auth->username);
	if (!why && strcmp(body_str(body, "new_password"), body_str(body, "current_password")) == 0)
		why = "the new password must differ from the current one";
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
	db_arg_ll(&a, r->auth->user_id);
	db_query_args("SELECT password_hash FROM users WHERE id = $1", &a, pwchange_loaded, c);
}

static const struct route routes[] = {
	{ HTTP_POST, "/api/v1/auth/login", login, ROLES_PUBLIC, ROUTE_NO_CSRF, 8192, NULL },
	{ HTTP_POST, "/api/v1/auth/logout", logout, ROLES_ALL, ROUTE_PASSWORD_CHANGE, 0, NULL },
	{ HTTP_GET, "/api/v1/me", me, ROLES_ALL, ROUTE_PASSWORD_CHANGE, 0, NULL },
	{ HTTP_POST, "/api/v1/me/password", password_change, ROLES_ALL, ROUTE_PASSWORD_CHANGE, 8192,
	  NULL },
	{ 0, NULL, NULL, 0, 0, 0, NULL },
};

int api_auth_register(void)
{
	/* /me (routes[2]) reads its payload with the caller lookup */
	if (router_add(routes) < 0 || auth_caller_ext(&routes[2], &me_ext) < 0)
		return -1;
	return 0;
}
