/* job_body.c — the body of a job submit (POST /jobs, and each run of a
 * sweep): its fields and types, the checks beyond types, and a submit from
 * a job template (the template's resources filled in, its command expanded
 * by work/template.c).  Out of api_jobs.c so that a sweep's runs are
 * checked and expanded exactly as a submitted job is.
 */
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "api/job_body.h"
#include "auth/auth.h"
#include "work/template.h"

const struct jfield job_body_spec[] = {
	{ "name", J_STRING, 1, 63 },
	{ "image_id", J_INT, 0, 0 },    /* required without a template */
	{ "command", J_ARRAY, 0, 256 }, /* required without a template */
	{ "template_id", J_INT, 0, 0 },
	{ "inputs", J_OBJECT, 0, 0 },
	{ "env", J_OBJECT, 0, 0 },
	{ "hyperparameters", J_OBJECT, 0, 0 },
	{ "tags", J_STRINGS, 0, 16 },
	{ "pool", J_STRING, 0, 63 },
	{ "slices", J_INT, 0, 0 },
	{ "cpu_millis", J_INT, 0, 0 },
	{ "mem_mib", J_INT, 0, 0 },
	{ "shm_mib", J_INT, 0, 0 },
	{ "priority", J_STRING, 0, 16 },
	{ "max_runtime_s", J_INT, 0, 0 },
	{ "retry_limit", J_INT, 0, 0 },
	{ "members", J_INT, 0, 0 }, /* a distributed job (POST /jobs only) */
	{ "class", J_INT, 0, 0 },   /* work in a class's context: its pool (0030) */
	{ NULL, 0, 0, 0 },
};

static int name_ok(const char *s, size_t max)
{
	size_t n = s ? strlen(s) : 0;

	if (n == 0 || n > max || !((s[0] >= 'a' && s[0] <= 'z') || (s[0] >= '0' && s[0] <= '9')))
		return 0;
	return strspn(s, "abcdefghijklmnopqrstuvwxyz0123456789._-") == n;
}

/* letters, digits, '_' and the characters of more anywhere ("batch-size"),
 * not starting with a digit */
static int ident_ok(const char *k, size_t max, const char *more)
{
	size_t n = strlen(k);

	if (n == 0 || n > max || (k[0] >= '0' && k[0] <= '9'))
		return 0;
	for (size_t i = 0; i < n; i++)
		if (!strchr("ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789_",
		            k[i]) &&
		    !strchr(more, k[i]))
			return 0;
	return 1;
}

static long long int_or(json_t *body, const char *name, long long def)
{
	json_t *v = json_object_get(body, name);

	return json_is_integer(v) ? (long long)json_integer_value(v) : def;
}

static int text_ok(json_t *v, size_t max)
{
	return json_is_string(v) && json_string_length(v) <= max &&
	       !memchr(json_string_value(v), '\0', json_string_length(v));
}

int job_body_check(struct http_req *r, json_t *body)
{
	const char *prio = json_string_value(json_object_get(body, "priority")), *k;
	int has_pool = json_is_string(json_object_get(body, "pool")) ||
	               json_is_integer(json_object_get(body, "class"));
	json_t *v;
	size_t i;

	if (!json_is_integer(json_object_get(body, "image_id")) ||
	    !json_is_array(json_object_get(body, "command"))) {
		http_reply_error(r, RC_INVALID, "or submit from a template (template_id)",
		                 "missing field '%s'",
		                 json_is_integer(json_object_get(body, "image_id")) ? "command"
		                                                                    : "image_id");
		return -1;
	}
	if (json_object_get(body, "inputs") && !json_is_null(json_object_get(body, "inputs")) &&
	    !json_is_integer(json_object_get(body, "template_id"))) {
		http_reply_error(r, RC_INVALID, "GET /api/v1/job-templates lists them",
		                 "inputs are for a job from a template: give its template_id");
		return -1;
	}
	if (!name_ok(json_string_value(json_object_get(body, "name")), 63)) {
		http_reply_error(
		        r, RC_INVALID, "e.g. \"resnet-lr0.1\"",
		        "name must be 1 to 63 lower-case letters, digits, '.', '_' or '-', "
		        "starting with a letter or digit");
		return -1;
	}
	if (prio && strcmp(prio, "normal") && strcmp(prio, "scavenger") && strcmp(prio, "exam")) {
		http_reply_error(r, RC_INVALID, NULL, "priority must be exam, normal or scavenger");
		return -1;
	}
	if (prio && strcmp(prio, "exam") == 0 && !(r->auth->role & (ROLE_TEACHER | ROLE_ADMIN))) {
		http_reply_error(r, RC_FORBIDDEN, NULL,
		                 "only teachers and admins may ask for exam priority");
		return -1;
	}
	if (json_object_get(body, "slices") &&
	    (!has_pool || int_or(body, "slices", 0) < 1 || int_or(body, "slices", 0) > 64)) {
		http_reply_error(r, RC_INVALID, "name a pool to have GPUs",
		                 "slices must be 1 to 64, with a pool");
		return -1;
	}
	if (json_object_get(body, "members") &&
	    (int_or(body, "members", 0) < 1 || int_or(body, "members", 0) > 16 ||
	     (int_or(body, "members", 1) > 1 && !has_pool))) {
		http_reply_error(r, RC_INVALID,
		                 "a distributed job runs one member per node, each with 'slices' "
		                 "of the pool",
		                 "members must be 1 to 16; more than 1 needs a pool");
		return -1;
	}
	if (int_or(body, "image_id", 0) < 1 || int_or(body, "cpu_millis", 1000) < 10 ||
	    int_or(body, "cpu_millis", 1000) > 1024000 || int_or(body, "mem_mib", 1024) < 16 ||
	    int_or(body, "mem_mib", 1024) > (1LL << 24) || int_or(body, "shm_mib", 64) < 1 ||
	    int_or(body, "shm_mib", 64) > (1LL << 20) || int_or(body, "max_runtime_s", 86400) < 1 ||
	    int_or(body, "max_runtime_s", 86400) > 30 * 86400 ||
	    int_or(body, "retry_limit", 0) < 0 || int_or(body, "retry_limit", 0) > 10) {
		http_reply_error(r, RC_INVALID, NULL,
		                 "image_id must be positive; cpu_millis 10 to 1024000, mem_mib 16 "
		                 "to 16777216, shm_mib 1 to 1048576, max_runtime_s 1 to 2592000 "
		                 "(30 days), retry_limit 0 to 10");
		return -1;
	}
	if (json_array_size(json_object_get(body, "command")) == 0) {
		http_reply_error(r, RC_INVALID, "e.g. [\"python3\", \"train.py\"]",
		                 "command must name the program to run");
		return -1;
	}
	json_array_foreach(json_object_get(body, "command"), i, v)
	{
		if (!text_ok(v, 8192)) {
			http_reply_error(r, RC_INVALID,
			                 "e.g. [\"sh\", \"-c\", \"python3 train.py\"]",
			                 "command must be an array of strings (each at most 8192 "
			                 "bytes)");
			return -1;
		}
	}
	json_array_foreach(json_object_get(body, "tags"), i, v)
	{
		if (!name_ok(json_string_value(v), 40)) {
			http_reply_error(
			        r, RC_INVALID, "e.g. [\"resnet\", \"sweep-3\"]",
			        "tags must be 1 to 40 lower-case letters, digits, '.', '_' "
			        "or '-'");
			return -1;
		}
	}
	if (json_object_size(json_object_get(body, "env")) > 64) {
		http_reply_error(r, RC_INVALID, NULL, "env has more than 64 variables");
		return -1;
	}
	json_object_foreach(json_object_get(body, "env"), k, v)
	{
		if (!ident_ok(k, 128, "") || !text_ok(v, 4096)) {
			http_reply_error(r, RC_INVALID, "e.g. {\"EPOCHS\": \"3\"}",
			                 "env must map variable names (letters, digits, '_') to "
			                 "strings of at most 4096 bytes");
			return -1;
		}
	}
	if (json_object_size(json_object_get(body, "hyperparameters")) > 64) {
		http_reply_error(r, RC_INVALID, NULL, "hyperparameters has more than 64 entries");
		return -1;
	}
	json_object_foreach(json_object_get(body, "hyperparameters"), k, v)
	{
		if (!ident_ok(k, 64, "_.-") ||
		    !(json_is_number(v) || json_is_boolean(v) || text_ok(v, 1024))) {
			http_reply_error(
			        r, RC_INVALID, "e.g. {\"lr\": 0.01, \"epochs\": 3}",
			        "hyperparameters must map names (letters, digits, '_', '.', "
			        "'-') to numbers, booleans or strings of at most 1024 bytes");
			return -1;
		}
	}
	return 0;
}

/* ---- a submit from a template ---- */

static void expand_fail(struct template_error *e, const char *field, const char *reason,
                        const char *fmt, ...) __attribute__((format(printf, 4, 5)));

static void expand_fail(struct template_error *e, const char *field, const char *reason,
                        const char *fmt, ...)
{
	va_list ap;

	snprintf(e->field, sizeof(e->field), "%s", field);
	snprintf(e->reason, sizeof(e->reason), "%s", reason);
	va_start(ap, fmt);
	vsnprintf(e->msg, sizeof(e->msg), fmt, ap);
	va_end(ap);
}

int job_body_expand(json_t *body, const json_t *tmpl, const char *home, char **command_text,
                    char **hparams_text, struct template_error *err)
{
	static const char *const amounts[] = { "cpu_millis", "mem_mib", "shm_mib", "max_runtime_s",
		                               "slices",     "members", NULL };
	int allow = json_is_true(json_object_get(tmpl, "allow_overrides"));
	const char *tname = json_string_value(json_object_get(tmpl, "name"));
	json_t *cmd = NULL, *hp = NULL, *v, *tv;
	struct template_def def;

	memset(err, 0, sizeof(*err));
	*command_text = NULL;
	*hparams_text = NULL;
	if (json_object_get(body, "command") && !json_is_null(json_object_get(body, "command"))) {
		expand_fail(err, "command", "template",
		            "a job from template '%s' runs the template's command: give inputs and "
		            "hyperparameters instead of a command",
		            tname);
		return -1;
	}
	/* the image: the template's, or the submitter's pick */
	tv = json_object_get(tmpl, "image_id");
	v = json_object_get(body, "image_id");
	if (json_is_integer(tv)) {
		if (json_is_integer(v) && !json_equal(v, tv) && !allow) {
			expand_fail(err, "image_id", "override",
			            "template '%s' runs its own image: leave image_id out", tname);
			return -1;
		}
		if (!json_is_integer(v))
			json_object_set_new(body, "image_id", json_copy(tv));
	} else if (!json_is_integer(v)) {
		expand_fail(err, "image_id", "required",
		            "template '%s' runs the image you pick: give image_id", tname);
		return -1;
	}
	/* the pool, then the amounts: the submitter's where the template
	 * allows, else the template's */
	tv = json_object_get(tmpl, "pool");
	v = json_object_get(body, "pool");
	if (json_is_string(v) && !allow && !json_equal(v, tv)) {
		expand_fail(err, "pool", "override", "template '%s' fixes the pool: leave pool out",
		            tname);
		return -1;
	}
	if (!json_is_string(v) && json_is_string(tv))
		json_object_set_new(body, "pool", json_copy(tv));
	for (int i = 0; amounts[i]; i++) {
		tv = json_object_get(tmpl, amounts[i]);
		v = json_object_get(body, amounts[i]);
		if (json_is_integer(v) && !allow && !json_equal(v, tv)) {
			expand_fail(err, amounts[i], "override",
			            "template '%s' fixes %s: leave it out", tname, amounts[i]);
			return -1;
		}
		if (json_is_integer(v) || !json_is_integer(tv))
			continue;
		/* slices only with a pool (a job without one has none) */
		if (strcmp(amounts[i], "slices") == 0 &&
		    (!json_is_string(json_object_get(body, "pool")) || json_integer_value(tv) < 1))
			continue;
		/* members: a distributed template's count of containers (a
		 * single-node job's body says nothing of them) */
		if (strcmp(amounts[i], "members") == 0 && json_integer_value(tv) <= 1)
			continue;
		json_object_set_new(body, amounts[i], json_copy(tv));
	}
	def.pattern = json_object_get(tmpl, "command");
	def.schema = json_object_get(tmpl, "hyperparameters");
	def.inputs = json_object_get(tmpl, "inputs");
	v = json_object_get(body, "hyperparameters");
	tv = json_object_get(body, "inputs");
	if (template_expand(&def, json_is_null(v) ? NULL : v, json_is_null(tv) ? NULL : tv, home,
	                    &cmd, &hp, err) < 0)
		return -1;
	*command_text = json_dumps(cmd, JSON_COMPACT);
	*hparams_text = template_dump_flat(hp);
	json_object_set_new(body, "command", cmd);
	json_object_set_new(body, "hyperparameters", hp);
	if (!*command_text || !*hparams_text) {
		free(*command_text);
		free(*hparams_text);
		*command_text = *hparams_text = NULL;
		expand_fail(err, "command", "nomem", "out of memory");
		return -1;
	}
	return 0;
}

enum submit_outcome job_body_submitted(struct http_req *r, PGresult *res, enum rc rc,
                                       const char *key, int *tries, const char *what,
                                       const char **id)
{
	*id = NULL;
	if (rc == RC_CONFLICT && key[0]) {
		/* a concurrent submit with the same key won the insert: the
		 * statement again finds what it made */
		if ((*tries)++ > 0) {
			http_reply_error(
			        r, RC_CONFLICT, "retry the request",
			        "a concurrent submit with this Idempotency-Key is in progress");
			return SUBMIT_REPLIED;
		}
		return SUBMIT_AGAIN;
	}
	if (rc != RC_OK) {
		char what_failed[48];
		snprintf(what_failed, sizeof(what_failed), "could not submit the %s", what);
		api_reply_db_error(r, rc, what_failed);
		return SUBMIT_REPLIED;
	}
	if (db_val(res, 0, 2)) {
		/* this key was used before: the same submit again, or not */
		if (strcmp(db_val(res, 0, 3), "t") != 0) {
			char hint[64];
			snprintf(hint, sizeof(hint), "use a new Idempotency-Key for a different %s",
			         what);
			http_reply_error(r, RC_CONFLICT, hint,
			                 "Idempotency-Key '%s' was used for a different submission",
			                 key);
			return SUBMIT_REPLIED;
		}
		http_add_header(r, "Idempotent-Replayed", "true");
		*id = db_val(res, 0, 2);
		return SUBMIT_REPLAY;
	}
	if (!db_val(res, 0, 0) && db_val(res, 0, 1)) {
		/* no quota would ever admit it (0015) */
		http_reply_error(r, RC_FORBIDDEN,
		                 "an admin sets a quota for you or a default for your role", "%s",
		                 db_val(res, 0, 1));
		return SUBMIT_REPLIED;
	}
	if (!db_val(res, 0, 0)) {
		http_reply_error(r, RC_NOTFOUND, "GET /api/v1/images and /api/v1/pools list them",
		                 "no such image or pool (or the image is not available to you)");
		return SUBMIT_REPLIED;
	}
	*id = db_val(res, 0, 0);
	return SUBMIT_NEW;
}
