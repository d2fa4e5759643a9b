/* jobfile.c — the `gpucloud submit` job file: YAML (libyaml's event
 * parser, typed as YAML 1.2's core schema) or JSON (jansson) into one JSON
 * object, then the friendly vocabulary (gpus, cpu: 0.5, memory: 2G,
 * max_runtime: 1h, command as one string) into the API's fields.  Owns the
 * conversion only; reading the file and resolving an image name to its id
 * are gpucloud.c's.  Aliases are refused (no billion laughs), nesting is
 * bounded, a duplicate key is an error, so is an unknown field (a typo
 * must not be dropped in silence).
 */
#include <ctype.h>
#include <errno.h>
#include <math.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <yaml.h>

#include "cli/jobfile.h"

static void fail(struct jobfile_err *err, const char *fmt, ...)
{
	va_list ap;

	va_start(ap, fmt);
	vsnprintf(err->msg, sizeof(err->msg), fmt, ap);
	va_end(ap);
}

/* ---- scalars ---------------------------------------------------------- */

static int all_digits(const char *s)
{
	if (*s == '-' || *s == '+')
		s++;
	if (!*s)
		return 0;
	for (; *s; s++)
		if (!isdigit((unsigned char)*s))
			return 0;
	return 1;
}

static int is_real(const char *s)
{
	char *end;
	double d;

	if (!*s || isspace((unsigned char)*s))
		return 0;
	/* digits, one dot, an exponent: not "inf", "nan" or hex */
	if (strspn(s, "+-.0123456789eE") != strlen(s) || !strpbrk(s, "0123456789"))
		return 0;
	errno = 0;
	d = strtod(s, &end);
	return *end == '\0' && errno == 0 && isfinite(d);
}

json_t *jobfile_scalar(const char *s)
{
	if (!strcmp(s, "null") || !strcmp(s, "Null") || !strcmp(s, "NULL") || !strcmp(s, "~"))
		return json_null();
	if (!strcmp(s, "true") || !strcmp(s, "True") || !strcmp(s, "TRUE"))
		return json_true();
	if (!strcmp(s, "false") || !strcmp(s, "False") || !strcmp(s, "FALSE"))
		return json_false();
	if (all_digits(s)) {
		char *end;
		long long v;
		errno = 0;
		v = strtoll(s, &end, 10);
		if (errno == 0 && *end == '\0')
			return json_integer(v);
	}
	if (is_real(s))
		return json_real(strtod(s, NULL));
	return json_string(s); /* NULL when not UTF-8 */
}

/* ---- YAML ------------------------------------------------------------- */

struct yp {
	yaml_parser_t p;
	struct jobfile_err *err;
};

static int next(struct yp *y, yaml_event_t *ev)
{
	if (!yaml_parser_parse(&y->p, ev)) {
		fail(y->err, "line %lu, column %lu: %s", (unsigned long)y->p.problem_mark.line + 1,
		     (unsigned long)y->p.problem_mark.column + 1,
		     y->p.problem ? y->p.problem : "not YAML");
		return -1;
	}
	return 0;
}

static json_t *node(struct yp *y, yaml_event_t *ev, int depth);

static json_t *scalar_of(yaml_event_t *ev, struct jobfile_err *err)
{
	const char *v = (const char *)ev->data.scalar.value;
	size_t n = ev->data.scalar.length;
	json_t *j;

	if (memchr(v, '\0', n)) {
		fail(err, "line %lu: a value with a NUL byte",
		     (unsigned long)ev->start_mark.line + 1);
		return NULL;
	}
	if (ev->data.scalar.style != YAML_PLAIN_SCALAR_STYLE)
		j = json_stringn(v, n);
	else if (n == 0)
		j = json_null();
	else
		j = jobfile_scalar(v);
	if (!j)
		fail(err, "line %lu: a value that is not UTF-8 text",
		     (unsigned long)ev->start_mark.line + 1);
	return j;
}

/* The value whose first event is ev (consumed here); NULL with err set. */
static json_t *node(struct yp *y, yaml_event_t *ev, int depth)
{
	json_t *out = NULL, *v;
	yaml_event_t e;
	unsigned long line = (unsigned long)ev->start_mark.line + 1;

	if (depth > JOBFILE_MAX_DEPTH) {
		fail(y->err, "line %lu: nested deeper than %d levels", line, JOBFILE_MAX_DEPTH);
		yaml_event_delete(ev);
		return NULL;
	}
	switch (ev->type) {
	case YAML_SCALAR_EVENT:
		out = scalar_of(ev, y->err);
		yaml_event_delete(ev);
		return out;
	case YAML_ALIAS_EVENT:
		fail(y->err, "line %lu: aliases (*name) are not supported in a job file", line);
		yaml_event_delete(ev);
		return NULL;
	case YAML_SEQUENCE_START_EVENT:
		yaml_event_delete(ev);
		out = json_array();
		for (;;) {
			if (next(y, &e) < 0)
				goto bad;
			if (e.type == YAML_SEQUENCE_END_EVENT) {
				yaml_event_delete(&e);
				return out;
			}
			v = node(y, &e, depth + 1);
			if (!v)
				goto bad;
			json_array_append_new(out, v);
		}
	case YAML_MAPPING_START_EVENT:
		yaml_event_delete(ev);
		out = json_object();
		for (;;) {
			char key[256];
			if (next(y, &e) < 0)
				goto bad;
			if (e.type == YAML_MAPPING_END_EVENT) {
				yaml_event_delete(&e);
				return out;
			}
			if (e.type != YAML_SCALAR_EVENT || e.data.scalar.length >= sizeof(key) ||
			    memchr(e.data.scalar.value, '\0', e.data.scalar.length)) {
				fail(y->err, "line %lu: a key must be a short string",
				     (unsigned long)e.start_mark.line + 1);
				yaml_event_delete(&e);
				goto bad;
			}
			memcpy(key, e.data.scalar.value, e.data.scalar.length);
			key[e.data.scalar.length] = '\0';
			line = (unsigned long)e.start_mark.line + 1;
			yaml_event_delete(&e);
			if (json_object_get(out, key)) {
				fail(y->err, "line %lu: the key '%s' is there twice", line, key);
				goto bad;
			}
			if (next(y, &e) < 0)
				goto bad;
			v = node(y, &e, depth + 1);
			if (!v)
				goto bad;
			if (json_object_set_new(out, key, v) < 0) {
				fail(y->err, "line %lu: the key '%.64s' is not UTF-8 text", line,
				     key);
				goto bad;
			}
		}
	default:
		fail(y->err, "line %lu: unexpected YAML structure", line);
		yaml_event_delete(ev);
		return NULL;
	}
bad:
	json_decref(out);
	return NULL;
}

static json_t *parse_yaml(const char *buf, size_t len, struct jobfile_err *err)
{
	struct yp y = { .err = err };
	yaml_event_t e;
	json_t *doc = NULL;

	if (!yaml_parser_initialize(&y.p)) {
		fail(err, "out of memory");
		return NULL;
	}
	yaml_parser_set_input_string(&y.p, (const unsigned char *)buf, len);
	if (next(&y, &e) < 0) /* stream start */
		goto out;
	yaml_event_delete(&e);
	if (next(&y, &e) < 0)
		goto out;
	if (e.type != YAML_DOCUMENT_START_EVENT) {
		yaml_event_delete(&e);
		fail(err, "the job file is empty");
		goto out;
	}
	yaml_event_delete(&e);
	if (next(&y, &e) < 0)
		goto out;
	doc = node(&y, &e, 0);
	if (!doc)
		goto out;
	if (next(&y, &e) < 0) /* document end */
		goto bad;
	yaml_event_delete(&e);
	if (next(&y, &e) < 0)
		goto bad;
	if (e.type != YAML_STREAM_END_EVENT) {
		fail(err, "line %lu: one document per job file",
		     (unsigned long)e.start_mark.line + 1);
		yaml_event_delete(&e);
		goto bad;
	}
	yaml_event_delete(&e);
	goto out;
bad:
	json_decref(doc);
	doc = NULL;
out:
	yaml_parser_delete(&y.p);
	return doc;
}

json_t *jobfile_parse(const char *buf, size_t len, struct jobfile_err *err)
{
	size_t i = 0;
	json_t *doc;

	err->msg[0] = '\0';
	while (i < len && (buf[i] == ' ' || buf[i] == '\t' || buf[i] == '\r' || buf[i] == '\n'))
		i++;
	if (i < len && buf[i] == '{') {
		json_error_t je;
		doc = json_loadb(buf, len, JSON_REJECT_DUPLICATES, &je);
		if (!doc) {
			fail(err, "line %d, column %d: %s", je.line, je.column, je.text);
			return NULL;
		}
	} else {
		doc = parse_yaml(buf, len, err);
		if (!doc)
			return NULL;
	}
	if (!json_is_object(doc)) {
		json_decref(doc);
		fail(err, "a job file is a mapping of fields (name:, image:, command: ...)");
		return NULL;
	}
	return doc;
}

/* ---- amounts ---------------------------------------------------------- */

/* a non-negative decimal with at most one dot, then the rest in *unit */
static int decimal(const char *s, double *v, const char **unit)
{
	size_t n = strspn(s, "0123456789.");
	char num[32];
	char *end;

	if (n == 0 || n >= sizeof(num) || strchr(s, '.') != strrchr(s, '.'))
		return -1;
	memcpy(num, s, n);
	num[n] = '\0';
	*v = strtod(num, &end);
	if (*end || !isfinite(*v))
		return -1;
	*unit = s + n;
	return 0;
}

long long jobfile_cpu_millis(const char *s)
{
	double v;
	const char *u;

	if (decimal(s, &v, &u) < 0)
		return -1;
	if (!strcmp(u, "m"))
		return v == floor(v) && v <= 1e9 ? (long long)v : -1;
	if (*u || v > 1e6)
		return -1;
	v *= 1000;
	return v == floor(v) ? (long long)v : -1;
}

long long jobfile_mib(const char *s)
{
	static const struct {
		const char *u;
		double mib;
	} units[] = {
		{ "", 1 },          { "M", 1 },       { "Mi", 1 },       { "MB", 1 },
		{ "MiB", 1 },       { "G", 1024 },    { "Gi", 1024 },    { "GB", 1024 },
		{ "GiB", 1024 },    { "T", 1048576 }, { "Ti", 1048576 }, { "TB", 1048576 },
		{ "TiB", 1048576 },
	};
	double v;
	const char *u;

	if (decimal(s, &v, &u) < 0)
		return -1;
	for (size_t i = 0; i < sizeof(units) / sizeof(units[0]); i++)
		if (!strcmp(u, units[i].u)) {
			v *= units[i].mib;
			return v == floor(v) && v <= 1e12 ? (long long)v : -1;
		}
	return -1;
}

long long jobfile_seconds(const char *s)
{
	long long total = 0;

	if (!*s)
		return -1;
	if (all_digits(s) && *s != '-' && *s != '+' && strlen(s) < 12)
		return strtoll(s, NULL, 10);
	while (*s) {
		char *end;
		long long v;
		if (!isdigit((unsigned char)*s))
			return -1;
		v = strtoll(s, &end, 10);
		if (v > 100000000 || end - s > 9)
			return -1;
		switch (*end) {
		case 's': break;
		case 'm': v *= 60; break;
		case 'h': v *= 3600; break;
		case 'd': v *= 86400; break;
		default: return -1;
		}
		total += v;
		s = end + 1;
	}
	return total;
}

/* ---- the vocabulary --------------------------------------------------- */

/* A number or a string: the text the amount parsers read. */
static int amount_text(json_t *v, char *buf, size_t n)
{
	if (json_is_string(v))
		snprintf(buf, n, "%s", json_string_value(v));
	else if (json_is_integer(v))
		snprintf(buf, n, "%lld", (long long)json_integer_value(v));
	else if (json_is_real(v))
		snprintf(buf, n, "%.6f", json_real_value(v));
	else
		return -1;
	if (json_is_real(v) && strchr(buf, '.')) { /* 0.500000 → 0.5 */
		char *e = buf + strlen(buf) - 1;
		while (*e == '0')
			*e-- = '\0';
		if (*e == '.')
			*e = '\0';
	}
	return 0;
}

static int set_int(json_t *out, const char *field, json_t *v, const char *key,
                   struct jobfile_err *err)
{
	if (!json_is_integer(v)) {
		fail(err, "'%s' must be a whole number", key);
		return -1;
	}
	json_object_set(out, field, v);
	return 0;
}

static int set_string(json_t *out, const char *field, json_t *v, const char *key,
                      struct jobfile_err *err)
{
	if (!json_is_string(v)) {
		fail(err, "'%s' must be text", key);
		return -1;
	}
	json_object_set(out, field, v);
	return 0;
}

/* A mapping of names to text (env, inputs): numbers and booleans as text. */
static int set_text_map(json_t *out, const char *field, json_t *v, const char *key,
                        struct jobfile_err *err)
{
	json_t *m = json_object(), *x;
	const char *k;

	if (!json_is_object(v)) {
		json_decref(m);
		fail(err, "'%s' must be a mapping of names to values", key);
		return -1;
	}
	json_object_foreach(v, k, x)
	{
		char buf[64];
		if (json_is_string(x)) {
			json_object_set(m, k, x);
			continue;
		}
		if (json_is_true(x) || json_is_false(x)) {
			json_object_set_new(m, k, json_string(json_is_true(x) ? "true" : "false"));
			continue;
		}
		if (amount_text(x, buf, sizeof(buf)) < 0) {
			json_decref(m);
			fail(err, "'%s.%.64s' must be a single value", key, k);
			return -1;
		}
		json_object_set_new(m, k, json_string(buf));
	}
	json_object_set_new(out, field, m);
	return 0;
}

static int set_amount(json_t *out, const char *field, json_t *v, const char *key,
                      long long (*conv)(const char *), const char *example, struct jobfile_err *err)
{
	char buf[64];
	long long n;

	if (amount_text(v, buf, sizeof(buf)) < 0 || (n = conv(buf)) < 0) {
		fail(err, "'%s' must be %s", key, example);
		return -1;
	}
	json_object_set_new(out, field, json_integer(n));
	return 0;
}

static int set_command(json_t *out, json_t *v, struct jobfile_err *err)
{
	json_t *cmd, *x;
	size_t i;

	if (json_is_string(v)) {
		json_object_set_new(out, "command", json_pack("[s, s, O]", "sh", "-c", v));
		return 0;
	}
	if (!json_is_array(v) || json_array_size(v) == 0) {
		fail(err, "'command' must be a string (run by sh -c) or a list of arguments");
		return -1;
	}
	cmd = json_array();
	json_array_foreach(v, i, x)
	{
		char buf[64];
		if (json_is_string(x))
			json_array_append(cmd, x);
		else if (amount_text(x, buf, sizeof(buf)) == 0)
			json_array_append_new(cmd, json_string(buf));
		else {
			json_decref(cmd);
			fail(err, "'command[%zu]' must be text", i);
			return -1;
		}
	}
	json_object_set_new(out, "command", cmd);
	return 0;
}

static int set_tags(json_t *out, json_t *v, struct jobfile_err *err)
{
	json_t *x;
	size_t i;

	if (json_is_string(v)) {
		json_object_set_new(out, "tags", json_pack("[O]", v));
		return 0;
	}
	if (!json_is_array(v)) {
		fail(err, "'tags' must be a list of tags");
		return -1;
	}
	json_array_foreach(v, i, x) if (!json_is_string(x))
	{
		fail(err, "'tags[%zu]' must be text", i);
		return -1;
	}
	json_object_set(out, "tags", v);
	return 0;
}

static int set_image(json_t *out, json_t *v, struct jobfile_err *err)
{
	if (json_is_integer(v)) {
		json_object_set(out, "image_id", v);
		return 0;
	}
	if (!json_is_string(v) || !json_string_length(v)) {
		fail(err, "'image' must be an image id or reference");
		return -1;
	}
	if (all_digits(json_string_value(v)) && json_string_value(v)[0] != '-' &&
	    json_string_length(v) < 16)
		json_object_set_new(out, "image_id",
		                    json_integer(strtoll(json_string_value(v), NULL, 10)));
	else
		json_object_set(out, "image", v);
	return 0;
}

static int set_hparams(json_t *out, json_t *v, struct jobfile_err *err)
{
	const char *k;
	json_t *x;

	if (!json_is_object(v)) {
		fail(err, "'hyperparameters' must be a mapping of names to values");
		return -1;
	}
	json_object_foreach(v, k, x)
	{
		if (json_is_object(x) || json_is_array(x) || json_is_null(x)) {
			fail(err, "'hyperparameters.%.64s' must be a number, true/false or text",
			     k);
			return -1;
		}
	}
	json_object_set(out, "hyperparameters", v);
	return 0;
}

static const char *const job_keys =
        "name, image, command, pool, gpus, cpu, memory, shm, env, hyperparameters, tags, "
        "priority, max_runtime, retry_limit, class, template, inputs, members";

/* One job field; 1 when key is not a job field. */
static int job_field(json_t *job, const char *key, json_t *v, struct jobfile_err *err)
{
	if (!strcmp(key, "name"))
		return set_string(job, "name", v, key, err);
	if (!strcmp(key, "image"))
		return set_image(job, v, err);
	if (!strcmp(key, "image_id"))
		return set_int(job, "image_id", v, key, err);
	if (!strcmp(key, "command") || !strcmp(key, "cmd"))
		return set_command(job, v, err);
	if (!strcmp(key, "pool"))
		return set_string(job, "pool", v, key, err);
	if (!strcmp(key, "gpus") || !strcmp(key, "slices"))
		return set_int(job, "slices", v, key, err);
	if (!strcmp(key, "cpu"))
		return set_amount(job, "cpu_millis", v, key, jobfile_cpu_millis,
		                  "CPUs such as 2, 0.5 or 500m", err);
	if (!strcmp(key, "cpu_millis"))
		return set_int(job, "cpu_millis", v, key, err);
	if (!strcmp(key, "memory") || !strcmp(key, "mem"))
		return set_amount(job, "mem_mib", v, key, jobfile_mib,
		                  "a size such as 512M, 2G or 1.5Gi (a plain number is MiB)", err);
	if (!strcmp(key, "mem_mib"))
		return set_int(job, "mem_mib", v, key, err);
	if (!strcmp(key, "shm"))
		return set_amount(job, "shm_mib", v, key, jobfile_mib,
		                  "a size such as 64M or 1G (a plain number is MiB)", err);
	if (!strcmp(key, "shm_mib"))
		return set_int(job, "shm_mib", v, key, err);
	if (!strcmp(key, "env"))
		return set_text_map(job, "env", v, key, err);
	if (!strcmp(key, "inputs"))
		return set_text_map(job, "inputs", v, key, err);
	if (!strcmp(key, "hyperparameters") || !strcmp(key, "hp"))
		return set_hparams(job, v, err);
	if (!strcmp(key, "tags"))
		return set_tags(job, v, err);
	if (!strcmp(key, "priority"))
		return set_string(job, "priority", v, key, err);
	if (!strcmp(key, "max_runtime"))
		return set_amount(job, "max_runtime_s", v, key, jobfile_seconds,
		                  "a duration such as 3600, 90m, 2h or 1d12h", err);
	if (!strcmp(key, "max_runtime_s"))
		return set_int(job, "max_runtime_s", v, key, err);
	if (!strcmp(key, "retry_limit") || !strcmp(key, "retries"))
		return set_int(job, "retry_limit", v, key, err);
	if (!strcmp(key, "class"))
		return set_int(job, "class", v, key, err);
	if (!strcmp(key, "template") || !strcmp(key, "template_id"))
		return set_int(job, "template_id", v, key, err);
	if (!strcmp(key, "members"))
		return set_int(job, "members", v, key, err);
	return 1;
}

static int sweep_key(const char *k)
{
	return !strcmp(k, "grid") || !strcmp(k, "list") || !strcmp(k, "metric") ||
	       !strcmp(k, "goal") || !strcmp(k, "name");
}

/* The job fields of doc into job; with sweep, a sweep's own fields are
 * skipped. */
static int job_fields(json_t *job, json_t *doc, int sweep, struct jobfile_err *err)
{
	const char *k;
	json_t *v;

	json_object_foreach(doc, k, v)
	{
		int rc;
		if (sweep && sweep_key(k))
			continue;
		if (json_is_null(v))
			continue; /* "pool:" with nothing: as if absent */
		rc = job_field(job, k, v, err);
		if (rc < 0)
			return -1;
		if (rc > 0) {
			fail(err, "unknown field '%.64s' (a job file has %s%s)", k, job_keys,
			     sweep ? "; a sweep also grid or list, metric, goal" : "");
			return -1;
		}
	}
	return 0;
}

json_t *jobfile_request(json_t *doc, int *is_sweep, struct jobfile_err *err)
{
	json_t *job = json_object(), *out, *v;
	json_t *grid = json_object_get(doc, "grid"), *list = json_object_get(doc, "list");
	json_t *inner = json_object_get(doc, "job");

	err->msg[0] = '\0';
	*is_sweep = grid || list || inner;
	if (!*is_sweep) {
		if (job_fields(job, doc, 0, err) < 0) {
			json_decref(job);
			return NULL;
		}
		return job;
	}
	/* a sweep: its own fields, the rest (or "job") is the run */
	if (inner) {
		const char *k;
		json_object_foreach(doc, k, v)
		{
			if (strcmp(k, "job") && strcmp(k, "name") && strcmp(k, "grid") &&
			    strcmp(k, "list") && strcmp(k, "metric") && strcmp(k, "goal") &&
			    strcmp(k, "tags")) {
				fail(err,
				     "unknown field '%.64s' beside 'job' (a sweep has name, job, "
				     "grid or list, metric, goal, tags)",
				     k);
				json_decref(job);
				return NULL;
			}
		}
		if (!json_is_object(inner)) {
			fail(err, "'job' must be a mapping of job fields");
			json_decref(job);
			return NULL;
		}
		if (job_fields(job, inner, 0, err) < 0) {
			json_decref(job);
			return NULL;
		}
	} else if (job_fields(job, doc, 1, err) < 0) {
		json_decref(job);
		return NULL;
	}
	json_object_del(job, "name"); /* runs are named after the sweep */
	out = json_object();
	if ((v = json_object_get(doc, "name")) != NULL && set_string(out, "name", v, "name", err))
		goto bad;
	if (grid) {
		const char *k;
		json_t *x;
		if (!json_is_object(grid)) {
			fail(err, "'grid' must map each hyperparameter to a list of values");
			goto bad;
		}
		json_object_foreach(grid, k, x) if (!json_is_array(x))
		{
			fail(err, "'grid.%.64s' must be a list of values", k);
			goto bad;
		}
		json_object_set(out, "grid", grid);
	}
	if (list) {
		if (!json_is_array(list)) {
			fail(err, "'list' must be a list of hyperparameter sets");
			goto bad;
		}
		json_object_set(out, "list", list);
	}
	if ((v = json_object_get(doc, "metric")) != NULL &&
	    set_string(out, "metric", v, "metric", err))
		goto bad;
	if ((v = json_object_get(doc, "goal")) != NULL && set_string(out, "goal", v, "goal", err))
		goto bad;
	if (inner && (v = json_object_get(doc, "tags")) != NULL) {
		if (set_tags(out, v, err) < 0)
			goto bad;
	} else if ((v = json_object_get(job, "tags")) != NULL) {
		json_object_set(out, "tags", v); /* the sweep is tagged as its runs */
	}
	json_object_set_new(out, "job", job);
	return out;
bad:
	json_decref(job);
	json_decref(out);
	return NULL;
}
