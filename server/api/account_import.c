/* account_import.c — the CSV import of accounts that /users/import and a
 * class roster's import share (account_import.h): the file's parse and
 * checks, the error reply, the passwords hashed on the worker pool.
 */
#include "api/account_import.h"

#include <ctype.h>
#include <stdarg.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "api/api.h"
#include "auth/auth.h"
#include "base/csv.h"
#include "net/ws.h"

static const char *const col_names[AI__N] = { "username", "display_name", "email", "role",
	                                      "password" };

int ai_init(struct ai_import *im, struct http_req *r, const struct ai_spec *spec)
{
	im->r = r;
	im->spec = spec;
	if (!(im->rows = calloc(AI_MAX_ROWS, sizeof(*im->rows))) || !(im->errors = json_array())) {
		if (r)
			http_reply_error(r, RC_NOMEM, NULL, "out of memory");
		return -1;
	}
	return 0;
}

void ai_release(struct ai_import *im)
{
	for (int i = 0; i < im->n; i++) {
		for (int k = 0; k < AI__N; k++)
			free(im->rows[i].v[k]);
		free(im->rows[i].phc);
	}
	free(im->rows);
	json_decref(im->errors);
	im->rows = NULL;
	im->errors = NULL;
	im->n = 0;
}

void ai_free(void *im)
{
	ai_release(im);
	free(im);
}

/* Replaces each byte that does not begin a valid UTF-8 sequence with '?':
 * a message quoting the file (or cut inside a character) stays JSON. */
static void utf8_fix(char *s)
{
	size_t len = strlen(s), i = 0, n;

	while (i < len) {
		for (n = 1; n <= 4 && i + n <= len; n++)
			if (ws_utf8_ok((const uint8_t *)s + i, n))
				break;
		if (n > 4 || i + n > len) {
			s[i++] = '?';
			continue;
		}
		i += n;
	}
}

void ai_error(struct ai_import *im, int line, const char *fmt, ...)
{
	char msg[1400];
	va_list ap;

	va_start(ap, fmt);
	vsnprintf(msg, sizeof(msg), fmt, ap);
	va_end(ap);
	utf8_fix(msg);
	json_array_append_new(im->errors, json_pack("{s:i, s:s}", "line", line, "message", msg));
}

/* The bytes after the next newline at or after buf[off], or len. */
static size_t next_line(const char *buf, size_t len, size_t off)
{
	const char *nl = off < len ? memchr(buf + off, '\n', len - off) : NULL;

	return nl ? (size_t)(nl - buf) + 1 : len;
}

/* Maps the header row's fields to columns; -1 (reported) when it is bad. */
static int header(struct ai_import *im, int line, const struct csv_field *f, size_t nf, int *map)
{
	const struct ai_spec *s = im->spec;
	unsigned have = 0;
	char val[1100];

	for (size_t i = 0; i < nf; i++) {
		size_t cap =
		        s->header_cell_max < sizeof(val) ? s->header_cell_max + 1 : sizeof(val);
		ssize_t vn = csv_field_copy(&f[i], val, cap);
		map[i] = -1;
		if (vn < 0 || !ws_utf8_ok((const uint8_t *)val, (size_t)vn)) {
			ai_error(im, line, "%s", s->header_utf8);
			return -1;
		}
		for (char *c = val; *c; c++)
			*c = (char)tolower((unsigned char)*c);
		for (int k = 0; k < AI__N; k++)
			if ((s->columns & (1u << k)) && !(have & (1u << k)) &&
			    strcmp(val, col_names[k]) == 0) {
				map[i] = k;
				have |= 1u << k;
			}
		if (map[i] < 0) {
			if (s->column_ascii)
				for (char *c = val; *c; c++)
					if ((unsigned char)*c >= 0x80)
						*c = '?';
			ai_error(im, line, "unknown or repeated column '%.*s' (use %s)",
			         s->column_cut, val, s->columns_hint);
			return -1;
		}
	}
	if ((have & s->required) != s->required) {
		ai_error(im, line, "%s", s->need_columns);
		return -1;
	}
	return 0;
}

/* Checks a row whose fields are all there; reports its first problem. */
static void check_row(struct ai_import *im, struct ai_row *row)
{
	const char *why;

	if ((why = api_users_check_username(row->v[AI_USERNAME])) ||
	    (why = api_users_check_email(row->v[AI_EMAIL])) ||
	    (why = api_users_check_display_name(row->v[AI_DISPLAY])) ||
	    (why = im->spec->check(row))) {
		ai_error(im, row->line, "%s", why);
		row->bad = 1;
		return;
	}
	/* against the rows before it that were fine */
	for (int k = 0; &im->rows[k] != row; k++)
		if (!im->rows[k].bad &&
		    strcmp(im->rows[k].v[AI_USERNAME], row->v[AI_USERNAME]) == 0) {
			ai_error(im, row->line, "username '%s' appears twice%s (line %d)",
			         row->v[AI_USERNAME], im->spec->twice, im->rows[k].line);
			row->bad = 1;
			return;
		}
}

/* Copies one data row's fields; -1 (reported) when out of memory. */
static int fill_row(struct ai_import *im, struct ai_row *row, const struct csv_field *f, size_t nf,
                    const int *map)
{
	const struct ai_spec *s = im->spec;
	const char *why = NULL;
	char val[1100];
	int col = 0;

	for (size_t i = 0; i < nf && !why; i++) {
		ssize_t n = csv_field_copy(&f[i], val, sizeof(val));
		col = map[i];
		if (n < 0 || (size_t)n > s->field_max || memchr(val, '\0', (size_t)n))
			why = s->field_long;
		else if (!ws_utf8_ok((const uint8_t *)val, (size_t)n))
			why = s->field_utf8;
		else if (!(row->v[col] = strdup(val)))
			why = "out of memory";
	}
	for (int k = 0; k < AI__N; k++) {
		const char *dflt = k == AI_ROLE && s->role_default ? s->role_default : "";
		if (row->v[k] && (*row->v[k] || !*dflt))
			continue;
		free(row->v[k]);
		if (!(row->v[k] = strdup(dflt))) {
			ai_error(im, row->line, "out of memory");
			return -1;
		}
	}
	if (why) {
		ai_error(im, row->line, why, col_names[col]);
		row->bad = 1;
	} else {
		check_row(im, row);
	}
	return 0;
}

int ai_parse(struct ai_import *im, const char *buf, size_t len)
{
	const struct ai_spec *s = im->spec;
	struct csv_field f[16];
	int map[16], line = 0, extra = 0, head = 0;
	size_t nf, off = 0, ncols = 0, maxf = s->max_fields < 16 ? s->max_fields : 16;

	if (len >= 3 && memcmp(buf, "\xef\xbb\xbf", 3) == 0)
		off = 3; /* spreadsheet byte-order mark */
	while (off < len) {
		ssize_t used = csv_parse_record(buf + off, len - off, 1, f, maxf, &nf);
		line += 1 + extra; /* the record's first line */
		extra = 0;
		if (used <= 0) {
			ai_error(im, line,
			         "malformed CSV line (an unbalanced quote, a quote inside an "
			         "unquoted field, or more than %zu fields)",
			         maxf);
			if (!head)
				return -1;
			off = next_line(buf, len, off); /* go on with the next line */
			continue;
		}
		/* a quoted field may span lines: the next record starts lower */
		for (const char *c = buf + off; c < buf + off + used - 1; c++)
			extra += *c == '\n';
		off += (size_t)used;
		if (nf == 1 && f[0].len == 0)
			continue; /* blank line */
		if (!head) {
			head = line;
			ncols = nf;
			if (header(im, line, f, nf, map) < 0)
				return -1;
			continue;
		}
		if (nf != ncols) {
			ai_error(im, line, "this line has %zu fields; the header row has %zu", nf,
			         ncols);
			continue;
		}
		if (im->n >= AI_MAX_ROWS) {
			ai_error(im, line, "at most %d %s per import", AI_MAX_ROWS, s->noun);
			return -1;
		}
		im->rows[im->n].line = line;
		if (fill_row(im, &im->rows[im->n++], f, nf, map) < 0)
			return -1;
	}
	if (line == 0)
		ai_error(im, 1, "the CSV is empty");
	else if (im->n == 0 && json_array_size(im->errors) == 0)
		ai_error(im, line, "the CSV has a header row but no %s", s->noun);
	return json_array_size(im->errors) ? -1 : 0;
}

static int by_line(const void *a, const void *b)
{
	json_int_t x = json_integer_value(json_object_get(*(json_t *const *)a, "line"));
	json_int_t y = json_integer_value(json_object_get(*(json_t *const *)b, "line"));

	return x < y ? -1 : x > y;
}

void ai_reply_errors(struct ai_import *im)
{
	size_t n = json_array_size(im->errors);
	json_t **v = calloc(n ? n : 1, sizeof(*v)), *errs = json_array();
	char msg[96], hint[96];

	for (size_t i = 0; v && i < n; i++)
		v[i] = json_array_get(im->errors, i);
	if (v) /* stable enough: no two problems share a line but the file's own first */
		qsort(v, n, sizeof(*v), by_line);
	for (size_t i = 0; v && i < n; i++)
		json_array_append(errs, v[i]);
	free(v);
	snprintf(msg, sizeof(msg), "the CSV has %zu problem%s", n, n == 1 ? "" : "s");
	snprintf(hint, sizeof(hint), "fix the listed lines and import again; nothing was %s",
	         im->spec->nothing);
	http_reply_error_details(im->r, RC_INVALID, errs,
	                         im->dry_run ? "fix the listed lines and check again" : hint, msg);
}

struct hash_job {
	struct ai_import *im;
	int i;
};

/* One hash less to wait for; the last one goes on. */
static void hash_step(struct ai_import *im)
{
	if (--im->pending == 0)
		im->hashed(im);
}

static void hashed_one(void *arg, const char *phc)
{
	struct hash_job *j = arg;
	struct ai_import *im = j->im;

	if ((!phc || !(im->rows[j->i].phc = strdup(phc))) && !im->failed)
		im->failed = AI_FAIL_HASH;
	free(j);
	hash_step(im);
}

void ai_hash(struct ai_import *im, void (*done)(struct ai_import *im))
{
	im->hashed = done;
	im->pending = 1; /* held until every hash is asked for */
	for (int k = 0; k < im->n && !im->failed; k++) {
		struct ai_row *row = &im->rows[k];
		struct hash_job *j;
		const char *pw = row->v[AI_PASSWORD];
		if (!row->create)
			continue;
		if (!*pw && auth_password_generate(row->generated, sizeof(row->generated)) == 0)
			pw = row->generated;
		if (!*pw || !(j = calloc(1, sizeof(*j)))) {
			im->failed = AI_FAIL_PREPARE;
			break;
		}
		j->im = im;
		j->i = k;
		im->pending++;
		if (auth_hash_async(pw, hashed_one, j) < 0) {
			free(j);
			im->pending--;
			im->failed = AI_FAIL_BUSY;
		}
	}
	hash_step(im);
}
