/* job_body.c — the body of a job submit (POST /jobs, and each run of a
 * sweep): its fields and types, and the checks beyond types.  Moved out of
 * api_jobs.c unchanged so that a sweep's runs are checked exactly as a
 * submitted job is.
 */
#include <string.h>

#include "api/job_body.h"
#include "auth/auth.h"

const struct jfield job_body_spec[] = {
	{ "name", J_STRING, 1, 63 },
	{ "image_id", J_INT, 1, 0 },
	{ "command", J_ARRAY, 1, 256 },
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
	{ NULL, 0, 0, 0 },
};

static int name_ok(const char *s, size_t max)
{
	size_t n = s ? strlen(s) : 0;

	if (n == 0 || n > max || !((s[0] >= 'a' && s[0] <= 'z') || (s[0] >= '0' && s[0] <= '9')))
		return 0;
	return strspn(s, "abcdefghijklmnopqrstuvwxyz0123456789._-") == n;
}

static int ident_ok(const char *k, size_t max, const char *more)
{
	size_t n = strlen(k);

	if (n == 0 || n > max || (k[0] >= '0' && k[0] <= '9'))
		return 0;
	return strspn(k, "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789_") +
	               strspn(k + strspn(k, "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvw"
	                                    "xyz0123456789_"),
	                      more) ==
	       n;
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
	int has_pool = json_is_string(json_object_get(body, "pool"));
	json_t *v;
	size_t i;

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
