/* test_db.c — the database pool against a real PostgreSQL.
 *
 * Needs GPUCLOUD_TEST_DB_URL (a libpq URL or conninfo string of a database
 * this test may create and drop the schema gpucloud_test_db in) and
 * GPUCLOUD_TEST_PG_RESTART_CMD (a shell command that restarts that server and
 * returns once it accepts connections again, e.g.
 * "runuser -u postgres -- pg_ctl -D DIR -m fast -w restart").  Without them the
 * suite fails rather than skips: the restart test is the point of it.
 */
#include "db/db.c"

#include "harness.h"

#include <event2/event.h>
#include <spawn.h>
#include <sys/wait.h>

#define SCHEMA "gpucloud_test_db"

extern char **environ;

static struct event_base *tb;
static const char *url;
static const char *restart_cmd;
static int done; /* callbacks fired since the last reset */

struct rec {
	int calls;
	enum rc rc;
	char state[6];
	int ntuples;
	int isnull[3];
	char v[3][64];
	long long issued, at;
	int *order, *norder, idx; /* completion order, when asked */
};

static void rec_cb(PGresult *res, enum rc rc, void *arg)
{
	struct rec *r = arg;
	int i;

	r->calls++;
	r->rc = rc;
	r->at = now_ms();
	snprintf(r->state, sizeof(r->state), "%s", db_sqlstate(res));
	r->ntuples = res ? PQntuples(res) : -1;
	for (i = 0; i < 3; i++) {
		const char *v = db_val(res, 0, i);

		r->isnull[i] = v == NULL;
		snprintf(r->v[i], sizeof(r->v[i]), "%s", v ? v : "");
	}
	if (r->order)
		r->order[(*r->norder)++] = r->idx;
	done++;
}

struct hold {
	int calls;
	enum rc rc;
	struct db_conn *c;
};

static void hold_cb(struct db_conn *c, enum rc rc, void *arg)
{
	struct hold *h = arg;

	h->calls++;
	h->rc = rc;
	h->c = c;
	done++;
}

/* Runs the loop until *n reaches want or ms pass; 1 when reached. */
static int wait_for(const int *n, int want, int ms)
{
	long long end = now_ms() + ms;
	struct timeval tv = {0, 10000};

	while (*n < want && now_ms() < end) {
		event_base_loopexit(tb, &tv);
		event_base_dispatch(tb);
	}
	return *n >= want;
}

static int wait_up(int want, int ms)
{
	long long end = now_ms() + ms;
	struct timeval tv = {0, 10000};
	struct db_stats s;

	for (;;) {
		db_get_stats(&s);
		if (s.up >= want || now_ms() >= end)
			return s.up >= want;
		event_base_loopexit(tb, &tv);
		event_base_dispatch(tb);
	}
}

/* Shuts the pool down and runs the loop dry: every deferred callback fires
 * and nothing of the pool is left registered. */
static void stop_pool(void)
{
	db_shutdown();
	event_base_dispatch(tb);
}

static void quiet(void *arg, const char *msg)
{
	(void)arg;
	(void)msg;
}

/* One blocking statement on a connection of its own; caller frees. */
static PGresult *admin(const char *sql, int nparams, const char *const *params)
{
	PGconn *pg = PQconnectdb(url);
	PGresult *r = NULL;

	PQsetNoticeProcessor(pg, quiet, NULL);
	if (PQstatus(pg) == CONNECTION_OK)
		r = PQexecParams(pg, sql, nparams, NULL, params, NULL, NULL, 0);
	else
		fprintf(stderr, "admin connection: %s", PQerrorMessage(pg));
	PQfinish(pg);
	return r;
}

static int admin_ok(const char *sql)
{
	PGresult *r = admin(sql, 0, NULL);
	ExecStatusType st = PQresultStatus(r);

	if (st != PGRES_COMMAND_OK && st != PGRES_TUPLES_OK)
		fprintf(stderr, "admin '%s': %s", sql,
			r ? PQresultErrorMessage(r) : "no connection\n");
	PQclear(r);
	return st == PGRES_COMMAND_OK || st == PGRES_TUPLES_OK;
}

/* First value of the first row of sql, as a number (-1 on failure). */
static long admin_num(const char *sql, const char *param)
{
	const char *params[1] = {param};
	PGresult *r = admin(sql, param ? 1 : 0, params);
	const char *v = db_val(r, 0, 0);
	long n = v ? strtol(v, NULL, 10) : -1;

	PQclear(r);
	return n;
}

TEST(test_bad_url)
{
	CHECK(db_init(tb, "host=/tmp no_such_keyword=1", 2, 10) == -1);
	CHECK(db_init(tb, "postgresql://[::1", 2, 10) == -1);
	CHECK(db_init(tb, url, 0, 10) == -1);
	CHECK(!db_ready());
}

#define BIG (8 << 20)
#define BIG_S "8388608"

TEST(test_params)
{
	const char *p[3] = {"h\xc3\xa9llo 'x' \\ \"y\"", NULL, "41"};
	struct rec r = {0}, r2 = {0}, r3 = {0};
	char *big;

	done = 0;
	CHECK(db_init(tb, url, 2, 100) == 0);
	CHECK(db_init(tb, url, 2, 100) == -1); /* once */
	db_query("SELECT $1::text, $2::text, $3::int + 1", 3, p, rec_cb, &r);
	db_query("SELECT 1 WHERE false", 0, NULL, rec_cb, &r2);
	CHECK(done == 0); /* never from inside db_query() */
	CHECK(wait_for(&done, 2, 5000));
	/* Bigger than the socket buffers: sent across several writable
	 * events. */
	big = malloc(BIG + 1);
	CHECK(big != NULL);
	if (big) {
		memset(big, 'x', BIG);
		big[BIG] = '\0';
		db_query("SELECT length($1), md5($1) = md5(repeat('x', $2::int))",
			 2, (const char *const[]){big, BIG_S}, rec_cb, &r3);
		free(big); /* copied */
		CHECK(wait_for(&done, 3, 10000));
		CHECK(r3.rc == RC_OK);
		CHECK_STR(r3.v[0], BIG_S);
		CHECK_STR(r3.v[1], "t");
	}
	CHECK(r.calls == 1 && r.rc == RC_OK);
	CHECK_STR(r.v[0], "h\xc3\xa9llo 'x' \\ \"y\"");
	CHECK(r.isnull[1]);
	CHECK_STR(r.v[2], "42");
	CHECK(r.isnull[2] == 0);
	CHECK_STR(r.state, "");
	CHECK(r2.calls == 1 && r2.rc == RC_OK && r2.ntuples == 0);
	CHECK(r2.isnull[0]); /* out of range */
	CHECK(db_ready());
	stop_pool();
	CHECK(!db_ready());
	CHECK(db_val(NULL, 0, 0) == NULL);
	CHECK_STR(db_sqlstate(NULL), "");
}

/* A kept text is prepared once per connection and then found by its
 * address; a copy of it, or an equal kept text elsewhere, still finds the
 * same statement by content. */
TEST(test_kept)
{
	static const char sql[] = "SELECT $1::int * 2";
	char *copy = strdup(sql), *other = strdup(sql);
	struct rec r[5] = {{0}};
	const char *p[5] = {"1", "2", "3", "4", "5"};
	struct db_conn *c;

	done = 0;
	CHECK(copy && other);
	CHECK(db_init(tb, url, 1, 100) == 0);
	for (int i = 0; i < 2; i++)
		db_query_kept(sql, 1, &p[i], rec_cb, &r[i]);
	CHECK(wait_for(&done, 2, 5000));
	c = pool->conns[0];
	CHECK(c->nprep == 1 && c->prep_kept[0] == sql);
	db_query(copy, 1, &p[2], rec_cb, &r[2]);
	free(copy); /* copied */
	CHECK(wait_for(&done, 3, 5000));
	CHECK(c->nprep == 1 && c->prep_kept[0] == sql);
	db_query_kept(other, 1, &p[3], rec_cb, &r[3]);
	CHECK(wait_for(&done, 4, 5000));
	CHECK(c->nprep == 1 && c->prep_kept[0] == other);
	db_query_kept(sql, 1, &p[4], rec_cb, &r[4]);
	CHECK(wait_for(&done, 5, 5000));
	CHECK(c->nprep == 1 && c->prep_kept[0] == sql);
	for (int i = 0; i < 5; i++) {
		char want[4];

		snprintf(want, sizeof(want), "%d", 2 * (i + 1));
		CHECK(r[i].calls == 1 && r[i].rc == RC_OK);
		CHECK_STR(r[i].v[0], want);
	}
	stop_pool();
	free(other);
}

#define NCONC 200

TEST(test_concurrency)
{
	static struct rec r[NCONC];
	static char num[NCONC][12];
	static int order[64];
	struct hold h[3] = {{0}};
	int norder = 0, i, j, pids[4] = {0}, npids = 0, fifo = 1;
	const char *p[1];
	struct db_stats s;

	memset(r, 0, sizeof(r));
	done = 0;
	CHECK(db_init(tb, url, 4, 1000) == 0);
	CHECK(wait_up(4, 5000));
	for (i = 0; i < NCONC; i++) {
		snprintf(num[i], sizeof(num[i]), "%d", i);
		p[0] = num[i];
		db_query("SELECT $1::int * 2, pg_backend_pid()", 1, p, rec_cb, &r[i]);
	}
	db_get_stats(&s);
	CHECK(s.size == 4 && s.up == 4 && s.busy == 4);
	CHECK(s.waiting == NCONC - 4);
	CHECK(done == 0);
	CHECK(wait_for(&done, NCONC, 10000));
	for (i = 0; i < NCONC; i++) {
		char want[12];

		snprintf(want, sizeof(want), "%d", i * 2);
		CHECK(r[i].calls == 1 && r[i].rc == RC_OK);
		CHECK_STR(r[i].v[0], want);
		for (j = 0; j < npids && pids[j] != (int)strtol(r[i].v[1], NULL, 10); j++)
			;
		if (j == npids && npids < 4)
			pids[npids++] = (int)strtol(r[i].v[1], NULL, 10);
	}
	CHECK(npids == 4); /* every connection worked */
	/* Each connection took its queries in submission order. */
	for (i = 0; i < NCONC; i++)
		for (j = i + 1; j < NCONC; j++)
			if (strcmp(r[i].v[1], r[j].v[1]) == 0 && r[j].at < r[i].at)
				fifo = 0;
	CHECK(fifo);
	db_get_stats(&s);
	CHECK(s.queries == NCONC && s.errors == 0 && s.waiting == 0 && s.busy == 0);

	/* With three connections held, everything queues behind one: strict
	 * FIFO, and a queued db_acquire() takes its turn among the queries. */
	done = 0;
	for (i = 0; i < 3; i++)
		db_acquire(hold_cb, &h[i]);
	CHECK(wait_for(&done, 3, 5000));
	for (i = 0; i < 3; i++)
		CHECK(h[i].rc == RC_OK && h[i].c);
	done = 0;
	memset(r, 0, sizeof(r));
	for (i = 0; i < 50; i++) {
		r[i].order = order;
		r[i].norder = &norder;
		r[i].idx = i;
		p[0] = num[i];
		db_query("SELECT $1::int", 1, p, rec_cb, &r[i]);
	}
	CHECK(wait_for(&done, 50, 10000));
	for (i = 0; i < 50; i++)
		if (order[i] != i)
			fifo = 0;
	CHECK(fifo);
	for (i = 0; i < 3; i++)
		db_release(h[i].c);
	db_get_stats(&s);
	CHECK(s.busy == 0);
	stop_pool();
}

TEST(test_errors)
{
	struct rec r[7] = {{0}};
	const char *p[1] = {"a"};
	struct db_stats s;

	done = 0;
	CHECK(admin_ok("CREATE TABLE " SCHEMA ".kv (k text PRIMARY KEY, "
		       "v text NOT NULL DEFAULT '')"));
	CHECK(db_init(tb, url, 2, 100) == 0);
	db_query("INSERT INTO " SCHEMA ".kv (k) VALUES ($1)", 1, p, rec_cb, &r[0]);
	CHECK(wait_for(&done, 1, 5000));
	db_query("INSERT INTO " SCHEMA ".kv (k) VALUES ($1)", 1, p, rec_cb, &r[1]);
	db_query("SELEC 1", 0, NULL, rec_cb, &r[2]);
	db_query("SELECT 1 / 0", 0, NULL, rec_cb, &r[3]);
	db_query("SELECT 'abc'::int", 0, NULL, rec_cb, &r[4]);
	db_query("INSERT INTO " SCHEMA ".kv (k, v) VALUES ('b', NULL)", 0, NULL,
		 rec_cb, &r[5]);
	db_query("SELECT * FROM " SCHEMA ".no_such_table", 0, NULL, rec_cb, &r[6]);
	CHECK(wait_for(&done, 7, 5000));
	CHECK(r[0].rc == RC_OK);
	CHECK(r[1].rc == RC_CONFLICT);
	CHECK_STR(r[1].state, "23505");
	CHECK(r[2].rc == RC_DB);
	CHECK_STR(r[2].state, "42601");
	CHECK(r[3].rc == RC_INVALID);
	CHECK_STR(r[3].state, "22012");
	CHECK(r[4].rc == RC_INVALID);
	CHECK_STR(r[4].state, "22P02");
	CHECK(r[5].rc == RC_INVALID);
	CHECK_STR(r[5].state, "23502");
	CHECK(r[6].rc == RC_DB);
	CHECK_STR(r[6].state, "42P01");
	db_get_stats(&s);
	CHECK(s.queries == 7 && s.errors == 6);
	stop_pool();
}

/* Runs sql on the held connection and waits for it. */
static enum rc on_held(struct db_conn *c, const char *sql, struct rec *r)
{
	int before = done;

	memset(r, 0, sizeof(*r));
	db_conn_query(c, sql, 0, NULL, rec_cb, r);
	if (!wait_for(&done, before + 1, 5000))
		return RC_TIMEOUT;
	return r->rc;
}

static long count_kv(const char *k)
{
	return admin_num("SELECT count(*) FROM " SCHEMA ".kv WHERE k = $1", k);
}

TEST(test_transactions)
{
	struct hold h = {0};
	struct rec r = {0}, r2 = {0}, r3 = {0};
	char pid[64];
	struct db_stats s;

	done = 0;
	CHECK(admin_ok("DELETE FROM " SCHEMA ".kv"));
	CHECK(db_init(tb, url, 2, 100) == 0);

	/* Commit is visible. */
	db_acquire(hold_cb, &h);
	CHECK(done == 0);
	CHECK(wait_for(&done, 1, 5000) && h.rc == RC_OK && h.c);
	db_get_stats(&s);
	CHECK(s.busy == 1);
	CHECK(on_held(h.c, "BEGIN", &r) == RC_OK);
	CHECK(on_held(h.c, "INSERT INTO " SCHEMA ".kv (k) VALUES ('tx1')", &r) == RC_OK);
	CHECK(count_kv("tx1") == 0); /* not yet */
	CHECK(on_held(h.c, "COMMIT", &r) == RC_OK);
	db_release(h.c);
	CHECK(count_kv("tx1") == 1);

	/* Rollback is not. */
	done = 0;
	db_acquire(hold_cb, &h);
	CHECK(wait_for(&done, 1, 5000) && h.rc == RC_OK);
	CHECK(on_held(h.c, "BEGIN", &r) == RC_OK);
	CHECK(on_held(h.c, "INSERT INTO " SCHEMA ".kv (k) VALUES ('tx2')", &r) == RC_OK);
	CHECK(on_held(h.c, "ROLLBACK", &r) == RC_OK);
	db_release(h.c);
	CHECK(count_kv("tx2") == 0);

	/* Released with the transaction open: the pool rolls it back before
	 * the connection serves anyone else. */
	done = 0;
	db_acquire(hold_cb, &h);
	CHECK(wait_for(&done, 1, 5000) && h.rc == RC_OK);
	CHECK(on_held(h.c, "BEGIN", &r) == RC_OK);
	CHECK(on_held(h.c, "SELECT pg_backend_pid()", &r) == RC_OK);
	snprintf(pid, sizeof(pid), "%s", r.v[0]);
	CHECK(on_held(h.c, "INSERT INTO " SCHEMA ".kv (k) VALUES ('tx3')", &r) == RC_OK);
	CHECK(admin_num("SELECT count(*) FROM pg_stat_activity WHERE pid = $1 "
			"AND state = 'idle in transaction'", pid) == 1);
	db_release(h.c);
	done = 0;
	db_query("SELECT 1", 0, NULL, rec_cb, &r);
	db_query("SELECT 1", 0, NULL, rec_cb, &r2);
	CHECK(wait_for(&done, 2, 5000));
	CHECK(count_kv("tx3") == 0);
	CHECK(admin_num("SELECT count(*) FROM pg_stat_activity WHERE pid = $1 "
			"AND state = 'idle'", pid) == 1);

	/* Released with statements still in flight, the last one opening a
	 * transaction: they complete, then the pool rolls back. */
	done = 0;
	db_acquire(hold_cb, &h);
	CHECK(wait_for(&done, 1, 5000) && h.rc == RC_OK);
	CHECK(on_held(h.c, "SELECT pg_backend_pid()", &r) == RC_OK);
	snprintf(pid, sizeof(pid), "%s", r.v[0]);
	CHECK(on_held(h.c, "BEGIN", &r) == RC_OK);
	CHECK(on_held(h.c, "INSERT INTO " SCHEMA ".kv (k) VALUES ('tx1')", &r) == RC_CONFLICT);
	CHECK(on_held(h.c, "SELECT 1", &r) == RC_DB);
	CHECK_STR(r.state, "25P02"); /* in a failed transaction */
	done = 0;
	db_conn_query(h.c, "ROLLBACK", 0, NULL, rec_cb, &r);
	db_conn_query(h.c, "BEGIN", 0, NULL, rec_cb, &r2);
	db_conn_query(h.c, "INSERT INTO " SCHEMA ".kv (k) VALUES ('tx4')", 0, NULL,
		      rec_cb, &r3);
	db_release(h.c);
	CHECK(wait_for(&done, 3, 5000));
	CHECK(r.rc == RC_OK && r2.rc == RC_OK && r3.rc == RC_OK);
	db_conn_query(h.c, "SELECT 1", 0, NULL, rec_cb, &r); /* no longer held */
	CHECK(done == 3);
	CHECK(wait_for(&done, 4, 5000) && r.rc == RC_UNAVAILABLE);
	done = 0;
	db_query("SELECT 1", 0, NULL, rec_cb, &r);
	db_query("SELECT 1", 0, NULL, rec_cb, &r2);
	CHECK(wait_for(&done, 2, 5000));
	CHECK(count_kv("tx4") == 0);
	CHECK(admin_num("SELECT count(*) FROM pg_stat_activity WHERE pid = $1 "
			"AND state = 'idle'", pid) == 1);
	db_get_stats(&s);
	CHECK(s.busy == 0);
	stop_pool();
}

TEST(test_queue_limits)
{
	struct rec r[5];
	struct hold h = {0};
	long long t0;
	int i;

	memset(r, 0, sizeof(r));
	done = 0;
	queue_wait_ms = 300;
	CHECK(db_init(tb, url, 1, 3) == 0);
	db_acquire(hold_cb, &h);
	CHECK(wait_for(&done, 1, 5000) && h.rc == RC_OK);
	done = 0;
	t0 = now_ms();
	for (i = 0; i < 5; i++)
		db_query("SELECT 1", 0, NULL, rec_cb, &r[i]);
	CHECK(done == 0);
	CHECK(wait_for(&done, 2, 1000)); /* over queue_max: at once */
	CHECK(r[3].rc == RC_UNAVAILABLE && r[4].rc == RC_UNAVAILABLE);
	CHECK(r[3].at - t0 < 100);
	CHECK(r[0].calls == 0);
	CHECK(wait_for(&done, 5, 3000)); /* the rest at their deadline */
	for (i = 0; i < 3; i++) {
		CHECK(r[i].calls == 1 && r[i].rc == RC_UNAVAILABLE);
		CHECK(r[i].at - t0 >= 290 && r[i].at - t0 < 1500);
	}
	db_release(h.c);
	done = 0;
	db_query("SELECT 1", 0, NULL, rec_cb, &r[0]);
	CHECK(wait_for(&done, 1, 5000) && r[0].rc == RC_OK);
	stop_pool();
	queue_wait_ms = 5000;
}

TEST(test_down_at_start)
{
	struct rec r = {0};
	struct hold h = {0};
	struct db_stats s;
	long long t0;

	done = 0;
	CHECK(db_init(tb, "host=/tmp/dbtest-no-such-dir port=1", 2, 10) == 0);
	wait_up(1, 200);
	CHECK(!db_ready());
	t0 = now_ms();
	db_query("SELECT 1", 0, NULL, rec_cb, &r);
	db_acquire(hold_cb, &h);
	CHECK(done == 0);
	CHECK(wait_for(&done, 2, 1000));
	CHECK(r.rc == RC_UNAVAILABLE && r.at - t0 < 100);
	CHECK(h.rc == RC_UNAVAILABLE && h.c == NULL);
	db_get_stats(&s);
	CHECK(s.size == 2 && s.up == 0 && s.waiting == 0);
	stop_pool();
}

static void kill_backend(const char *pid)
{
	CHECK(admin_num("SELECT pg_terminate_backend($1::int)::int", pid) == 1);
}

/* Single backends killed under the pool: in flight, idle, and held with a
 * statement running after its holder let go. */
TEST(test_killed_backend)
{
	struct rec r = {0}, r2 = {0};
	struct hold h = {0};
	struct db_stats s;
	char pid[64];

	done = 0;
	CHECK(db_init(tb, url, 2, 100) == 0);
	CHECK(wait_up(2, 5000));

	db_query("SELECT pg_backend_pid(), pg_sleep(30)", 0, NULL, rec_cb, &r);
	db_query("SELECT pg_backend_pid()", 0, NULL, rec_cb, &r2);
	CHECK(wait_for(&done, 1, 5000) && r2.rc == RC_OK);
	/* The sleeper is the other connection. */
	snprintf(pid, sizeof(pid), "%ld", admin_num("SELECT pid FROM "
		 "pg_stat_activity WHERE query LIKE '%pg_sleep(30)' AND "
		 "pid <> pg_backend_pid()", NULL));
	kill_backend(pid);
	CHECK(wait_for(&done, 2, 5000));
	CHECK(r.calls == 1 && r.rc == RC_UNAVAILABLE);
	CHECK(db_ready()); /* the other one never went away */
	CHECK(wait_up(2, 5000));

	/* Idle. */
	snprintf(pid, sizeof(pid), "%s", r2.v[0]);
	kill_backend(pid);
	wait_for(&done, 100, 300);
	CHECK(wait_up(2, 5000));

	/* Held, released with a statement in flight, then killed: it must
	 * still come back to the pool. */
	done = 0;
	db_acquire(hold_cb, &h);
	CHECK(wait_for(&done, 1, 5000) && h.rc == RC_OK);
	CHECK(on_held(h.c, "SELECT pg_backend_pid()", &r2) == RC_OK);
	snprintf(pid, sizeof(pid), "%s", r2.v[0]);
	done = 0;
	memset(&r, 0, sizeof(r));
	db_conn_query(h.c, "SELECT pg_sleep(30)", 0, NULL, rec_cb, &r);
	db_release(h.c);
	wait_for(&done, 100, 200);
	kill_backend(pid);
	CHECK(wait_for(&done, 1, 5000) && r.rc == RC_UNAVAILABLE);
	CHECK(wait_up(2, 5000));
	db_get_stats(&s);
	CHECK(s.busy == 0);
	done = 0;
	db_acquire(hold_cb, &h);
	db_query("SELECT 1", 0, NULL, rec_cb, &r);
	CHECK(wait_for(&done, 2, 5000) && h.rc == RC_OK && r.rc == RC_OK);
	db_release(h.c);
	stop_pool();
}

static int write_file(const char *dir, const char *name, const char *text)
{
	char path[512];
	FILE *f;
	int ok;

	snprintf(path, sizeof(path), "%s/%s", dir, name);
	f = fopen(path, "w");
	if (!f)
		return 0;
	ok = fputs(text, f) >= 0;
	return fclose(f) == 0 && ok;
}

static void remove_file(const char *dir, const char *name)
{
	char path[512];

	snprintf(path, sizeof(path), "%s/%s", dir, name);
	unlink(path);
}

/* url with search_path set to schema, as a conninfo string; caller frees. */
static char *url_in_schema(const char *schema)
{
	PQconninfoOption *opts = PQconninfoParse(url, NULL), *o;
	size_t cap = 4096, n = 0;
	char *out = calloc(1, cap);
	const char *v;

	for (o = opts; o && o->keyword; o++) {
		if (!o->val || strcmp(o->keyword, "options") == 0)
			continue;
		n += (size_t)snprintf(out + n, cap - n, "%s='", o->keyword);
		for (v = o->val; *v && n + 3 < cap; v++) {
			if (*v == '\'' || *v == '\\')
				out[n++] = '\\';
			out[n++] = *v;
		}
		n += (size_t)snprintf(out + n, cap - n, "' ");
	}
	snprintf(out + n, cap - n, "options='-c search_path=%s'", schema);
	PQconninfoFree(opts);
	return out;
}

TEST(test_migrations)
{
	char dir[] = "/tmp/dbtest-mig-XXXXXX";
	char *murl = url_in_schema(SCHEMA);
	const char *names[] = {"0001_a.sql", "0002_b.sql", "0003_broken.sql",
			       "README.md", "01_short.sql", "abcd_x.sql"};
	size_t i;

	CHECK(mkdtemp(dir) != NULL);
	/* 0002 depends on 0001: name order, not directory order. */
	CHECK(write_file(dir, "0002_b.sql",
			 "CREATE TABLE mig_b (id int REFERENCES mig_a);\n"
			 "-- a comment; with a semicolon\n"
			 "INSERT INTO mig_b VALUES (1);\n"));
	CHECK(write_file(dir, "0001_a.sql",
			 "CREATE TABLE mig_a (id int PRIMARY KEY);\n"
			 "INSERT INTO mig_a VALUES (1);\n"));
	CHECK(write_file(dir, "README.md", "not sql"));
	CHECK(write_file(dir, "01_short.sql", "not sql"));
	CHECK(write_file(dir, "abcd_x.sql", "not sql"));
	CHECK(db_migrate(murl, dir) == 0);
	CHECK(admin_num("SELECT count(*) FROM " SCHEMA ".schema_migrations "
			"WHERE version IN ('0001_a', '0002_b')", NULL) == 2);
	CHECK(admin_num("SELECT count(*) FROM " SCHEMA ".schema_migrations", NULL) == 2);
	CHECK(admin_num("SELECT count(*) FROM " SCHEMA ".mig_b", NULL) == 1);

	/* Again: nothing to do (re-running 0001 would fail on CREATE TABLE). */
	CHECK(db_migrate(murl, dir) == 0);
	CHECK(admin_num("SELECT count(*) FROM " SCHEMA ".mig_a", NULL) == 1);

	/* A broken file: its first statement is rolled back with it, it is
	 * not recorded, and the runner says so. */
	CHECK(write_file(dir, "0003_broken.sql",
			 "CREATE TABLE mig_c (id int);\n"
			 "INSERT INTO mig_c VALUES ('not a number');\n"));
	CHECK(db_migrate(murl, dir) == -1);
	CHECK(admin_num("SELECT count(*) FROM pg_tables WHERE schemaname = '"
			SCHEMA "' AND tablename = 'mig_c'", NULL) == 0);
	CHECK(admin_num("SELECT count(*) FROM " SCHEMA ".schema_migrations", NULL) == 2);
	/* Fixed, it applies. */
	CHECK(write_file(dir, "0003_broken.sql",
			 "CREATE TABLE mig_c (id int);\n"
			 "INSERT INTO mig_c VALUES (3);\n"));
	CHECK(db_migrate(murl, dir) == 0);
	CHECK(admin_num("SELECT count(*) FROM " SCHEMA ".schema_migrations", NULL) == 3);

	CHECK(db_migrate(murl, "/tmp/dbtest-no-such-dir") == -1);
	CHECK(db_migrate("host=/tmp/dbtest-no-such-dir port=1", dir) == -1);

	for (i = 0; i < sizeof(names) / sizeof(names[0]); i++)
		remove_file(dir, names[i]);
	CHECK(rmdir(dir) == 0);
	free(murl);
}

/* The restart test: a query every TICK_MS while PostgreSQL restarts. */
#define TICK_MS 20
#define MAXQ 2000

static struct {
	struct rec q[MAXQ];
	int nq;
	pid_t child;
	int child_status;
	long long child_done; /* when the restart command returned */
	long long ok_after;   /* first success issued after that */
	int saw_not_ready;
	int finished;
	long long end;
} rs;

static void restart_tick(evutil_socket_t fd, short what, void *arg)
{
	struct rec *r;
	int st;

	(void)fd;
	(void)what;
	(void)arg;
	if (rs.finished)
		return;
	if (!db_ready())
		rs.saw_not_ready = 1;
	if (rs.child > 0 && waitpid(rs.child, &st, WNOHANG) == rs.child) {
		rs.child = 0;
		rs.child_status = st;
		rs.child_done = now_ms();
	}
	for (r = rs.q; r < rs.q + rs.nq; r++)
		if (rs.child_done && !rs.ok_after && r->calls &&
		    r->rc == RC_OK && r->issued >= rs.child_done)
			rs.ok_after = r->at;
	if (rs.ok_after || rs.nq == MAXQ || now_ms() > rs.end) {
		rs.finished = 1;
		return;
	}
	r = &rs.q[rs.nq++];
	r->issued = now_ms();
	db_query("SELECT 1", 0, NULL, rec_cb, r);
}

TEST(test_restart)
{
	char *argv[] = {"sh", "-c", (char *)restart_cmd, NULL};
	struct timeval tv = {0, TICK_MS * 1000};
	struct event *tick = NULL;
	struct pool *before;
	struct hold h = {0};
	struct rec r = {0}, slow = {0};
	long long worst = 0, worst_unavail = 0;
	int i, unavail = 0, ok = 0;

	if (!restart_cmd) {
		fprintf(stderr, "GPUCLOUD_TEST_PG_RESTART_CMD is not set\n");
		CHECK(restart_cmd != NULL);
		return;
	}
	memset(&rs, 0, sizeof(rs));
	done = 0;
	CHECK(db_init(tb, url, 4, 100) == 0);
	CHECK(wait_up(4, 5000));
	before = pool;
	/* A transaction open across the restart. */
	db_acquire(hold_cb, &h);
	CHECK(wait_for(&done, 1, 5000) && h.rc == RC_OK);
	CHECK(on_held(h.c, "BEGIN", &r) == RC_OK);

	/* A statement running when the server goes away. */
	db_query("SELECT pg_sleep(30)", 0, NULL, rec_cb, &slow);
	slow.issued = now_ms();

	rs.end = now_ms() + 60000;
	CHECK(posix_spawn(&rs.child, "/bin/sh", NULL, NULL, argv, environ) == 0);
	tick = event_new(tb, -1, EV_PERSIST, restart_tick, NULL);
	event_add(tick, &tv);
	CHECK(wait_for(&rs.finished, 1, 65000));
	event_free(tick);
	if (rs.child > 0) {
		waitpid(rs.child, &rs.child_status, 0);
		rs.child_done = now_ms();
	}
	CHECK(WIFEXITED(rs.child_status) && WEXITSTATUS(rs.child_status) == 0);

	/* Every query issued came back, and soon. */
	wait_for(&done, 1 + 1 + 1 + rs.nq, 6000);
	CHECK(slow.calls == 1 && slow.rc == RC_UNAVAILABLE);
	CHECK(slow.at <= rs.child_done);
	for (i = 0; i < rs.nq; i++) {
		struct rec *q = &rs.q[i];
		long long took = q->at - q->issued;

		CHECK(q->calls == 1);
		if (!q->calls)
			continue;
		if (took > worst)
			worst = took;
		if (q->rc == RC_UNAVAILABLE) {
			unavail++;
			if (took > worst_unavail)
				worst_unavail = took;
		} else {
			CHECK(q->rc == RC_OK);
			ok++;
		}
	}
	fprintf(stderr, "restart: %d queries, %d ok, %d unavailable, slowest "
		"%lld ms (unavailable %lld ms), back %lld ms after the command\n",
		rs.nq, ok, unavail, worst, worst_unavail,
		rs.ok_after ? rs.ok_after - rs.child_done : -1);
	CHECK(unavail > 0);        /* the outage was seen */
	CHECK(rs.saw_not_ready);
	CHECK(worst_unavail < 1000); /* promptly */
	CHECK(worst < 5500);       /* nothing hung */
	CHECK(rs.ok_after && rs.ok_after - rs.child_done < 5000);
	CHECK(pool == before);     /* the same pool recovered */

	/* The held connection broke with its transaction: its holder hears
	 * so, releases, and the pool reconnects it too. */
	CHECK(on_held(h.c, "SELECT 1", &r) == RC_UNAVAILABLE);
	db_release(h.c);
	CHECK(wait_up(4, 5000));
	CHECK(db_ready());
	done = 0;
	db_query("SELECT 1", 0, NULL, rec_cb, &r);
	CHECK(wait_for(&done, 1, 5000) && r.rc == RC_OK);
	stop_pool();
}

static void shutdown_cb(PGresult *res, enum rc rc, void *arg)
{
	struct rec *r = arg;

	/* Callers free in callbacks: querying again here must not recurse. */
	CHECK(res == NULL);
	rec_cb(res, rc, arg);
	if (r->idx == 0)
		db_query("SELECT 1", 0, NULL, rec_cb, r + 1);
}

TEST(test_shutdown)
{
	struct rec r[16];
	struct hold h[3] = {{0}};
	int i;

	memset(r, 0, sizeof(r));
	done = 0;
	CHECK(db_init(tb, url, 2, 100) == 0);
	CHECK(wait_up(2, 5000));
	db_acquire(hold_cb, &h[0]);
	CHECK(wait_for(&done, 1, 5000) && h[0].rc == RC_OK);
	done = 0;
	db_query("SELECT pg_sleep(0.2)", 0, NULL, rec_cb, &r[2]); /* in flight */
	for (i = 3; i < 13; i++)                                  /* queued */
		db_query("SELECT 1", 0, NULL, rec_cb, &r[i]);
	db_acquire(hold_cb, &h[1]);                               /* queued */
	r[0].idx = 0;
	r[1].idx = 1;
	db_query("SELECT 1", 0, NULL, shutdown_cb, &r[0]);
	db_shutdown();
	CHECK(done == 0);
	db_shutdown(); /* twice is harmless */
	db_acquire(hold_cb, &h[2]); /* after */
	db_conn_query(h[0].c, "SELECT 1", 0, NULL, rec_cb, &r[13]);
	CHECK(done == 0);
	event_base_dispatch(tb); /* returns once nothing of the pool is left */
	for (i = 0; i < 14; i++) {
		CHECK(r[i].calls == 1);
		CHECK(r[i].rc == RC_UNAVAILABLE);
	}
	CHECK(h[1].calls == 1 && h[1].rc == RC_UNAVAILABLE && h[1].c == NULL);
	CHECK(h[2].calls == 1 && h[2].rc == RC_UNAVAILABLE && h[2].c == NULL);
	CHECK(done == 16);
	db_release(h[0].c); /* the holder still lets go; frees it */

	/* Shut down between a grant and its callback. */
	memset(h, 0, sizeof(h));
	done = 0;
	CHECK(db_init(tb, url, 1, 100) == 0);
	CHECK(wait_up(1, 5000));
	db_acquire(hold_cb, &h[0]);
	db_shutdown();
	event_base_dispatch(tb);
	CHECK(h[0].calls == 1 && h[0].rc == RC_UNAVAILABLE && h[0].c == NULL);
}

int main(void)
{
	url = getenv("GPUCLOUD_TEST_DB_URL");
	restart_cmd = getenv("GPUCLOUD_TEST_PG_RESTART_CMD");
	if (!url || !*url) {
		fprintf(stderr, "test_db: GPUCLOUD_TEST_DB_URL is not set; it needs "
			"a PostgreSQL to run against\n");
		return 1;
	}
	if (restart_cmd && !*restart_cmd)
		restart_cmd = NULL;
	tb = event_base_new();
	if (!tb || !admin_ok("DROP SCHEMA IF EXISTS " SCHEMA " CASCADE") ||
	    !admin_ok("CREATE SCHEMA " SCHEMA)) {
		fprintf(stderr, "test_db: cannot prepare schema " SCHEMA "\n");
		return 1;
	}
	RUN(test_bad_url);
	RUN(test_params);
	RUN(test_kept);
	RUN(test_concurrency);
	RUN(test_errors);
	RUN(test_transactions);
	RUN(test_queue_limits);
	RUN(test_down_at_start);
	RUN(test_killed_backend);
	RUN(test_migrations);
	RUN(test_restart);
	RUN(test_shutdown);
	admin_ok("DROP SCHEMA IF EXISTS " SCHEMA " CASCADE");
	event_base_free(tb);
	return harness_done("test_db");
}
