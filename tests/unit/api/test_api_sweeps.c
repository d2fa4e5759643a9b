/* test_api_sweeps.c — a sweep's hyperparameter sets (sweep_sets): a grid's
 * product in odometer order, a list as given, the refusals (neither or
 * both, empty, not arrays, nested values, more than 256 runs); and a run's
 * body (run_body): its name, its set over the job's own hyperparameters,
 * the defaults written out. */
#include "api/api_sweeps.c"

#include "harness.h"

static json_t *sets_for(const char *body, struct sets_err *e)
{
	json_t *b = json_loads(body, 0, NULL), *s;

	memset(e, 0, sizeof(*e));
	s = sweep_sets(b, e);
	json_decref(b);
	return s;
}

static char *dump(json_t *j)
{
	static char buf[1024];
	char *s = json_dumps(j, JSON_COMPACT | JSON_REAL_PRECISION(15));

	snprintf(buf, sizeof(buf), "%s", s ? s : "");
	free(s);
	json_decref(j);
	return buf;
}

TEST(grid_product_in_odometer_order)
{
	struct sets_err e;

	CHECK_STR(
	        dump(sets_for("{\"grid\": {\"lr\": [0.1, 0.01, 0.001], \"batch\": [32, 64]}}", &e)),
	        "[{\"lr\":0.1,\"batch\":32},{\"lr\":0.1,\"batch\":64},{\"lr\":0.01,\"batch\":32},"
	        "{\"lr\":0.01,\"batch\":64},{\"lr\":0.001,\"batch\":32},{\"lr\":0.001,\"batch\":64}"
	        "]");
	CHECK_STR(dump(sets_for("{\"grid\": {\"opt\": [\"sgd\", true]}}", &e)),
	          "[{\"opt\":\"sgd\"},{\"opt\":true}]");
}

TEST(list_as_given)
{
	struct sets_err e;

	CHECK_STR(dump(sets_for("{\"list\": [{\"lr\": 0.5}, {}]}", &e)), "[{\"lr\":0.5},{}]");
}

TEST(refusals)
{
	static const struct {
		const char *body;
		enum rc rc;
	} cases[] = {
		{ "{}", RC_INVALID },
		{ "{\"grid\": {\"a\": [1]}, \"list\": [{}]}", RC_INVALID },
		{ "{\"grid\": {}}", RC_INVALID },
		{ "{\"grid\": {\"a\": []}}", RC_INVALID },
		{ "{\"grid\": {\"a\": 1}}", RC_INVALID },
		{ "{\"grid\": {\"a\": [{\"b\": 1}]}}", RC_INVALID },
		{ "{\"grid\": {\"a\": [null]}}", RC_INVALID },
		{ "{\"list\": []}", RC_INVALID },
		{ "{\"list\": [1]}", RC_INVALID },
		{ "{\"grid\": {\"a\": [1,2,3,4,5,6,7,8,9,10,11,12,13,14,15,16,17],"
		  " \"b\": [1,2,3,4,5,6,7,8,9,10,11,12,13,14,15,16,17]}}",
		  RC_TOO_MANY },
	};
	struct sets_err e;

	for (size_t i = 0; i < sizeof(cases) / sizeof(cases[0]); i++) {
		json_t *s = sets_for(cases[i].body, &e);
		CHECK(s == NULL);
		CHECK(e.rc == cases[i].rc);
		CHECK(e.msg[0] != '\0');
		json_decref(s);
	}
	/* 16 x 16 = 256 is allowed */
	{
		char body[400];
		size_t o = (size_t)snprintf(body, sizeof(body), "{\"grid\": {\"a\": [0");
		for (int k = 1; k < 16; k++)
			o += (size_t)snprintf(body + o, sizeof(body) - o, ",%d", k);
		o += (size_t)snprintf(body + o, sizeof(body) - o, "], \"b\": [0");
		for (int k = 1; k < 16; k++)
			o += (size_t)snprintf(body + o, sizeof(body) - o, ",%d", k);
		snprintf(body + o, sizeof(body) - o, "]}}");
		json_t *s = sets_for(body, &e);
		CHECK(json_array_size(s) == 256);
		json_decref(s);
	}
}

TEST(run_body_shape)
{
	json_t *job = json_loads("{\"image_id\": 3, \"command\": [\"true\"], \"pool\": \"a100\","
	                         " \"hyperparameters\": {\"lr\": 1, \"epochs\": 3}}",
	                         0, NULL);
	json_t *set = json_loads("{\"lr\": 0.01}", 0, NULL);
	struct template_error terr;
	json_t *run = run_body(job, "sw", 4, set, NULL, "/home/u", &terr);

	CHECK_STR(json_string_value(json_object_get(run, "name")), "sw-5");
	CHECK_STR(dump(json_incref(json_object_get(run, "hyperparameters"))),
	          "{\"lr\":0.01,\"epochs\":3}");
	CHECK(json_integer_value(json_object_get(run, "slices")) == 1);
	CHECK(json_integer_value(json_object_get(run, "cpu_millis")) == 1000);
	CHECK(json_integer_value(json_object_get(run, "max_runtime_s")) == 86400);
	CHECK_STR(json_string_value(json_object_get(run, "priority")), "normal");
	/* the job itself is left as it was */
	CHECK(json_integer_value(json_object_get(json_object_get(job, "hyperparameters"), "lr")) ==
	      1);
	json_decref(run);
	json_decref(set);
	json_decref(job);
}

int main(void)
{
	RUN(grid_product_in_odometer_order);
	RUN(list_as_given);
	RUN(refusals);
	RUN(run_body_shape);
	return harness_done("test_api_sweeps");
}
