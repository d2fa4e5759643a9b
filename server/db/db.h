/* db.h — PostgreSQL through libpq, non-blocking, on the event loop.
 *
 * A small pool of connections, each driven by an event on PQsocket()
 * (PQsendQueryParams, PQconsumeInput, PQisBusy, PQgetResult).  Queries wait in
 * a FIFO when every connection is busy.  When PostgreSQL goes away, in-flight
 * and queued queries complete with RC_UNAVAILABLE at once, the pool reconnects
 * in the background (PQconnectStart/PQconnectPoll, backoff up to 2 s) and new
 * queries fail fast with RC_UNAVAILABLE until a connection is back.
 * All SQL is parameterised; parameters are text (NULL = SQL NULL).
 * Migrations run once, blocking, at start-up, before the loop runs.
 */
#ifndef GPUCLOUD_DB_H
#define GPUCLOUD_DB_H

#include <libpq-fe.h>
#include <event2/event.h>
#include "base/rc.h"

/* Completion of a query.  Always fires exactly once, on the loop thread, never
 * from inside db_query() itself (failures are deferred to the loop).
 * rc: RC_OK            res is PGRES_TUPLES_OK or PGRES_COMMAND_OK
 *     RC_CONFLICT      unique or exclusion violation (SQLSTATE 23505/23P01)
 *     RC_INVALID       other integrity/data error (class 22, 23)
 *     RC_UNAVAILABLE   no connection / connection lost / pool shut down
 *     RC_DB            any other error (logged with its SQLSTATE)
 * res is borrowed (freed after cb returns); it is NULL for RC_UNAVAILABLE. */
typedef void (*db_cb)(PGresult *res, enum rc rc, void *arg);

struct db_conn;

/* Connection released to the caller by db_acquire(); see below. */
typedef void (*db_acquire_cb)(struct db_conn *c, enum rc rc, void *arg);

struct db_stats {
	int size;          /* configured connections */
	int up;            /* connected */
	int busy;          /* running a query or held by db_acquire */
	int waiting;       /* queries queued for a connection */
	long long queries; /* completed since start */
	long long errors;  /* completed with rc != RC_OK */
};

/* Starts the pool: opens pool_size connections asynchronously.  queue_max
 * bounds the FIFO (beyond it, RC_UNAVAILABLE).  Returns 0, or -1 if url is
 * unusable. */
int db_init(struct event_base *base, const char *url, int pool_size, int queue_max);

/* Runs one statement on any free connection.  params are copied before
 * db_query() returns, so they may live on the caller's stack. */
void db_query(const char *sql, int nparams, const char *const *params, db_cb cb, void *arg);
/* db_query() for a statement text that stays at its address, unchanged,
 * while the pool lives (a literal, or text built once at start): it is not
 * copied, and its prepared statement is found by that address. */
void db_query_kept(const char *sql, int nparams, const char *const *params, db_cb cb, void *arg);

/* Statement parameters without hand-formatted buffers: a fixed-capacity list
 * on the caller's stack, filled in $1, $2, ... order and handed to
 * db_query_args().  No allocation; integers are formatted into the struct.
 *
 *     struct db_args a = DB_ARGS_INIT;
 *     db_arg_ll(&a, id);
 *     db_arg_str(&a, name);
 *     db_query_args("UPDATE t SET name = $2 WHERE id = $1", &a, done, r);
 *
 * Adding more than DB_ARGS_MAX is a bug (asserted; without assertions the
 * extra values are dropped and the statement fails on its parameter count). */
#define DB_ARGS_MAX 16
struct db_args {
	int n;
	const char *v[DB_ARGS_MAX];
	char num[DB_ARGS_MAX][24];
};
#define DB_ARGS_INIT ((struct db_args){ .n = 0 })

/* s is borrowed until db_query_args() returns; NULL is SQL NULL. */
void db_arg_str(struct db_args *a, const char *s);
void db_arg_ll(struct db_args *a, long long v);
/* v when present, else SQL NULL. */
void db_arg_ll_opt(struct db_args *a, long long v, int present);
void db_arg_null(struct db_args *a);

/* db_query() / db_conn_query() with the parameters of a. */
void db_query_args(const char *sql, const struct db_args *a, db_cb cb, void *arg);
void db_conn_query_args(struct db_conn *c, const char *sql, const struct db_args *a, db_cb cb,
                        void *arg);

/* The one way a timestamp leaves SQL for JSON: ISO 8601 in UTC, to the
 * second ("2025-01-31T12:00:00Z"), NULL stays NULL.  col is SQL text. */
#define DB_TS(col) "to_char((" col ") AT TIME ZONE 'UTC', 'YYYY-MM-DD\"T\"HH24:MI:SS\"Z\"')"
/* The same with milliseconds ("2025-01-31T12:00:00.123Z"), for logs. */
#define DB_TS_MS(col) "to_char((" col ") AT TIME ZONE 'UTC', 'YYYY-MM-DD\"T\"HH24:MI:SS.MS\"Z\"')"

/* Result columns by name: a query lists its columns once, next to its SQL,
 * as an X-macro whose first entry goes through FIRST and the others through
 * COL (so the SELECT list needs no stray comma):
 *
 *     #define NODE_COLS(FIRST, COL) FIRST(NODE_ID, "n.id") COL(NODE_NAME, "n.name")
 *     enum node_col { DB_COLS_ENUM(NODE_COLS) };  NODE_ID = 0, NODE_NAME = 1
 *     #define NODE_LIST DB_COLS_SQL(NODE_COLS)    "n.id, n.name"
 *     "SELECT " NODE_LIST " FROM nodes n"
 *
 * so db_val(res, i, NODE_NAME) cannot drift from the SQL. */
#define DB_COL_ENUM(name, sql) name,
#define DB_COL_SQL0(name, sql) sql
#define DB_COL_SQL(name, sql)  ", " sql
#define DB_COLS_ENUM(list)     list(DB_COL_ENUM, DB_COL_ENUM)
#define DB_COLS_SQL(list)      list(DB_COL_SQL0, DB_COL_SQL)

/* Pins one connection for a sequence of statements (a transaction: send
 * "BEGIN", ..., "COMMIT").  cb fires with rc RC_OK and a connection, or rc
 * RC_UNAVAILABLE and c NULL.  The holder must call db_release() exactly once;
 * if a transaction is still open then (or the connection broke), the pool
 * rolls back / reconnects before reuse. */
void db_acquire(db_acquire_cb cb, void *arg);
void db_conn_query(struct db_conn *c, const char *sql, int nparams, const char *const *params,
                   db_cb cb, void *arg);
void db_release(struct db_conn *c);

/* A statement without an answer after ms milliseconds (default 5000; 0 =
 * never) fails with RC_UNAVAILABLE and its connection is reconnected: a
 * frozen server must not hold requests forever. */
void db_set_statement_timeout(int ms);

/* 1 when at least one connection is up. */
int db_ready(void);
void db_get_stats(struct db_stats *s);

/* Fails everything queued with RC_UNAVAILABLE (callbacks fire from the loop)
 * and closes connections. */
void db_shutdown(void);

/* Blocking, for start-up only: connects to url, takes an advisory lock so two
 * replicas never migrate at once, creates schema_migrations, applies every
 * dir/NNNN_*.sql not yet recorded, in name order, each in its own transaction
 * together with its schema_migrations row.  Returns 0, or -1 (logged). */
int db_migrate(const char *url, const char *dir);

/* Helpers over results. */
/* Value of (row, col) or NULL when SQL NULL or out of range. */
const char *db_val(const PGresult *res, int row, int col);
/* SQLSTATE of an error result, or "" */
const char *db_sqlstate(const PGresult *res);

/* A db_cb for fire-and-forget statements: drops the result, logs a failure. */
void db_ignore(PGresult *res, enum rc rc, void *arg);

#endif
