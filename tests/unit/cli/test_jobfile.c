/* test_jobfile.c — the job file reader of `gpucloud submit`: YAML typing,
 * the friendly amounts (cpu, memory, durations), the vocabulary mapped to
 * the API's fields, sweeps, and the refusals (unknown fields, aliases,
 * duplicate keys, two documents, wrong types). */
#include "cli/jobfile.c"

#include "harness.h"

static json_t *req_of(const char *text, int *sweep, struct jobfile_err *err)
{
	json_t *doc = jobfile_parse(text, strlen(text), err), *req;

	if (!doc)
		return NULL;
	req = jobfile_request(doc, sweep, err);
	json_decref(doc);
	return req;
}

static int same(json_t *v, const char *json)
{
	json_t *want = json_loads(json, JSON_DECODE_ANY, NULL);
	int ok = want && json_equal(v, want);

	if (!ok) {
		char *got = json_dumps(v, JSON_COMPACT | JSON_ENCODE_ANY);
		fprintf(stderr, "got %s, want %s\n", got ? got : "(null)", json);
		free(got);
	}
	json_decref(want);
	return ok;
}

TEST(amounts)
{
	CHECK(jobfile_cpu_millis("2") == 2000);
	CHECK(jobfile_cpu_millis("0.5") == 500);
	CHECK(jobfile_cpu_millis("250m") == 250);
	CHECK(jobfile_cpu_millis("0.0005") == -1);
	CHECK(jobfile_cpu_millis("-1") == -1);
	CHECK(jobfile_cpu_millis("1.5m") == -1);
	CHECK(jobfile_cpu_millis("two") == -1);
	CHECK(jobfile_mib("512") == 512);
	CHECK(jobfile_mib("512M") == 512);
	CHECK(jobfile_mib("2G") == 2048);
	CHECK(jobfile_mib("1.5Gi") == 1536);
	CHECK(jobfile_mib("1TiB") == 1048576);
	CHECK(jobfile_mib("0.3M") == -1);
	CHECK(jobfile_mib("1.2.3G") == -1);
	CHECK(jobfile_mib("64K") == -1);
	CHECK(jobfile_seconds("3600") == 3600);
	CHECK(jobfile_seconds("90m") == 5400);
	CHECK(jobfile_seconds("1d12h") == 129600);
	CHECK(jobfile_seconds("1h30m15s") == 5415);
	CHECK(jobfile_seconds("") == -1);
	CHECK(jobfile_seconds("1x") == -1);
	CHECK(jobfile_seconds("h") == -1);
	CHECK(jobfile_seconds("-5") == -1);
}

TEST(scalars_typed_as_yaml)
{
	json_t *v;

	CHECK(json_is_null(v = jobfile_scalar("~")));
	json_decref(v);
	CHECK(json_is_true(v = jobfile_scalar("true")));
	json_decref(v);
	CHECK(same(v = jobfile_scalar("42"), "42"));
	json_decref(v);
	CHECK(same(v = jobfile_scalar("-0.25"), "-0.25"));
	json_decref(v);
	CHECK(same(v = jobfile_scalar("1e-3"), "0.001"));
	json_decref(v);
	CHECK(same(v = jobfile_scalar("yes"), "\"yes\"")); /* YAML 1.2: text */
	json_decref(v);
	CHECK(same(v = jobfile_scalar(".inf"), "\".inf\""));
	json_decref(v);
	CHECK(same(v = jobfile_scalar("99999999999999999999"), "1e20"));
	json_decref(v);
	CHECK(same(v = jobfile_scalar("0x1f"), "\"0x1f\""));
	json_decref(v);
}

TEST(yaml_job)
{
	struct jobfile_err err;
	int sweep = -1;
	json_t *r = req_of("name: train\n"
	                   "image: nvcr.io/nvidia/pytorch:24.08-py3\n"
	                   "command: python train.py --lr 0.1\n"
	                   "pool: a100\n"
	                   "gpus: 2\n"
	                   "cpu: 4\n"
	                   "memory: 16G\n"
	                   "shm: 1G\n"
	                   "max_runtime: 2h\n"
	                   "retries: 1\n"
	                   "env: {PORT: 8080, DEBUG: true, NAME: x}\n"
	                   "hyperparameters: {lr: 0.1, opt: \"adam\", n: 3}\n"
	                   "tags: demo\n",
	                   &sweep, &err);

	CHECK(r != NULL);
	CHECK(sweep == 0);
	CHECK(same(r, "{\"name\":\"train\",\"image\":\"nvcr.io/nvidia/pytorch:24.08-py3\","
	              "\"command\":[\"sh\",\"-c\",\"python train.py --lr 0.1\"],\"pool\":\"a100\","
	              "\"slices\":2,\"cpu_millis\":4000,\"mem_mib\":16384,\"shm_mib\":1024,"
	              "\"max_runtime_s\":7200,\"retry_limit\":1,"
	              "\"env\":{\"PORT\":\"8080\",\"DEBUG\":\"true\",\"NAME\":\"x\"},"
	              "\"hyperparameters\":{\"lr\":0.1,\"opt\":\"adam\",\"n\":3},"
	              "\"tags\":[\"demo\"]}"));
	json_decref(r);
	/* an image id, as a number or text; the API's own names */
	r = req_of("{\"name\":\"x\",\"image\":\"7\",\"command\":[\"a\",1],\"cpu_millis\":100}", &sweep,
	           &err);
	CHECK(r && same(r, "{\"name\":\"x\",\"image_id\":7,\"command\":[\"a\",\"1\"],"
	                   "\"cpu_millis\":100}"));
	json_decref(r);
	/* a field left empty is absent */
	r = req_of("name: x\npool:\n", &sweep, &err);
	CHECK(r && same(r, "{\"name\":\"x\"}"));
	json_decref(r);
}

TEST(sweeps)
{
	struct jobfile_err err;
	int sweep = -1;
	json_t *r = req_of("name: s\nimage: 3\ncommand: [echo]\nmetric: loss\ngoal: min\n"
	                   "tags: [a]\ngrid: {lr: [0.1, 0.01]}\n",
	                   &sweep, &err);

	CHECK(r != NULL);
	CHECK(sweep == 1);
	CHECK(same(r, "{\"name\":\"s\",\"grid\":{\"lr\":[0.1,0.01]},\"metric\":\"loss\","
	              "\"goal\":\"min\",\"tags\":[\"a\"],\"job\":{\"image_id\":3,"
	              "\"command\":[\"echo\"],\"tags\":[\"a\"]}}"));
	json_decref(r);
	/* the API's shape: the run under "job" */
	r = req_of("{\"name\":\"s\",\"job\":{\"image\":\"bb\",\"cpu\":\"0.5\",\"name\":\"ignored\"},"
	           "\"list\":[{\"lr\":1}],\"metric\":\"m\",\"goal\":\"max\"}",
	           &sweep, &err);
	CHECK(r && sweep == 1);
	CHECK(r && same(json_object_get(r, "job"), "{\"image\":\"bb\",\"cpu_millis\":500}"));
	json_decref(r);
}

static void refused(const char *text, const char *msg_part)
{
	struct jobfile_err err;
	int sweep;
	json_t *r = req_of(text, &sweep, &err);

	CHECK(r == NULL);
	if (!strstr(err.msg, msg_part)) {
		fprintf(stderr, "'%s' lacks '%s'\n", err.msg, msg_part);
		harness_cur_failed = 1;
	}
	json_decref(r);
}

TEST(refusals)
{
	refused("", "empty");
	refused("- a\n- b\n", "mapping");
	refused("name: x\ncomand: y\n", "unknown field 'comand'");
	refused("a: &x 1\nb: *x\n", "aliases");
	refused("name: x\nname: y\n", "twice");
	refused("a: 1\n---\nb: 2\n", "one document");
	refused("name: [x\n", "line 2, column 1");
	refused("{\"name\": \"x\", \"name\": \"y\"}", "duplicate");
	refused("gpus: two\n", "'gpus' must be a whole number");
	refused("cpu: lots\n", "'cpu' must be CPUs");
	refused("memory: 1K\n", "'memory' must be a size");
	refused("max_runtime: soon\n", "'max_runtime' must be a duration");
	refused("env: [a]\n", "'env' must be a mapping");
	refused("env: {a: [1]}\n", "'env.a' must be a single value");
	refused("hyperparameters: {a: {b: 1}}\n", "'hyperparameters.a'");
	refused("command: []\n", "'command' must be");
	refused("command: [{a: 1}]\n", "'command[0]' must be text");
	refused("tags: [1]\n", "'tags[0]' must be text");
	refused("name: \"a\\0b\"\n", "NUL");
	refused("grid: [1]\n", "'grid' must map");
	refused("grid: {lr: 1}\n", "'grid.lr' must be a list");
	refused("job: {}\nimage: x\n", "beside 'job'");
	refused("image: \"\"\n", "'image' must be");
}

TEST(deep_nesting_refused)
{
	char buf[400];
	size_t n = 0;
	struct jobfile_err err;

	for (int i = 0; i < JOBFILE_MAX_DEPTH + 5; i++)
		buf[n++] = '[';
	buf[n] = '\0';
	CHECK(jobfile_parse(buf, n, &err) == NULL);
	CHECK(err.msg[0] != '\0');
}

int main(void)
{
	RUN(amounts);
	RUN(scalars_typed_as_yaml);
	RUN(yaml_job);
	RUN(sweeps);
	RUN(refusals);
	RUN(deep_nesting_refused);
	return harness_done("test_jobfile");
}
