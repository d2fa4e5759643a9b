/* account_import.h — what the two CSV imports of accounts share: POST
 * /users/import (api_users.c) and a class roster's import (api_classes.c).
 *
 * The file is parsed into rows, each line checked, every problem kept with
 * its line (ai_parse: pure, buf and len in, no I/O: fuzzed alone); the
 * handler adds the database's problems (ai_error) and replies them all in
 * file order (ai_reply_errors), or has the one-time passwords of the new
 * accounts hashed on the worker pool (ai_hash) and writes the rows.  What
 * differs — the columns allowed, the messages' wording, the role check,
 * what the statement does with the rows and the reply — is the handler's
 * (struct ai_spec and its own code).
 */
#ifndef GPUCLOUD_ACCOUNT_IMPORT_H
#define GPUCLOUD_ACCOUNT_IMPORT_H

#include <stddef.h>

#include <jansson.h>

struct http_req;

#define AI_MAX_ROWS 1000

enum ai_col { AI_USERNAME, AI_DISPLAY, AI_EMAIL, AI_ROLE, AI_PASSWORD, AI__N };

struct ai_row {
	int line;           /* of the file, 1 for the first */
	int bad;            /* a problem is reported already: the database need not see it */
	int create;         /* a new account: ai_hash hashes its password */
	char *v[AI__N];     /* every column, "" (or the default role) when absent */
	char generated[32]; /* the one-time password ai_hash made, or "" */
	char *phc;          /* ai_hash's result */
};

/* Which messages a spec words its own way keep the wording they had. */
struct ai_spec {
	unsigned columns;         /* those allowed, 1u << enum ai_col */
	unsigned required;        /* those the header row must name */
	const char *need_columns; /* the message when it does not */
	const char *columns_hint; /* "username, display_name, ...": unknown column */
	int column_cut;           /* an unknown column is quoted up to this many bytes */
	int column_ascii;         /* ... and every byte of it past ASCII as '?' */
	const char *header_utf8;  /* the message for a header row that is not UTF-8 */
	size_t header_cell_max;   /* ... or with a longer cell (at most 1099) */
	size_t max_fields;        /* on one line (at most 16) */
	size_t field_max;         /* bytes a value may have */
	const char *field_long;   /* formats, %s the column's name (or none) */
	const char *field_utf8;
	const char *noun;         /* of the rows: "users", "rows" */
	const char *twice;        /* "" or " in the file": a username repeated */
	const char *role_default; /* for a missing or empty role; NULL: none */
	const char *nothing;      /* "created", "imported": the error reply's hint */
	/* the handler's checks of a row whose username, email and display
	 * name are fine: why it is not, or NULL */
	const char *(*check)(const struct ai_row *row);
};

/* The two imports' specs (the fuzz target runs both). */
extern const struct ai_spec api_users_import_spec;
extern const struct ai_spec api_classes_import_spec;

enum ai_fail { AI_OK, AI_FAIL_PREPARE, AI_FAIL_BUSY, AI_FAIL_HASH };

struct ai_import {
	struct http_req *r; /* NULL when fuzzed */
	const struct ai_spec *spec;
	struct ai_row *rows; /* AI_MAX_ROWS of them */
	int n;
	int dry_run;
	int pending;         /* hashes asked for and not back yet (ai_hash) */
	enum ai_fail failed; /* the first thing that went wrong hashing */
	json_t *errors;      /* [{line, message}] in the order found */
	void (*hashed)(struct ai_import *im);
};

/* Allocates im's rows and error list; -1 on failure (and a 500 reply when
 * im has a request). */
int ai_init(struct ai_import *im, struct http_req *r, const struct ai_spec *spec);
/* Frees what im holds (not im); ai_free frees im too (an api_state free). */
void ai_release(struct ai_import *im);
void ai_free(void *im);

/* Parses and checks the whole CSV, every line, whatever it finds on the
 * way; 0 when every row is fine.  A problem with the header row ends it
 * (the columns of the rest are unknown). */
int ai_parse(struct ai_import *im, const char *buf, size_t len);

/* Adds a problem of the line (the message made valid UTF-8). */
void ai_error(struct ai_import *im, int line, const char *fmt, ...)
        __attribute__((format(printf, 3, 4)));

/* 400 with every problem in file order, whichever check found it. */
void ai_reply_errors(struct ai_import *im);

/* Hashes the password of every row with create — the one given, else a
 * generated one — on the worker pool; then done(im), with im->failed set
 * when one could not be made (the rest are not asked for). */
void ai_hash(struct ai_import *im, void (*done)(struct ai_import *im));

#endif
