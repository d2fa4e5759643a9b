/* template.c — job templates without a database: checks what an admin
 * writes (schema, inputs, pattern) and expands a pattern for one set of
 * hyperparameters into the command a job runs.  Owns the placeholder
 * grammar and the hyperparameter types; not where templates are stored
 * (api/api_job_templates.c) nor how a job starts (work/jobs.c).
 *
 * Every failure names the field at fault in words a user can act on
 * ("hyperparameter 'lr' must be at most 10"), with a reason code a page
 * translates.
 */
#include "work/template.h"

#include <math.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define VALUE_MAX   1024 /* a string hyperparameter, in bytes */
#define INPUT_MAX   4096 /* an input value */
#define ELEMENT_MAX 8192 /* one expanded command element (as a job allows) */
#define COMMAND_MAX 256  /* elements */

static void fail(struct template_error *e, const char *field, const char *reason, const char *fmt,
                 ...) __attribute__((format(printf, 4, 5)));

static void fail(struct template_error *e, const char *field, const char *reason, const char *fmt,
                 ...)
{
	va_list ap;

	snprintf(e->field, sizeof(e->field), "%s", field);
	snprintf(e->reason, sizeof(e->reason), "%s", reason);
	va_start(ap, fmt);
	vsnprintf(e->msg, sizeof(e->msg), fmt, ap);
	va_end(ap);
}

static void fail_limit(struct template_error *e, double limit)
{
	e->limit = limit;
	e->has_limit = 1;
}

int template_format_real(double v, char *buf, size_t len)
{
	int n = 0;

	for (int p = 1; p <= 17; p++) {
		n = snprintf(buf, len, "%.*g", p, v);
		if (strtod(buf, NULL) == v)
			break;
	}
	return n;
}

/* "lr", "batch-size": a letter, then letters, digits, '_' or '-' */
static int hp_name_ok(const char *s)
{
	size_t n = s ? strlen(s) : 0;

	if (n == 0 || n > 64 || !((s[0] >= 'a' && s[0] <= 'z') || (s[0] >= 'A' && s[0] <= 'Z')))
		return 0;
	return strspn(s, "abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789_-") == n;
}

/* "script", "data_dir": lower-case letters, digits and '_' */
static int input_name_ok(const char *s)
{
	size_t n = s ? strlen(s) : 0;

	if (n == 0 || n > 32 || !(s[0] >= 'a' && s[0] <= 'z') || strcmp(s, "hyperparameters") == 0)
		return 0;
	return strspn(s, "abcdefghijklmnopqrstuvwxyz0123456789_") == n;
}

static int text_ok(const json_t *v, size_t max)
{
	return json_is_string(v) && json_string_length(v) <= max &&
	       !memchr(json_string_value(v), '\0', json_string_length(v));
}

static const json_t *spec_named(const json_t *schema, const char *name, size_t len)
{
	size_t i;
	json_t *s;

	json_array_foreach(schema, i, s)
	{
		const char *n = json_string_value(json_object_get(s, "name"));
		if (n && strlen(n) == len && memcmp(n, name, len) == 0)
			return s;
	}
	return NULL;
}

static const json_t *input_named(const json_t *inputs, const char *name, size_t len)
{
	size_t i;
	json_t *s;

	json_array_foreach(inputs, i, s)
	{
		const char *n = json_string_value(json_object_get(s, "name"));
		if (n && strlen(n) == len && memcmp(n, name, len) == 0)
			return s;
	}
	return NULL;
}

/* ---- one hyperparameter value against its spec ---- */

/* Checks v for spec s; what names it in messages ("hyperparameter 'lr'",
 * "the default of 'lr'").  0 or -1 with e filled (field is field). */
static int value_check(const json_t *s, const json_t *v, const char *field, const char *what,
                       struct template_error *e)
{
	const char *type = json_string_value(json_object_get(s, "type"));
	const json_t *mn = json_object_get(s, "min"), *mx = json_object_get(s, "max");

	if (strcmp(type, "int") == 0 || strcmp(type, "float") == 0) {
		double d;
		char b[40];
		if (strcmp(type, "int") == 0 ? !json_is_integer(v) : !json_is_number(v)) {
			fail(e, field, "type", "%s must be %s", what,
			     strcmp(type, "int") == 0 ? "an integer" : "a number");
			return -1;
		}
		d = json_number_value(v);
		if (json_is_number(mn) && d < json_number_value(mn)) {
			template_format_real(json_number_value(mn), b, sizeof(b));
			fail(e, field, "min", "%s must be at least %s", what, b);
			fail_limit(e, json_number_value(mn));
			return -1;
		}
		if (json_is_number(mx) && d > json_number_value(mx)) {
			template_format_real(json_number_value(mx), b, sizeof(b));
			fail(e, field, "max", "%s must be at most %s", what, b);
			fail_limit(e, json_number_value(mx));
			return -1;
		}
		return 0;
	}
	if (strcmp(type, "string") == 0) {
		if (!text_ok(v, VALUE_MAX)) {
			fail(e, field, "type", "%s must be a string of at most %d bytes", what,
			     VALUE_MAX);
			return -1;
		}
		return 0;
	}
	if (strcmp(type, "bool") == 0) {
		if (!json_is_boolean(v)) {
			fail(e, field, "type", "%s must be true or false", what);
			return -1;
		}
		return 0;
	}
	/* choice */
	{
		size_t i, o = 0;
		json_t *c;
		char list[300];
		json_array_foreach(json_object_get(s, "choices"), i, c)
		{
			if (json_is_number(c) && json_is_number(v) &&
			    json_number_value(c) == json_number_value(v))
				return 0;
			if (json_is_string(c) && json_equal(c, (json_t *)v))
				return 0;
		}
		list[0] = '\0';
		json_array_foreach(json_object_get(s, "choices"), i, c)
		{
			char b[40];
			const char *t = json_string_value(c);
			if (!t) {
				template_format_real(json_number_value(c), b, sizeof(b));
				t = b;
			}
			if (o < sizeof(list))
				o += (size_t)snprintf(list + o, sizeof(list) - o, "%s%s",
				                      i ? ", " : "", t);
		}
		fail(e, field, "choice", "%s must be one of: %s", what, list);
		return -1;
	}
}

/* v as one command-line word */
static void value_text(const json_t *v, char *buf, size_t len)
{
	if (json_is_integer(v))
		snprintf(buf, len, "%lld", (long long)json_integer_value(v));
	else if (json_is_real(v))
		template_format_real(json_real_value(v), buf, len);
	else if (json_is_boolean(v))
		snprintf(buf, len, "%s", json_is_true(v) ? "true" : "false");
	else
		snprintf(buf, len, "%s", json_string_value(v) ? json_string_value(v) : "");
}

/* ---- the schema and the inputs ---- */

static int schema_check(const json_t *schema, struct template_error *e)
{
	static const char *const keys[] = { "name", "type",    "default", "min",
		                            "max",  "choices", "help",    NULL };
	size_t i, k;
	json_t *s;

	if (!json_is_array(schema) || json_array_size(schema) > TEMPLATE_MAX_HPARAMS) {
		fail(e, "hyperparameters", "schema",
		     "hyperparameters must be an array of at most %d hyperparameters",
		     TEMPLATE_MAX_HPARAMS);
		return -1;
	}
	json_array_foreach(schema, i, s)
	{
		char f[96], what[120];
		const char *name = json_string_value(json_object_get(s, "name")), *type, *key;
		const json_t *mn, *mx, *ch, *def, *v;
		int num;

		snprintf(f, sizeof(f), "hyperparameters[%zu]", i);
		if (!json_is_object(s)) {
			fail(e, f, "schema", "%s must be an object {name, type, default, ...}", f);
			return -1;
		}
		json_object_foreach((json_t *)s, key, v)
		{
			for (k = 0; keys[k]; k++)
				if (strcmp(keys[k], key) == 0)
					break;
			if (!keys[k]) {
				fail(e, f, "schema",
				     "%s has an unknown field '%.40s' (name, type, default, min, "
				     "max, choices, help)",
				     f, key);
				return -1;
			}
		}
		if (!hp_name_ok(name)) {
			snprintf(f, sizeof(f), "hyperparameters[%zu].name", i);
			fail(e, f, "schema",
			     "%s must be 1 to 64 letters, digits, '_' or '-', starting with a "
			     "letter",
			     f);
			return -1;
		}
		for (k = 0; k < i; k++)
			if (strcmp(json_string_value(
			                   json_object_get(json_array_get(schema, k), "name")),
			           name) == 0) {
				snprintf(f, sizeof(f), "hyperparameters[%zu].name", i);
				fail(e, f, "schema", "hyperparameter '%s' is defined twice", name);
				return -1;
			}
		type = json_string_value(json_object_get(s, "type"));
		if (!type ||
		    (strcmp(type, "int") && strcmp(type, "float") && strcmp(type, "string") &&
		     strcmp(type, "bool") && strcmp(type, "choice"))) {
			snprintf(f, sizeof(f), "hyperparameters[%zu].type", i);
			fail(e, f, "schema",
			     "the type of '%s' must be int, float, string, bool or choice", name);
			return -1;
		}
		num = strcmp(type, "int") == 0 || strcmp(type, "float") == 0;
		mn = json_object_get(s, "min");
		mx = json_object_get(s, "max");
		for (int which = 0; which < 2; which++) {
			const json_t *b = which ? mx : mn;
			if (!b || json_is_null(b))
				continue;
			snprintf(f, sizeof(f), "hyperparameters[%zu].%s", i, which ? "max" : "min");
			if (!num) {
				fail(e, f, "schema",
				     "'%s' is a %s: only int and float have min and max", name,
				     type);
				return -1;
			}
			if (strcmp(type, "int") == 0 ? !json_is_integer(b) : !json_is_number(b)) {
				fail(e, f, "schema", "the %s of '%s' must be %s",
				     which ? "max" : "min", name,
				     strcmp(type, "int") == 0 ? "an integer" : "a number");
				return -1;
			}
		}
		if (json_is_number(mn) && json_is_number(mx) &&
		    json_number_value(mn) > json_number_value(mx)) {
			snprintf(f, sizeof(f), "hyperparameters[%zu].max", i);
			fail(e, f, "schema", "the max of '%s' is below its min", name);
			return -1;
		}
		ch = json_object_get(s, "choices");
		if (strcmp(type, "choice") == 0) {
			size_t j, m;
			json_t *c;
			snprintf(f, sizeof(f), "hyperparameters[%zu].choices", i);
			if (!json_is_array(ch) || json_array_size(ch) == 0 ||
			    json_array_size(ch) > 64) {
				fail(e, f, "schema", "'%s' is a choice: list 1 to 64 choices",
				     name);
				return -1;
			}
			json_array_foreach(ch, j, c)
			{
				if (!json_is_number(c) && !text_ok(c, 256)) {
					fail(e, f, "schema",
					     "the choices of '%s' must be strings (at most 256 "
					     "bytes) "
					     "or numbers",
					     name);
					return -1;
				}
				for (m = 0; m < j; m++)
					if (json_equal(json_array_get(ch, m), c)) {
						fail(e, f, "schema",
						     "the choices of '%s' repeat one", name);
						return -1;
					}
			}
		} else if (ch && !json_is_null(ch)) {
			snprintf(f, sizeof(f), "hyperparameters[%zu].choices", i);
			fail(e, f, "schema", "'%s' is a %s: only a choice has choices", name, type);
			return -1;
		}
		v = json_object_get(s, "help");
		if (v && !json_is_null(v) && !text_ok(v, 500)) {
			snprintf(f, sizeof(f), "hyperparameters[%zu].help", i);
			fail(e, f, "schema",
			     "the help of '%s' must be a string of at most 500 bytes", name);
			return -1;
		}
		def = json_object_get(s, "default");
		if (def && !json_is_null(def)) {
			snprintf(f, sizeof(f), "hyperparameters[%zu].default", i);
			snprintf(what, sizeof(what), "the default of '%s'", name);
			if (value_check(s, def, f, what, e) < 0) {
				snprintf(e->reason, sizeof(e->reason), "schema");
				return -1;
			}
		}
	}
	return 0;
}

static int inputs_check(const json_t *inputs, struct template_error *e)
{
	static const char *const keys[] = { "name", "help", "default", "required", NULL };
	size_t i, k;
	json_t *s, *v;

	if (!inputs)
		return 0;
	if (!json_is_array(inputs) || json_array_size(inputs) > TEMPLATE_MAX_INPUTS) {
		fail(e, "inputs", "schema", "inputs must be an array of at most %d inputs",
		     TEMPLATE_MAX_INPUTS);
		return -1;
	}
	json_array_foreach(inputs, i, s)
	{
		char f[64];
		const char *name = json_string_value(json_object_get(s, "name")), *key;

		snprintf(f, sizeof(f), "inputs[%zu]", i);
		if (!json_is_object(s)) {
			fail(e, f, "schema", "%s must be an object {name, help, default, required}",
			     f);
			return -1;
		}
		json_object_foreach((json_t *)s, key, v)
		{
			for (k = 0; keys[k]; k++)
				if (strcmp(keys[k], key) == 0)
					break;
			if (!keys[k]) {
				fail(e, f, "schema",
				     "%s has an unknown field '%.40s' (name, help, default, "
				     "required)",
				     f, key);
				return -1;
			}
		}
		if (!input_name_ok(name)) {
			snprintf(f, sizeof(f), "inputs[%zu].name", i);
			fail(e, f, "schema",
			     "%s must be 1 to 32 lower-case letters, digits or '_', starting with "
			     "a letter (not 'hyperparameters')",
			     f);
			return -1;
		}
		for (k = 0; k < i; k++)
			if (strcmp(json_string_value(
			                   json_object_get(json_array_get(inputs, k), "name")),
			           name) == 0) {
				snprintf(f, sizeof(f), "inputs[%zu].name", i);
				fail(e, f, "schema", "input '%s' is defined twice", name);
				return -1;
			}
		v = json_object_get(s, "help");
		if (v && !json_is_null(v) && !text_ok(v, 500)) {
			snprintf(f, sizeof(f), "inputs[%zu].help", i);
			fail(e, f, "schema", "the help of input '%s' must be at most 500 bytes",
			     name);
			return -1;
		}
		v = json_object_get(s, "default");
		if (v && !json_is_null(v) && !text_ok(v, INPUT_MAX)) {
			snprintf(f, sizeof(f), "inputs[%zu].default", i);
			fail(e, f, "schema",
			     "the default of input '%s' must be a string of at most %d bytes", name,
			     INPUT_MAX);
			return -1;
		}
		v = json_object_get(s, "required");
		if (v && !json_is_null(v) && !json_is_boolean(v)) {
			snprintf(f, sizeof(f), "inputs[%zu].required", i);
			fail(e, f, "schema", "required of input '%s' must be true or false", name);
			return -1;
		}
	}
	return 0;
}

/* ---- the pattern ---- */

struct buf {
	char *p;
	size_t len, cap;
};

static int buf_add(struct buf *b, const char *s, size_t n)
{
	if (b->len + n + 1 > b->cap) {
		size_t cap = b->cap ? b->cap : 64;
		char *p;
		while (cap < b->len + n + 1)
			cap *= 2;
		p = realloc(b->p, cap);
		if (!p)
			return -1;
		b->p = p;
		b->cap = cap;
	}
	memcpy(b->p + b->len, s, n);
	b->len += n;
	b->p[b->len] = '\0';
	return 0;
}

/* What placeholders stand for while expanding (NULL: only checking). */
struct values {
	const json_t *hp;     /* completed hyperparameters */
	const json_t *inputs; /* name -> expanded value */
};

/* Substitutes the placeholders of element s (index i) into out; with vals
 * NULL only checks them.  0, or -1 with e filled. */
static int subst(const struct template_def *t, const char *s, size_t i, const struct values *vals,
                 struct buf *out, struct template_error *e)
{
	char f[32];
	const char *p = s;

	snprintf(f, sizeof(f), "command[%zu]", i);
	while (*p) {
		const char *open = strpbrk(p, "{}"), *close, *name;
		size_t n;
		if (!open) {
			if (out && buf_add(out, p, strlen(p)) < 0)
				goto nomem;
			break;
		}
		if (out && buf_add(out, p, (size_t)(open - p)) < 0)
			goto nomem;
		if (open[0] == open[1]) { /* {{ or }} */
			if (out && buf_add(out, open, 1) < 0)
				goto nomem;
			p = open + 2;
			continue;
		}
		if (*open == '}') {
			fail(e, f, "pattern", "%s has a '}' without its '{' (write }} for a brace)",
			     f);
			return -1;
		}
		close = strchr(open + 1, '}');
		if (!close) {
			fail(e, f, "pattern", "%s has a '{' without its '}' (write {{ for a brace)",
			     f);
			return -1;
		}
		name = open + 1;
		n = (size_t)(close - name);
		if (n == 15 && memcmp(name, "hyperparameters", 15) == 0) {
			fail(e, f, "pattern",
			     "{hyperparameters} must be a whole element of the command (it becomes "
			     "several)");
			return -1;
		}
		if (n > 3 && memcmp(name, "hp.", 3) == 0) {
			const json_t *spec = spec_named(t->schema, name + 3, n - 3);
			if (!spec) {
				fail(e, f, "pattern",
				     "%s uses {%.*s}, but no hyperparameter is named '%.*s'", f,
				     (int)n, name, (int)(n - 3), name + 3);
				return -1;
			}
			if (vals && out) {
				const json_t *v = json_object_get(
				        vals->hp, json_string_value(json_object_get(spec, "name")));
				char b[VALUE_MAX + 1];
				value_text(v, b, sizeof(b));
				if (buf_add(out, b, strlen(b)) < 0)
					goto nomem;
			}
		} else if (input_named(t->inputs, name, n)) {
			if (vals && out) {
				char key[40];
				const char *v;
				snprintf(key, sizeof(key), "%.*s", (int)n, name);
				v = json_string_value(json_object_get(vals->inputs, key));
				if (buf_add(out, v ? v : "", v ? strlen(v) : 0) < 0)
					goto nomem;
			}
		} else {
			fail(e, f, "pattern",
			     "%s uses {%.*s}: not an input, {hp.NAME} or {hyperparameters}", f,
			     n > 64 ? 64 : (int)n, name);
			return -1;
		}
		p = close + 1;
	}
	if (out && out->len > ELEMENT_MAX) {
		fail(e, f, "pattern", "%s is longer than %d bytes once expanded", f, ELEMENT_MAX);
		return -1;
	}
	return 0;
nomem:
	fail(e, f, "nomem", "out of memory");
	return -1;
}

static int pattern_check(const struct template_def *t, struct template_error *e)
{
	size_t i;
	json_t *s;

	if (!json_is_array(t->pattern) || json_array_size(t->pattern) == 0 ||
	    json_array_size(t->pattern) > COMMAND_MAX) {
		fail(e, "command", "pattern",
		     "command must be an array of 1 to %d strings, e.g. [\"python3\", "
		     "\"{script}\", \"{hyperparameters}\"]",
		     COMMAND_MAX);
		return -1;
	}
	json_array_foreach(t->pattern, i, s)
	{
		char f[32];
		snprintf(f, sizeof(f), "command[%zu]", i);
		if (!text_ok(s, 8192)) {
			fail(e, f, "pattern", "%s must be a string of at most 8192 bytes", f);
			return -1;
		}
		if (i == 0 && json_string_length(s) == 0) {
			fail(e, f, "pattern", "command[0] must name the program to run");
			return -1;
		}
		if (strcmp(json_string_value(s), "{hyperparameters}") == 0) {
			if (i == 0) {
				fail(e, f, "pattern", "command[0] must name the program to run");
				return -1;
			}
			continue;
		}
		if (subst(t, json_string_value(s), i, NULL, NULL, e) < 0)
			return -1;
	}
	return 0;
}

int template_check(const struct template_def *t, struct template_error *e)
{
	memset(e, 0, sizeof(*e));
	if (schema_check(t->schema, e) < 0 || inputs_check(t->inputs, e) < 0)
		return -1;
	return pattern_check(t, e);
}

/* ---- expansion ---- */

/* The completed hyperparameters: each of the schema's, the user's value or
 * the default; reals for float ones. */
static json_t *complete(const json_t *schema, const json_t *hp, struct template_error *e)
{
	json_t *out = json_object(), *s, *v;
	const char *key;
	size_t i;

	if (!out) {
		fail(e, "hyperparameters", "nomem", "out of memory");
		return NULL;
	}
	if (hp && !json_is_object(hp)) {
		fail(e, "hyperparameters", "type", "hyperparameters must be an object");
		goto bad;
	}
	json_object_foreach((json_t *)hp, key, v)
	{
		if (!spec_named(schema, key, strlen(key))) {
			char f[96], list[300];
			size_t o = 0;
			json_t *x;
			list[0] = '\0';
			json_array_foreach(schema, i, x)
			{
				if (o < sizeof(list))
					o += (size_t)snprintf(
					        list + o, sizeof(list) - o, "%s%s", i ? ", " : "",
					        json_string_value(json_object_get(x, "name")));
			}
			snprintf(f, sizeof(f), "hyperparameters.%.64s", key);
			if (json_array_size(schema))
				fail(e, f, "unknown",
				     "unknown hyperparameter '%.64s' (this template has: %s)", key,
				     list);
			else
				fail(e, f, "unknown",
				     "unknown hyperparameter '%.64s' (this template has none)",
				     key);
			goto bad;
		}
	}
	json_array_foreach(schema, i, s)
	{
		const char *name = json_string_value(json_object_get(s, "name"));
		const char *type = json_string_value(json_object_get(s, "type"));
		char f[96], what[100];
		snprintf(f, sizeof(f), "hyperparameters.%s", name);
		snprintf(what, sizeof(what), "hyperparameter '%s'", name);
		v = json_object_get(hp, name);
		if (!v || json_is_null(v))
			v = json_object_get(s, "default");
		if (!v || json_is_null(v)) {
			if (strcmp(type, "bool") != 0) {
				fail(e, f, "required",
				     "hyperparameter '%s' has no default: give it", name);
				goto bad;
			}
			v = json_false();
			json_object_set_new(out, name, v);
			continue;
		}
		if (value_check(s, v, f, what, e) < 0)
			goto bad;
		if (strcmp(type, "float") == 0)
			json_object_set_new(out, name, json_real(json_number_value(v)));
		else
			json_object_set(out, name, v);
	}
	return out;
bad:
	json_decref(out);
	return NULL;
}

/* The inputs' values: the user's or the defaults, "~/" made home. */
static json_t *input_values(const json_t *inputs, const json_t *given, const char *home,
                            struct template_error *e)
{
	json_t *out = json_object(), *s, *v;
	const char *key;
	size_t i;

	if (!out) {
		fail(e, "inputs", "nomem", "out of memory");
		return NULL;
	}
	if (given && !json_is_object(given)) {
		fail(e, "inputs", "type", "inputs must be an object");
		goto bad;
	}
	json_object_foreach((json_t *)given, key, v)
	{
		char f[96];
		snprintf(f, sizeof(f), "inputs.%.64s", key);
		if (!input_named(inputs, key, strlen(key))) {
			fail(e, f, "unknown", "unknown input '%.64s'", key);
			goto bad;
		}
		if (!json_is_null(v) && !text_ok(v, INPUT_MAX)) {
			fail(e, f, "type", "input '%s' must be a string of at most %d bytes", key,
			     INPUT_MAX);
			goto bad;
		}
	}
	json_array_foreach(inputs, i, s)
	{
		const char *name = json_string_value(json_object_get(s, "name")), *t;
		char f[96];
		snprintf(f, sizeof(f), "inputs.%s", name);
		v = json_object_get(given, name);
		if (!json_is_string(v) || json_string_length(v) == 0)
			v = json_object_get(s, "default");
		t = json_string_value(v);
		if ((!t || !*t) && json_is_true(json_object_get(s, "required"))) {
			fail(e, f, "required", "input '%s' is required", name);
			goto bad;
		}
		if (t && home && strncmp(t, "~/", 2) == 0) {
			struct buf b = { 0 };
			if (buf_add(&b, home, strlen(home)) < 0 ||
			    buf_add(&b, t + 1, strlen(t + 1)) < 0) {
				free(b.p);
				fail(e, f, "nomem", "out of memory");
				goto bad;
			}
			json_object_set_new(out, name, json_string(b.p));
			free(b.p);
		} else {
			json_object_set_new(out, name, json_string(t ? t : ""));
		}
	}
	return out;
bad:
	json_decref(out);
	return NULL;
}

int template_expand(const struct template_def *t, const json_t *hparams, const json_t *given,
                    const char *home, json_t **command, json_t **completed,
                    struct template_error *e)
{
	json_t *hp = NULL, *in = NULL, *cmd = NULL, *s;
	struct values vals;
	size_t i;
	int rc = -1;

	memset(e, 0, sizeof(*e));
	*command = NULL;
	*completed = NULL;
	hp = complete(t->schema, hparams, e);
	if (!hp)
		goto out;
	in = input_values(t->inputs, given, home, e);
	if (!in)
		goto out;
	cmd = json_array();
	if (!cmd) {
		fail(e, "command", "nomem", "out of memory");
		goto out;
	}
	vals.hp = hp;
	vals.inputs = in;
	json_array_foreach(t->pattern, i, s)
	{
		const char *el = json_string_value(s);
		if (strcmp(el, "{hyperparameters}") == 0) {
			size_t k;
			json_t *spec;
			json_array_foreach(t->schema, k, spec)
			{
				const char *name = json_string_value(json_object_get(spec, "name"));
				json_t *v = json_object_get(hp, name);
				char flag[72], b[VALUE_MAX + 1];
				snprintf(flag, sizeof(flag), "--%s", name);
				if (json_is_boolean(v)) {
					if (json_is_true(v))
						json_array_append_new(cmd, json_string(flag));
					continue;
				}
				value_text(v, b, sizeof(b));
				json_array_append_new(cmd, json_string(flag));
				json_array_append_new(cmd, json_string(b));
			}
		} else {
			struct buf b = { 0 };
			if (subst(t, el, i, &vals, &b, e) < 0) {
				free(b.p);
				goto out;
			}
			json_array_append_new(cmd, json_string(b.p ? b.p : ""));
			free(b.p);
		}
	}
	if (json_array_size(cmd) > COMMAND_MAX) {
		fail(e, "command", "pattern", "the expanded command has more than %d elements",
		     COMMAND_MAX);
		goto out;
	}
	*command = cmd;
	cmd = NULL; /* handed off */
	*completed = hp;
	hp = NULL; /* handed off */
	rc = 0;
out:
	json_decref(hp);
	json_decref(in);
	json_decref(cmd);
	return rc;
}

/* ---- text ---- */

char *template_dump_flat(const json_t *obj)
{
	struct buf b = { 0 };
	const char *key;
	json_t *v;
	int first = 1;

	if (buf_add(&b, "{", 1) < 0)
		goto nomem;
	json_object_foreach((json_t *)obj, key, v)
	{
		json_t *k = json_string(key);
		char *ks = k ? json_dumps(k, JSON_ENCODE_ANY) : NULL, num[40], *vs = NULL;
		const char *text = num;
		json_decref(k);
		if (!ks)
			goto nomem;
		if (json_is_real(v)) {
			double d = json_real_value(v);
			if (isfinite(d))
				template_format_real(d, num, sizeof(num));
			else
				snprintf(num, sizeof(num), "null");
		} else {
			vs = json_dumps(v, JSON_ENCODE_ANY | JSON_COMPACT);
			text = vs;
		}
		if (!text || buf_add(&b, first ? "" : ",", first ? 0 : 1) < 0 ||
		    buf_add(&b, ks, strlen(ks)) < 0 || buf_add(&b, ":", 1) < 0 ||
		    buf_add(&b, text, strlen(text)) < 0) {
			free(ks);
			free(vs);
			goto nomem;
		}
		free(ks);
		free(vs);
		first = 0;
	}
	if (buf_add(&b, "}", 1) < 0)
		goto nomem;
	return b.p;
nomem:
	free(b.p);
	return NULL;
}

void template_env(const json_t *hp, json_t *env)
{
	const char *key;
	json_t *v;

	json_object_foreach((json_t *)hp, key, v)
	{
		char name[96], val[VALUE_MAX + 1];
		size_t o = (size_t)snprintf(name, sizeof(name), "GPUCLOUD_HP_");
		for (const char *k = key; *k && o + 1 < sizeof(name); k++) {
			char ch = *k;
			if (ch >= 'a' && ch <= 'z')
				ch = (char)(ch - 'a' + 'A');
			else if (!((ch >= 'A' && ch <= 'Z') || (ch >= '0' && ch <= '9')))
				ch = '_';
			name[o++] = ch;
		}
		name[o] = '\0';
		if (json_is_object(v) || json_is_array(v) || json_is_null(v)) {
			char *s = json_dumps(v, JSON_COMPACT | JSON_ENCODE_ANY);
			json_object_set_new(env, name, json_string(s ? s : ""));
			free(s);
			continue;
		}
		if (json_is_string(v) && json_string_length(v) > VALUE_MAX) {
			json_object_set_new(env, name, json_string(json_string_value(v)));
			continue;
		}
		value_text(v, val, sizeof(val));
		json_object_set_new(env, name, json_string(val));
	}
}
