/* test_job_body.c — a submit from a template without a server
 * (job_body_expand(), what POST /jobs and a sweep's runs share): the
 * template's image and resources fill what the body leaves out, the
 * body's win where the template allows, a template that allows no
 * overrides refuses them naming the field, and the command and completed
 * hyperparameters come back as exact JSON text.
 */
#include <stdlib.h>
#include <string.h>

#include <jansson.h>

#include "api/job_body.h"
#include "harness.h"
#include "work/template.h"

#define TMPL(extra)                                                                                \
	"{\"name\": \"pt\", \"image_id\": 7, \"pool\": null, \"slices\": 2, \"cpu_millis\": 2000," \
	" \"mem_mib\": 4096, \"shm_mib\": 512, \"max_runtime_s\": 600, \"members\": 1,"            \
	" \"command\": [\"python3\", \"{script}\", \"{hyperparameters}\"],"                        \
	" \"inputs\": [{\"name\": \"script\", \"default\": \"~/train.py\"}],"                      \
	" \"hyperparameters\": [{\"name\": \"lr\", \"type\": \"float\", \"default\": 0.01,"        \
	" \"max\": 1}, {\"name\": \"amp\", \"type\": \"bool\"}]" extra "}"

static json_t *J(const char *s)
{
	json_t *v = json_loads(s, 0, NULL);
	if (!v)
		fprintf(stderr, "bad JSON in test: %s\n", s);
	return v;
}

static long long num(json_t *o, const char *k)
{
	return (long long)json_integer_value(json_object_get(o, k));
}

TEST(fills_from_the_template)
{
	json_t *t = J(TMPL(", \"allow_overrides\": true")),
	       *b = J("{\"name\": \"a\", \"hyperparameters\": {\"lr\": 0.1, \"amp\": true}}");
	struct template_error e;
	char *cmd = NULL, *hp = NULL;

	CHECK(job_body_expand(b, t, "/home/alice", &cmd, &hp, &e) == 0);
	CHECK_STR(cmd, "[\"python3\",\"/home/alice/train.py\",\"--lr\",\"0.1\",\"--amp\"]");
	CHECK_STR(hp, "{\"lr\":0.1,\"amp\":true}");
	CHECK(num(b, "image_id") == 7 && num(b, "cpu_millis") == 2000 && num(b, "mem_mib") == 4096);
	CHECK(num(b, "shm_mib") == 512 && num(b, "max_runtime_s") == 600);
	CHECK(!json_object_get(b, "slices"));  /* no pool: no slices */
	CHECK(!json_object_get(b, "members")); /* one member: nothing said */
	CHECK(json_array_size(json_object_get(b, "command")) == 5);
	free(cmd);
	free(hp);
	json_decref(b);
	json_decref(t);
}

TEST(the_body_wins_where_allowed)
{
	json_t *t = J(TMPL(", \"allow_overrides\": true")),
	       *b = J("{\"name\": \"a\", \"image_id\": 9, \"pool\": \"a100\", \"cpu_millis\": "
	              "500}");
	struct template_error e;
	char *cmd = NULL, *hp = NULL;

	CHECK(job_body_expand(b, t, "/home/alice", &cmd, &hp, &e) == 0);
	CHECK(num(b, "image_id") == 9 && num(b, "cpu_millis") == 500 && num(b, "slices") == 2);
	CHECK_STR(hp, "{\"lr\":0.01,\"amp\":false}");
	free(cmd);
	free(hp);
	json_decref(b);
	json_decref(t);
}

TEST(members_of_a_distributed_template)
{
	json_t *t = J("{\"name\": \"ddp\", \"image_id\": 7, \"members\": 2, \"allow_overrides\": "
	              "true,"
	              " \"command\": [\"true\"], \"hyperparameters\": []}"),
	       *b = J("{\"name\": \"a\"}");
	struct template_error e;
	char *cmd = NULL, *hp = NULL;

	CHECK(job_body_expand(b, t, "/home/alice", &cmd, &hp, &e) == 0);
	CHECK(num(b, "members") == 2);
	CHECK_STR(hp, "{}");
	free(cmd);
	free(hp);
	json_decref(b);
	json_decref(t);
}

static void refused(const char *tmpl, const char *body, const char *field, const char *reason)
{
	json_t *t = J(tmpl), *b = J(body);
	struct template_error e;
	char *cmd = (char *)1, *hp = (char *)1;

	CHECK(job_body_expand(b, t, "/home/alice", &cmd, &hp, &e) < 0);
	CHECK(cmd == NULL && hp == NULL);
	CHECK_STR(e.field, field);
	CHECK_STR(e.reason, reason);
	CHECK(e.msg[0] != '\0');
	json_decref(b);
	json_decref(t);
}

TEST(refusals_name_the_field)
{
	const char *fixed = TMPL(", \"allow_overrides\": false");

	refused(fixed, "{\"image_id\": 9}", "image_id", "override");
	refused(fixed, "{\"mem_mib\": 1}", "mem_mib", "override");
	refused(fixed, "{\"pool\": \"a100\"}", "pool", "override");
	refused(fixed, "{\"command\": [\"rm\"]}", "command", "template");
	refused(fixed, "{\"hyperparameters\": {\"lr\": 2}}", "hyperparameters.lr", "max");
	refused(fixed, "{\"inputs\": {\"data\": \"x\"}}", "inputs.data", "unknown");
	refused("{\"name\": \"x\", \"image_id\": null, \"command\": [\"true\"], "
	        "\"hyperparameters\": []}",
	        "{}", "image_id", "required");
}

int main(void)
{
	RUN(fills_from_the_template);
	RUN(the_body_wins_where_allowed);
	RUN(members_of_a_distributed_template);
	RUN(refusals_name_the_field);
	return harness_done("test_job_body");
}
