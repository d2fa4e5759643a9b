/* db.c — the PostgreSQL connection pool, asynchronous queries, migrations.
 *
 * Owns the connections (libpq in non-blocking mode, each driven by one event
 * on its socket), the FIFO of queries and db_acquire() requests waiting for a
 * free connection, reconnection with backoff, and the start-up migration
 * runner.  Does not own the SQL (callers write it, always parameterised), the
 * event base, or a result after its callback returns.
 *
 * Every completion reaches its callback through an event made active on the
 * loop: never from inside the function the caller called, and never from
 * inside the pool's own I/O handlers.  A callback may therefore query again,
 * release its connection, free its request or shut the pool down without
 * pulling state from under this file.  Each job carries the storage for that
 * event, so failing a job never needs memory; running out of memory while
 * creating one aborts.
 */
#include "db/db.h"

#include <assert.h>
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <stdalign.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/queue.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include "base/clock.h"
#include "base/log.h"

#define BACKOFF_MIN_MS 100
#define BACKOFF_MAX_MS 2000
/* libpq leaves connect timeouts to the application in non-blocking mode. */
#define CONNECT_TIMEOUT_MS  10000
#define MIGRATION_MAX_BYTES (16 << 20)
/* Statements a connection prepares (planning once per connection is most
 * of the cost of a small indexed query); beyond this, unnamed statements. */
#define PREP_MAX 256
/* pg_advisory_lock() key held while migrating ("gpuc" in ASCII). */
#define MIGRATE_LOCK_KEY "1735423331"

/* Longest a query waits in the FIFO for a connection; tests shorten it. */
static int queue_wait_ms = 5000;
/* Longest a statement may run before its connection is taken for dead (a
 * frozen or unreachable server never answers, and TCP may not notice). */
static int statement_timeout_ms = 5000;

enum job_kind {
	JOB_QUERY,    /* db_query() or db_conn_query() */
	JOB_ACQUIRE,  /* db_acquire() */
	JOB_ROLLBACK, /* ours: ends a transaction left open on release */
};

struct job {
	STAILQ_ENTRY(job) link;
	enum job_kind kind;
	db_cb cb;
	db_acquire_cb acb;
	void *arg;
	struct db_conn *grant; /* JOB_ACQUIRE: the connection handed over */
	PGresult *res;
	enum rc rc;
	long long deadline; /* monotonic ms, while queued */
	const char *sql;
	int sql_kept;      /* sql is the caller's, kept unchanged (db_query_kept) */
	int sql_hashed;    /* sql_hash is computed (on the first prep_find) */
	unsigned sql_hash; /* to find its prepared statement quickly */
	int nparams;
	const char **params;
	struct event *ev; /* completion; storage is part of this allocation */
};

STAILQ_HEAD(jobq, job);

enum conn_state { CONN_DOWN, CONN_CONNECTING, CONN_UP };

struct db_conn {
	int id;
	enum conn_state state;
	PGconn *pg;
	struct event *io;    /* on PQsocket() */
	struct event *timer; /* reconnect backoff, or connect timeout */
	int backoff_ms;
	int flushing;  /* PQflush() left output behind: wait for writability */
	int held;      /* pinned by db_acquire() */
	int releasing; /* db_release() came while a statement was in flight */
	int orphan;    /* the pool shut down while held: db_release() frees */
	struct job *cur;
	int preparing;        /* cur waits for the PREPARE of its statement */
	char *prep[PREP_MAX]; /* statements prepared here; prep[i] is "gc<i>" */
	unsigned prep_hash[PREP_MAX];
	const char *prep_kept[PREP_MAX]; /* a kept text's address seen for prep[i] */
	int nprep;
	PGresult *res;       /* result of cur collected so far */
	struct jobq pending; /* held: statements behind cur */
};

enum health { HEALTH_UNKNOWN, HEALTH_UP, HEALTH_DOWN };

struct pool {
	char *url;
	int size;
	int queue_max;
	int nqueued;
	int up;
	int known_down; /* no connection up and the last attempt failed */
	enum health health;
	long long queries, errors;
	struct jobq queue;
	struct event *qtimer; /* deadline of the queue's head */
	struct db_conn **conns;
};

static struct event_base *base;
static struct pool *pool;

static void on_io(evutil_socket_t fd, short what, void *arg);
static void conn_down(struct db_conn *c, const char *why);
static void conn_next(struct db_conn *c);
static void conn_free(struct db_conn *c);

static long long now_ms(void)
{
	return (long long)clock_now_ms();
}

/* libpq messages end in a newline and may run on with hints: log line one. */
static int msglen(const char *s)
{
	return s ? (int)strcspn(s, "\n") : 0;
}

static const char *errmsg(const PGresult *res, const PGconn *pg)
{
	const char *m = res ? PQresultErrorField(res, PG_DIAG_MESSAGE_PRIMARY) : NULL;

	if (!m && res)
		m = PQresultErrorMessage(res);
	if ((!m || !*m) && pg)
		m = PQerrorMessage(pg);
	return m ? m : "";
}

static void on_notice(void *arg, const PGresult *res)
{
	const char *sev = PQresultErrorField(res, PG_DIAG_SEVERITY_NONLOCALIZED);
	const char *msg = PQresultErrorField(res, PG_DIAG_MESSAGE_PRIMARY);

	(void)arg;
	if (!sev || !msg)
		return;
	/* Only warnings are news: a FATAL on an idle connection is a restart
	 * or a kill, which the pool's down/up lines report once. */
	log_msg(strcmp(sev, "WARNING") == 0 ? LOG_WARN : LOG_DEBUG, "db", NULL, "server %s: %s",
	        sev, msg);
}

static size_t align_up(size_t n)
{
	size_t a = alignof(max_align_t);

	return (n + a - 1) & ~(a - 1);
}

/* One allocation holds the job, its completion event and copies of the SQL
 * and parameters (the caller's buffers may be gone before it runs). */
/* sql is copied into the job unless kept: then it is only pointed at. */
static struct job *job_new(enum job_kind kind, const char *sql, int kept, int nparams,
                           const char *const *params)
{
	size_t off_ev = align_up(sizeof(struct job));
	size_t off_params = align_up(off_ev + event_get_struct_event_size());
	size_t len = off_params + (size_t)nparams * sizeof(char *);
	struct job *j;
	char *p;
	size_t n;
	int i;

	if (sql && !kept)
		len += strlen(sql) + 1;
	for (i = 0; i < nparams; i++)
		if (params[i])
			len += strlen(params[i]) + 1;
	j = calloc(1, len);
	if (!j) {
		LOG_E("db", "out of memory for a query of %zu bytes", len);
		abort();
	}
	j->kind = kind;
	j->ev = (struct event *)((char *)j + off_ev);
	j->params = (const char **)((char *)j + off_params);
	j->nparams = nparams;
	p = (char *)(j->params + nparams);
	if (sql && kept) {
		j->sql = sql;
		j->sql_kept = 1;
	} else if (sql) {
		n = strlen(sql) + 1;
		memcpy(p, sql, n);
		j->sql = p;
		p += n;
	}
	for (i = 0; i < nparams; i++) {
		if (!params[i])
			continue;
		n = strlen(params[i]) + 1;
		memcpy(p, params[i], n);
		j->params[i] = p;
		p += n;
	}
	return j;
}

static void deliver(evutil_socket_t fd, short what, void *arg)
{
	struct job *j = arg;
	struct db_conn *c = j->grant;

	(void)fd;
	(void)what;
	if (j->kind == JOB_ACQUIRE) {
		if (c && c->orphan) {
			/* The pool shut down before the holder heard of c. */
			conn_free(c);
			c = NULL;
			j->rc = RC_UNAVAILABLE;
		} else if (c && c->state != CONN_UP) {
			db_release(c);
			c = NULL;
			j->rc = RC_UNAVAILABLE;
		}
		j->acb(c, j->rc, j->arg);
	} else if (j->cb) {
		j->cb(j->res, j->rc, j->arg);
	}
	PQclear(j->res);
	free(j);
}

/* Completes j from the loop, later: the only road to a caller's callback.
 * Takes ownership of res. */
static void finish(struct job *j, PGresult *res, enum rc rc)
{
	assert(base);
	if (j->kind == JOB_ROLLBACK) {
		PQclear(res);
		free(j);
		return;
	}
	j->res = res;
	j->rc = rc;
	if (pool && j->kind == JOB_QUERY) {
		pool->queries++;
		if (rc != RC_OK)
			pool->errors++;
	}
	event_assign(j->ev, base, -1, 0, deliver, j);
	event_active(j->ev, EV_TIMEOUT, 1);
}

static void fail_all(struct jobq *q)
{
	struct job *j;

	while ((j = STAILQ_FIRST(q))) {
		STAILQ_REMOVE_HEAD(q, link);
		finish(j, NULL, RC_UNAVAILABLE);
	}
}

static enum rc result_rc(const PGresult *res, const PGconn *pg, const char *sql)
{
	ExecStatusType st = res ? PQresultStatus(res) : PGRES_FATAL_ERROR;
	const char *state = db_sqlstate(res);
	const char *msg;

	if (st == PGRES_TUPLES_OK || st == PGRES_COMMAND_OK)
		return RC_OK;
	msg = errmsg(res, pg);
	if (strcmp(state, "23505") == 0 || strcmp(state, "23P01") == 0)
		return RC_CONFLICT;
	if (strncmp(state, "22", 2) == 0 || strncmp(state, "23", 2) == 0) {
		LOG_D("db", "query rejected (%s): %.*s", state, msglen(msg), msg);
		return RC_INVALID;
	}
	/* Connection exceptions, and the server shutting down or starting. */
	if (strncmp(state, "08", 2) == 0 || strcmp(state, "57P01") == 0 ||
	    strcmp(state, "57P02") == 0 || strcmp(state, "57P03") == 0 ||
	    PQstatus(pg) == CONNECTION_BAD)
		return RC_UNAVAILABLE;
	LOG_E("db", "query failed (%s): %.*s; statement '%.80s'", *state ? state : "no sqlstate",
	      msglen(msg), msg, sql);
	return RC_DB;
}

static void arm_qtimer(void)
{
	struct job *j = STAILQ_FIRST(&pool->queue);
	struct timeval tv;
	long long ms;

	if (!j) {
		evtimer_del(pool->qtimer);
		return;
	}
	ms = j->deadline - now_ms();
	if (ms < 0)
		ms = 0;
	tv.tv_sec = ms / 1000;
	tv.tv_usec = (ms % 1000) * 1000;
	evtimer_add(pool->qtimer, &tv);
}

static void on_qtimer(evutil_socket_t fd, short what, void *arg)
{
	long long now = now_ms();
	struct job *j;
	int n = 0;

	(void)fd;
	(void)what;
	(void)arg;
	while ((j = STAILQ_FIRST(&pool->queue)) && j->deadline <= now) {
		STAILQ_REMOVE_HEAD(&pool->queue, link);
		pool->nqueued--;
		finish(j, NULL, RC_UNAVAILABLE);
		n++;
	}
	if (n)
		LOG_W("db", "%d queries waited over %d ms for a connection", n, queue_wait_ms);
	arm_qtimer();
}

/* Points c's event at its socket.  The socket can change between
 * PQconnectPoll() steps (another address, another host), so while
 * connecting the event is always registered afresh. */
static int watch(struct db_conn *c, short what)
{
	evutil_socket_t fd = PQsocket(c->pg);

	if (fd < 0)
		return -1;
	what |= EV_PERSIST;
	if (c->state == CONN_UP && event_pending(c->io, EV_READ | EV_WRITE, NULL) &&
	    event_get_fd(c->io) == fd && event_get_events(c->io) == what)
		return 0;
	event_del(c->io);
	if (event_assign(c->io, base, fd, what, on_io, c) < 0 || event_add(c->io, NULL) < 0)
		return -1;
	return 0;
}

static void conn_close(struct db_conn *c)
{
	if (c->io)
		event_del(c->io);
	if (c->timer)
		evtimer_del(c->timer);
	PQfinish(c->pg);
	c->pg = NULL;
	PQclear(c->res);
	c->res = NULL;
	c->flushing = 0;
	c->preparing = 0;
	for (int i = 0; i < c->nprep; i++)
		free(c->prep[i]);
	c->nprep = 0;
	c->state = CONN_DOWN;
}

static void conn_free(struct db_conn *c)
{
	if (!c)
		return;
	conn_close(c);
	if (c->io)
		event_free(c->io);
	if (c->timer)
		event_free(c->timer);
	free(c);
}

static void reconnect_later(struct db_conn *c)
{
	struct timeval tv;

	tv.tv_sec = c->backoff_ms / 1000;
	tv.tv_usec = (c->backoff_ms % 1000) * 1000;
	evtimer_add(c->timer, &tv);
	c->backoff_ms *= 2;
	if (c->backoff_ms > BACKOFF_MAX_MS)
		c->backoff_ms = BACKOFF_MAX_MS;
}

static void connect_start(struct db_conn *c)
{
	struct timeval tv = { CONNECT_TIMEOUT_MS / 1000, 0 };

	c->pg = PQconnectStart(pool->url);
	if (!c->pg) {
		conn_down(c, "out of memory");
		return;
	}
	if (PQstatus(c->pg) == CONNECTION_BAD) {
		conn_down(c, PQerrorMessage(c->pg));
		return;
	}
	PQsetNoticeReceiver(c->pg, on_notice, NULL);
	c->state = CONN_CONNECTING;
	evtimer_add(c->timer, &tv);
	/* As if PQconnectPoll() had answered PGRES_POLLING_WRITING. */
	if (watch(c, EV_WRITE) < 0)
		conn_down(c, PQerrorMessage(c->pg));
}

static void conn_up(struct db_conn *c)
{
	evtimer_del(c->timer);
	if (PQsetnonblocking(c->pg, 1) < 0 || watch(c, EV_READ) < 0) {
		conn_down(c, PQerrorMessage(c->pg));
		return;
	}
	c->state = CONN_UP;
	c->backoff_ms = BACKOFF_MIN_MS;
	pool->up++;
	pool->known_down = 0;
	if (pool->health != HEALTH_UP) {
		LOG_I("db", "database up");
		pool->health = HEALTH_UP;
	}
	LOG_D("db", "connection %d up", c->id);
	conn_next(c);
}

/* c failed to connect, or broke: fail what it carried, close it and retry
 * later.  A held connection stays down until released, so that nothing the
 * holder sends after a reconnect runs outside its transaction. */
static void conn_down(struct db_conn *c, const char *why)
{
	int was_up = c->state == CONN_UP;
	char msg[256];

	snprintf(msg, sizeof(msg), "%.*s", msglen(why), why ? why : "");
	LOG_D("db", "connection %d %s: %s", c->id, was_up ? "lost" : "failed", msg);
	conn_close(c);
	if (c->cur) {
		finish(c->cur, NULL, RC_UNAVAILABLE);
		c->cur = NULL;
	}
	fail_all(&c->pending);
	if (was_up)
		pool->up--;
	if (pool->up == 0) {
		pool->known_down = 1;
		if (pool->health != HEALTH_DOWN) {
			LOG_E("db", "database down: %s", msg);
			pool->health = HEALTH_DOWN;
		}
		fail_all(&pool->queue);
		pool->nqueued = 0;
		arm_qtimer();
	}
	if (c->releasing) {
		/* Its holder has let go already. */
		c->held = 0;
		c->releasing = 0;
	}
	if (!c->held)
		reconnect_later(c);
}

static void connect_step(struct db_conn *c)
{
	switch (PQconnectPoll(c->pg)) {
	case PGRES_POLLING_READING:
		if (watch(c, EV_READ) == 0)
			return;
		break;
	case PGRES_POLLING_WRITING:
		if (watch(c, EV_WRITE) == 0)
			return;
		break;
	case PGRES_POLLING_OK: conn_up(c); return;
	default: break;
	}
	conn_down(c, PQerrorMessage(c->pg));
}

/* The index of j's statement among those prepared on c, or -1.  A kept
 * text is found by its address once it has been seen. */
static int prep_find(struct db_conn *c, struct job *j)
{
	int i;

	if (j->sql_kept)
		for (i = 0; i < c->nprep; i++)
			if (c->prep_kept[i] == j->sql)
				return i;
	if (!j->sql_hashed) {
		j->sql_hash = 2166136261u;
		for (const char *q = j->sql; *q; q++)
			j->sql_hash = (j->sql_hash ^ (unsigned char)*q) * 16777619u;
		j->sql_hashed = 1;
	}
	for (i = 0; i < c->nprep; i++)
		if (c->prep_hash[i] == j->sql_hash && strcmp(c->prep[i], j->sql) == 0) {
			if (j->sql_kept)
				c->prep_kept[i] = j->sql;
			return i;
		}
	return -1;
}

/* Sends j on c: the prepared statement when c has it, else its PREPARE
 * first (query_done() then sends j again), else the unnamed statement.
 * Returns -1 when c went down (j has been failed), else 0. */
static int conn_send(struct db_conn *c, struct job *j)
{
	int n, ok, idx = j->kind == JOB_QUERY ? prep_find(c, j) : -2;
	char name[16];

	c->cur = j;
	if (idx >= 0) {
		snprintf(name, sizeof(name), "gc%d", idx);
		ok = PQsendQueryPrepared(c->pg, name, j->nparams, j->params, NULL, NULL, 0);
	} else if (idx == -1 && c->nprep < PREP_MAX) {
		snprintf(name, sizeof(name), "gc%d", c->nprep);
		ok = PQsendPrepare(c->pg, name, j->sql, j->nparams, NULL);
		c->preparing = ok;
	} else {
		ok = PQsendQueryParams(c->pg, j->sql, j->nparams, NULL, j->params, NULL, NULL, 0);
	}
	if (!ok) {
		if (PQstatus(c->pg) == CONNECTION_BAD || j->kind == JOB_ROLLBACK) {
			conn_down(c, PQerrorMessage(c->pg));
			return -1;
		}
		c->cur = NULL;
		LOG_E("db", "could not send statement '%.80s': %.*s", j->sql,
		      msglen(PQerrorMessage(c->pg)), PQerrorMessage(c->pg));
		finish(j, PQmakeEmptyPGresult(c->pg, PGRES_FATAL_ERROR), RC_DB);
		return 0;
	}
	n = PQflush(c->pg);
	if (n < 0) {
		conn_down(c, PQerrorMessage(c->pg));
		return -1;
	}
	c->flushing = n > 0;
	if (watch(c, c->flushing ? EV_READ | EV_WRITE : EV_READ) < 0) {
		conn_down(c, "could not watch the connection");
		return -1;
	}
	if (statement_timeout_ms > 0) {
		struct timeval tv = { statement_timeout_ms / 1000,
			              (statement_timeout_ms % 1000) * 1000 };
		evtimer_add(c->timer, &tv);
	}
	return 0;
}

/* The holder let go of c: back to the pool, through a ROLLBACK if it left a
 * transaction open, through a reconnect if it broke. */
static void conn_release(struct db_conn *c)
{
	c->held = 0;
	c->releasing = 0;
	if (c->state != CONN_UP) {
		if (!evtimer_pending(c->timer, NULL))
			reconnect_later(c);
		return;
	}
	conn_next(c);
}

/* c is up with nothing in flight: give it its next piece of work. */
static void conn_next(struct db_conn *c)
{
	PGTransactionStatusType ts;
	struct job *j;

	if (c->held) {
		while (!c->cur && (j = STAILQ_FIRST(&c->pending))) {
			STAILQ_REMOVE_HEAD(&c->pending, link);
			if (conn_send(c, j) < 0)
				return;
		}
		if (!c->cur && c->releasing)
			conn_release(c);
		return;
	}
	ts = PQtransactionStatus(c->pg);
	if (ts == PQTRANS_INTRANS || ts == PQTRANS_INERROR) {
		conn_send(c, job_new(JOB_ROLLBACK, "ROLLBACK", 0, 0, NULL));
		return;
	}
	if (ts != PQTRANS_IDLE) {
		conn_down(c, "connection in an unexpected state");
		return;
	}
	while ((j = STAILQ_FIRST(&pool->queue))) {
		STAILQ_REMOVE_HEAD(&pool->queue, link);
		pool->nqueued--;
		if (j->kind == JOB_ACQUIRE) {
			c->held = 1;
			j->grant = c;
			finish(j, NULL, RC_OK);
			break;
		}
		if (conn_send(c, j) < 0)
			return; /* conn_down() re-armed the queue timer */
		if (c->cur)
			break;
	}
	arm_qtimer();
}

static void query_done(struct db_conn *c)
{
	struct job *j = c->cur;
	PGresult *res = c->res;
	enum rc rc;
	int stuck;

	if (c->preparing) {
		c->preparing = 0;
		if (res && PQresultStatus(res) == PGRES_COMMAND_OK &&
		    (c->prep[c->nprep] = strdup(j->sql))) {
			c->prep_kept[c->nprep] = j->sql_kept ? j->sql : NULL;
			c->prep_hash[c->nprep++] = j->sql_hash;
			PQclear(res);
			c->res = NULL;
			evtimer_del(c->timer);
			conn_send(c, j); /* now as the prepared statement */
			return;
		}
		/* a statement that cannot be prepared fails like it would run */
	}
	c->cur = NULL;
	c->res = NULL;
	evtimer_del(c->timer);
	rc = result_rc(res, c->pg, j->sql);
	stuck = j->kind == JOB_ROLLBACK && rc != RC_OK;
	if (rc == RC_UNAVAILABLE) {
		PQclear(res);
		res = NULL;
	}
	finish(j, res, rc);
	if (PQstatus(c->pg) == CONNECTION_BAD)
		conn_down(c, PQerrorMessage(c->pg));
	else if (stuck)
		conn_down(c, "could not roll back an abandoned transaction");
	else
		conn_next(c);
}

static void conn_io(struct db_conn *c, short what)
{
	PGnotify *note;
	PGresult *r;
	int n;

	if ((what & EV_READ) && !PQconsumeInput(c->pg))
		goto broken;
	if (c->flushing) {
		n = PQflush(c->pg);
		if (n < 0)
			goto broken;
		if (n > 0)
			return;
		c->flushing = 0;
		if (watch(c, EV_READ) < 0)
			goto broken;
	}
	if (!c->cur) {
		while ((note = PQnotifies(c->pg)))
			PQfreemem(note);
		if (PQstatus(c->pg) == CONNECTION_BAD)
			goto broken;
		return;
	}
	while (!PQisBusy(c->pg)) {
		r = PQgetResult(c->pg);
		if (!r) {
			query_done(c);
			return;
		}
		/* One statement gives one result; keep the first error. */
		if (c->res && PQresultStatus(c->res) == PGRES_FATAL_ERROR) {
			PQclear(r);
		} else {
			PQclear(c->res);
			c->res = r;
		}
	}
	if (PQstatus(c->pg) != CONNECTION_BAD)
		return;
broken:
	conn_down(c, PQerrorMessage(c->pg));
}

static void on_io(evutil_socket_t fd, short what, void *arg)
{
	struct db_conn *c = arg;

	(void)fd;
	if (c->state == CONN_CONNECTING)
		connect_step(c);
	else if (c->state == CONN_UP)
		conn_io(c, what);
}

static void on_timer(evutil_socket_t fd, short what, void *arg)
{
	struct db_conn *c = arg;

	(void)fd;
	(void)what;
	if (c->state == CONN_CONNECTING) {
		conn_down(c, "connection attempt timed out");
	} else if (c->state == CONN_UP && c->cur) {
		LOG_W("db", "statement on connection %d got no answer in %d ms: reconnecting",
		      c->id, statement_timeout_ms);
		conn_down(c, "statement timed out");
	} else if (c->state == CONN_DOWN && !c->held)
		connect_start(c);
}

static struct db_conn *idle_conn(void)
{
	int i;

	for (i = 0; i < pool->size; i++) {
		struct db_conn *c = pool->conns[i];

		if (c->state == CONN_UP && !c->held && !c->cur)
			return c;
	}
	return NULL;
}

static void submit(struct job *j)
{
	struct db_conn *c;

	if (!pool) {
		finish(j, NULL, RC_UNAVAILABLE);
		return;
	}
	c = idle_conn();
	if (c && j->kind == JOB_ACQUIRE) {
		c->held = 1;
		j->grant = c;
		finish(j, NULL, RC_OK);
		return;
	}
	if (c) {
		conn_send(c, j);
		return;
	}
	if ((pool->up == 0 && pool->known_down) || pool->nqueued >= pool->queue_max) {
		finish(j, NULL, RC_UNAVAILABLE);
		return;
	}
	j->deadline = now_ms() + queue_wait_ms;
	STAILQ_INSERT_TAIL(&pool->queue, j, link);
	if (++pool->nqueued == 1)
		arm_qtimer();
}

static void pool_free(struct pool *p)
{
	int i;

	if (!p)
		return;
	for (i = 0; p->conns && i < p->size; i++)
		conn_free(p->conns[i]);
	free(p->conns);
	if (p->qtimer)
		event_free(p->qtimer);
	free(p->url);
	free(p);
}

int db_init(struct event_base *b, const char *url, int pool_size, int queue_max)
{
	PQconninfoOption *opts = NULL;
	struct pool *p = NULL;
	char *err = NULL;
	int i, ret = -1;

	if (pool) {
		LOG_E("db", "database pool already started");
		goto out;
	}
	if (!b || !url || pool_size < 1 || queue_max < 0) {
		LOG_E("db", "bad database pool settings (size %d, queue %d)", pool_size, queue_max);
		goto out;
	}
	/* Never log url: it may hold a password. */
	opts = PQconninfoParse(url, &err);
	if (!opts) {
		const char *m = err ? err : "out of memory";

		LOG_E("db", "unusable database url: %.*s", msglen(m), m);
		goto out;
	}
	p = calloc(1, sizeof(*p));
	if (!p || !(p->conns = calloc((size_t)pool_size, sizeof(*p->conns))) ||
	    !(p->url = strdup(url)) || !(p->qtimer = evtimer_new(b, on_qtimer, NULL)))
		goto nomem;
	p->size = pool_size;
	p->queue_max = queue_max;
	STAILQ_INIT(&p->queue);
	for (i = 0; i < pool_size; i++) {
		struct db_conn *c = calloc(1, sizeof(*c));

		p->conns[i] = c;
		if (!c || !(c->io = event_new(b, -1, 0, on_io, c)) ||
		    !(c->timer = evtimer_new(b, on_timer, c)))
			goto nomem;
		c->id = i;
		c->backoff_ms = BACKOFF_MIN_MS;
		STAILQ_INIT(&c->pending);
	}
	base = b;
	pool = p;
	p = NULL; /* handed off */
	for (i = 0; i < pool->size; i++)
		connect_start(pool->conns[i]);
	ret = 0;
	goto out;
nomem:
	LOG_E("db", "out of memory starting the database pool");
out:
	PQconninfoFree(opts);
	PQfreemem(err);
	pool_free(p);
	return ret;
}

static void query(const char *sql, int kept, int nparams, const char *const *params, db_cb cb,
                  void *arg)
{
	struct job *j;

	assert(sql && nparams >= 0 && (nparams == 0 || params));
	j = job_new(JOB_QUERY, sql, kept, nparams, params);
	j->cb = cb;
	j->arg = arg;
	submit(j);
}

void db_query(const char *sql, int nparams, const char *const *params, db_cb cb, void *arg)
{
	query(sql, 0, nparams, params, cb, arg);
}

void db_query_kept(const char *sql, int nparams, const char *const *params, db_cb cb, void *arg)
{
	query(sql, 1, nparams, params, cb, arg);
}

void db_query_args(const char *sql, const struct db_args *a, db_cb cb, void *arg)
{
	db_query(sql, a->n, a->v, cb, arg);
}

void db_conn_query_args(struct db_conn *c, const char *sql, const struct db_args *a, db_cb cb,
                        void *arg)
{
	db_conn_query(c, sql, a->n, a->v, cb, arg);
}

static void arg_add(struct db_args *a, const char *v)
{
	/* the capacity is a fact of the call site, not of input */
	assert(a->n < DB_ARGS_MAX);
	if (a->n < DB_ARGS_MAX)
		a->v[a->n++] = v;
}

void db_arg_str(struct db_args *a, const char *s)
{
	arg_add(a, s);
}

void db_arg_ll(struct db_args *a, long long v)
{
	char *buf;

	if (a->n >= DB_ARGS_MAX) {
		arg_add(a, NULL);
		return;
	}
	buf = a->num[a->n];
	snprintf(buf, sizeof(a->num[0]), "%lld", v);
	arg_add(a, buf);
}

void db_arg_ll_opt(struct db_args *a, long long v, int present)
{
	if (present)
		db_arg_ll(a, v);
	else
		arg_add(a, NULL);
}

void db_arg_null(struct db_args *a)
{
	arg_add(a, NULL);
}

void db_acquire(db_acquire_cb cb, void *arg)
{
	struct job *j;

	assert(cb);
	j = job_new(JOB_ACQUIRE, NULL, 0, 0, NULL);
	j->acb = cb;
	j->arg = arg;
	submit(j);
}

void db_conn_query(struct db_conn *c, const char *sql, int nparams, const char *const *params,
                   db_cb cb, void *arg)
{
	struct job *j;

	assert(sql && nparams >= 0 && (nparams == 0 || params));
	j = job_new(JOB_QUERY, sql, 0, nparams, params);
	j->cb = cb;
	j->arg = arg;
	if (!c || c->orphan || !c->held || c->releasing || c->state != CONN_UP) {
		finish(j, NULL, RC_UNAVAILABLE);
		return;
	}
	if (c->cur) {
		STAILQ_INSERT_TAIL(&c->pending, j, link);
		return;
	}
	conn_send(c, j);
}

void db_release(struct db_conn *c)
{
	if (!c)
		return;
	if (c->orphan) {
		conn_free(c);
		return;
	}
	if (!c->held || c->releasing) {
		LOG_E("db", "connection %d released but not held", c->id);
		return;
	}
	if (c->cur) {
		c->releasing = 1; /* conn_next() finishes the job */
		return;
	}
	conn_release(c);
}

void db_set_statement_timeout(int ms)
{
	statement_timeout_ms = ms;
}

int db_ready(void)
{
	return pool && pool->up > 0;
}

void db_get_stats(struct db_stats *s)
{
	int i;

	memset(s, 0, sizeof(*s));
	if (!pool)
		return;
	s->size = pool->size;
	s->up = pool->up;
	s->waiting = pool->nqueued;
	s->queries = pool->queries;
	s->errors = pool->errors;
	for (i = 0; i < pool->size; i++)
		if (pool->conns[i]->held || pool->conns[i]->cur)
			s->busy++;
}

void db_shutdown(void)
{
	struct pool *p = pool;
	int i;

	if (!p)
		return;
	fail_all(&p->queue);
	p->nqueued = 0;
	for (i = 0; i < p->size; i++) {
		struct db_conn *c = p->conns[i];

		conn_close(c);
		if (c->cur) {
			finish(c->cur, NULL, RC_UNAVAILABLE);
			c->cur = NULL;
		}
		fail_all(&c->pending);
		if (c->held && !c->releasing) {
			/* The holder still has c and will db_release() it. */
			event_free(c->io);
			event_free(c->timer);
			c->io = NULL;
			c->timer = NULL;
			c->orphan = 1;
			p->conns[i] = NULL;
		}
	}
	pool = NULL;
	pool_free(p);
	LOG_I("db", "database pool shut down");
}

/* Start-up migrations: blocking libpq on a connection of their own. */

static int is_migration(const struct dirent *d)
{
	const char *n = d->d_name;
	size_t len = strlen(n);
	int i;

	if (len < 9 || strcmp(n + len - 4, ".sql") != 0 || n[4] != '_')
		return 0;
	for (i = 0; i < 4; i++)
		if (n[i] < '0' || n[i] > '9')
			return 0;
	return 1;
}

static int by_name(const struct dirent **a, const struct dirent **b)
{
	return strcmp((*a)->d_name, (*b)->d_name);
}

/* Runs sql (several statements when nparams is 0); returns 0, or -1 after
 * logging "<subject> failed: <error>". */
static int run(PGconn *pg, const char *subject, const char *sql, int nparams,
               const char *const *params)
{
	PGresult *r;
	ExecStatusType st;
	const char *m;
	int ret = 0;

	if (nparams)
		r = PQexecParams(pg, sql, nparams, NULL, params, NULL, NULL, 0);
	else
		r = PQexec(pg, sql);
	st = r ? PQresultStatus(r) : PGRES_FATAL_ERROR;
	if (st != PGRES_COMMAND_OK && st != PGRES_TUPLES_OK) {
		m = errmsg(r, pg);
		LOG_E("db", "%s failed: %.*s", subject, msglen(m), m);
		ret = -1;
	}
	PQclear(r);
	return ret;
}

static char *read_migration(const char *dir, const char *name)
{
	char path[PATH_MAX];
	char *buf = NULL, *ret = NULL;
	struct stat st;
	size_t off = 0;
	ssize_t n;
	int fd = -1;

	if (snprintf(path, sizeof(path), "%s/%s", dir, name) >= (int)sizeof(path)) {
		LOG_E("db", "migration path too long: '%s/%s'", dir, name);
		goto out;
	}
	fd = open(path, O_RDONLY | O_CLOEXEC);
	if (fd < 0 || fstat(fd, &st) < 0) {
		LOG_E("db", "could not read migration '%s': %s", path, strerror(errno));
		goto out;
	}
	if (!S_ISREG(st.st_mode) || st.st_size > MIGRATION_MAX_BYTES) {
		LOG_E("db", "migration '%s' is not a regular file under %d bytes", path,
		      MIGRATION_MAX_BYTES);
		goto out;
	}
	buf = malloc((size_t)st.st_size + 1);
	if (!buf) {
		LOG_E("db", "out of memory reading migration '%s'", path);
		goto out;
	}
	while (off < (size_t)st.st_size) {
		n = read(fd, buf + off, (size_t)st.st_size - off);
		if (n < 0 && errno == EINTR)
			continue;
		if (n < 0) {
			LOG_E("db", "could not read migration '%s': %s", path, strerror(errno));
			goto out;
		}
		if (n == 0)
			break;
		off += (size_t)n;
	}
	buf[off] = '\0';
	if (memchr(buf, '\0', off)) {
		LOG_E("db", "migration '%s' contains a NUL byte", path);
		goto out;
	}
	ret = buf;
	buf = NULL; /* handed off */
out:
	if (fd >= 0)
		close(fd);
	free(buf);
	return ret;
}

/* Applies one file and records it, in one transaction. */
static int apply(PGconn *pg, const char *name, const char *version, const char *text)
{
	const char *params[1] = { version };
	char subject[300];
	int ret = -1;

	snprintf(subject, sizeof(subject), "migration '%s'", name);
	if (run(pg, subject, "BEGIN", 0, NULL) < 0 || run(pg, subject, text, 0, NULL) < 0)
		goto out;
	if (PQtransactionStatus(pg) != PQTRANS_INTRANS) {
		LOG_E("db",
		      "migration '%s' ended its own transaction; "
		      "remove BEGIN/COMMIT from the file",
		      name);
		goto out;
	}
	if (run(pg, subject, "INSERT INTO schema_migrations (version) VALUES ($1)", 1, params) <
	            0 ||
	    run(pg, subject, "COMMIT", 0, NULL) < 0)
		goto out;
	LOG_I("db", "applied migration '%s'", name);
	ret = 0;
out:
	if (ret < 0 && PQtransactionStatus(pg) != PQTRANS_IDLE)
		PQclear(PQexec(pg, "ROLLBACK"));
	return ret;
}

int db_migrate(const char *url, const char *dir)
{
	struct dirent **ents = NULL;
	const char *params[1];
	PGconn *pg = NULL;
	PGresult *r = NULL;
	char *text = NULL;
	char version[256];
	int i, n = 0, applied = 0, locked = 0, ret = -1;
	const char *name;

	pg = PQconnectdb(url);
	if (!pg || PQstatus(pg) != CONNECTION_OK) {
		const char *m = pg ? PQerrorMessage(pg) : "out of memory";

		LOG_E("db", "migrations: could not connect to the database: %.*s", msglen(m), m);
		goto out;
	}
	PQsetNoticeReceiver(pg, on_notice, NULL);
	/* Two replicas starting together: the second waits here, then finds
	 * everything applied. */
	if (run(pg, "taking the migration lock", "SELECT pg_advisory_lock(" MIGRATE_LOCK_KEY ")", 0,
	        NULL) < 0)
		goto out;
	locked = 1;
	if (run(pg, "creating schema_migrations",
	        /* only when missing: an application role without CREATE on the
	         * schema (README "Audit log") starts on a migrated database */
	        "DO $$ BEGIN IF to_regclass('schema_migrations') IS NULL THEN "
	        "CREATE TABLE schema_migrations ("
	        "version text PRIMARY KEY, "
	        "applied_at timestamptz NOT NULL DEFAULT now()); END IF; END $$",
	        0, NULL) < 0)
		goto out;
	n = scandir(dir, &ents, is_migration, by_name);
	if (n < 0) {
		LOG_E("db", "could not read migrations directory '%s': %s", dir, strerror(errno));
		n = 0;
		goto out;
	}
	for (i = 0; i < n; i++) {
		name = ents[i]->d_name;
		snprintf(version, sizeof(version), "%.*s", (int)(strlen(name) - 4), name);
		params[0] = version;
		r = PQexecParams(pg,
		                 "SELECT 1 FROM schema_migrations "
		                 "WHERE version = $1",
		                 1, NULL, params, NULL, NULL, 0);
		if (PQresultStatus(r) != PGRES_TUPLES_OK) {
			const char *m = errmsg(r, pg);

			LOG_E("db", "reading schema_migrations failed: %.*s", msglen(m), m);
			goto out;
		}
		if (PQntuples(r) > 0) {
			PQclear(r);
			r = NULL;
			continue;
		}
		PQclear(r);
		r = NULL;
		text = read_migration(dir, name);
		if (!text || apply(pg, name, version, text) < 0)
			goto out;
		free(text);
		text = NULL;
		applied++;
	}
	LOG_I("db", "migrations: %d applied now, %d before", applied, n - applied);
	ret = 0;
out:
	if (locked && PQstatus(pg) == CONNECTION_OK)
		run(pg, "releasing the migration lock",
		    "SELECT pg_advisory_unlock(" MIGRATE_LOCK_KEY ")", 0, NULL);
	PQclear(r);
	free(text);
	for (i = 0; i < n; i++)
		free(ents[i]);
	free(ents);
	PQfinish(pg);
	return ret;
}

const char *db_val(const PGresult *res, int row, int col)
{
	if (!res || row < 0 || col < 0 || row >= PQntuples(res) || col >= PQnfields(res) ||
	    PQgetisnull(res, row, col))
		return NULL;
	return PQgetvalue(res, row, col);
}

const char *db_sqlstate(const PGresult *res)
{
	const char *s = res ? PQresultErrorField(res, PG_DIAG_SQLSTATE) : NULL;

	return s ? s : "";
}

void db_ignore(PGresult *res, enum rc rc, void *arg)
{
	(void)res;
	(void)arg;
	if (rc != RC_OK)
		log_msg(LOG_WARN, "db", NULL, "background statement failed: %s", rc_code(rc));
}
