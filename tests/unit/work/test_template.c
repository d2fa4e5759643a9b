/* test_template.c — job templates without a server: the exact command a
 * pattern becomes, defaults filled, every user error naming its field, and
 * every schema or pattern mistake an admin can make refused.
 */
#include <stdlib.h>
#include <string.h>

#include <jansson.h>

#include "harness.h"
#include "work/template.h"

static json_t *J(const char *doc)
{
	json_t *v = json_loads(doc, JSON_DECODE_ANY, NULL);
	if (!v)
		fprintf(stderr, "bad JSON in test: %s\n", doc);
	return v;
}

#define PYTORCH_SCHEMA                                                                             \
	"[{\"name\": \"lr\", \"type\": \"float\", \"default\": 0.01, \"min\": 0.000001, \"max\": " \
	"10},"                                                                                     \
	" {\"name\": \"epochs\", \"type\": \"int\", \"default\": 3, \"min\": 1, \"max\": 1000},"   \
	" {\"name\": \"batch-size\", \"type\": \"int\", \"default\": 32},"                         \
	" {\"name\": \"optimizer\", \"type\": \"choice\", \"default\": \"adam\", \"choices\": "    \
	"[\"adam\", \"sgd\"]},"                                                                    \
	" {\"name\": \"tag\", \"type\": \"string\", \"default\": \"a b\"},"                        \
	" {\"name\": \"verbose\", \"type\": \"bool\", \"default\": false}]"

struct fixture {
	json_t *pattern, *schema, *inputs;
	struct template_def def;
};

static void fx_init(struct fixture *f, const char *pattern, const char *schema, const char *inputs)
{
	f->pattern = J(pattern);
	f->schema = J(schema);
	f->inputs = inputs ? J(inputs) : NULL;
	f->def.pattern = f->pattern;
	f->def.schema = f->schema;
	f->def.inputs = f->inputs;
}

static void fx_release(struct fixture *f)
{
	json_decref(f->pattern);
	json_decref(f->schema);
	json_decref(f->inputs);
}

/* The expansion of hp (JSON text) as compact JSON text; "" on error (err
 * then filled).  Caller frees. */
static char *expand(struct fixture *f, const char *hp, const char *in, struct template_error *e,
                    char **completed)
{
	json_t *h = hp ? J(hp) : NULL, *v = in ? J(in) : NULL, *cmd, *done;
	char *out;

	if (template_expand(&f->def, h, v, "/home/alice", &cmd, &done, e) < 0) {
		json_decref(h);
		json_decref(v);
		if (completed)
			*completed = NULL;
		return strdup("");
	}
	out = json_dumps(cmd, JSON_COMPACT);
	if (completed)
		*completed = template_dump_flat(done);
	json_decref(cmd);
	json_decref(done);
	json_decref(h);
	json_decref(v);
	return out;
}

TEST(expands_defaults_in_schema_order)
{
	struct fixture f;
	struct template_error e;
	char *done, *cmd;

	fx_init(&f, "[\"python3\", \"{script}\", \"{hyperparameters}\"]", PYTORCH_SCHEMA,
	        "[{\"name\": \"script\", \"default\": \"~/train.py\", \"required\": true}]");
	CHECK(template_check(&f.def, &e) == 0);
	cmd = expand(&f, NULL, NULL, &e, &done);
	CHECK_STR(cmd, "[\"python3\",\"/home/alice/train.py\",\"--lr\",\"0.01\",\"--epochs\","
	               "\"3\",\"--batch-size\",\"32\",\"--optimizer\",\"adam\",\"--tag\",\"a b\"]");
	CHECK_STR(done, "{\"lr\":0.01,\"epochs\":3,\"batch-size\":32,\"optimizer\":\"adam\","
	                "\"tag\":\"a b\",\"verbose\":false}");
	free(cmd);
	free(done);
	fx_release(&f);
}

TEST(user_values_bool_flag_and_exact_reals)
{
	struct fixture f;
	struct template_error e;
	char *done, *cmd;

	fx_init(&f, "[\"python3\", \"{script}\", \"{hyperparameters}\"]", PYTORCH_SCHEMA,
	        "[{\"name\": \"script\", \"default\": \"~/train.py\"}]");
	cmd = expand(&f,
	             "{\"lr\": 0.1, \"epochs\": 5, \"verbose\": true, \"optimizer\": \"sgd\","
	             " \"batch-size\": 8}",
	             "{\"script\": \"run/t.py\"}", &e, &done);
	CHECK_STR(cmd, "[\"python3\",\"run/t.py\",\"--lr\",\"0.1\",\"--epochs\",\"5\","
	               "\"--batch-size\",\"8\",\"--optimizer\",\"sgd\",\"--tag\",\"a b\","
	               "\"--verbose\"]");
	CHECK_STR(done, "{\"lr\":0.1,\"epochs\":5,\"batch-size\":8,\"optimizer\":\"sgd\","
	                "\"tag\":\"a b\",\"verbose\":true}");
	free(cmd);
	free(done);
	/* an integer given for a float is that float */
	cmd = expand(&f, "{\"lr\": 1}", NULL, &e, &done);
	CHECK(strstr(cmd, "\"--lr\",\"1\"") != NULL);
	CHECK(strstr(done, "\"lr\":1") != NULL);
	free(cmd);
	free(done);
	fx_release(&f);
}

TEST(single_values_inputs_and_braces)
{
	struct fixture f;
	struct template_error e;
	char *cmd;

	fx_init(&f,
	        "[\"sh\", \"-c\", \"echo {{lr}}={hp.lr} e={hp.epochs} v={hp.verbose} {script}\"]",
	        PYTORCH_SCHEMA, "[{\"name\": \"script\", \"default\": \"x\"}]");
	CHECK(template_check(&f.def, &e) == 0);
	cmd = expand(&f, "{\"lr\": 0.003}", "{\"script\": \"~/a.sh\"}", &e, NULL);
	CHECK_STR(cmd, "[\"sh\",\"-c\",\"echo {lr}=0.003 e=3 v=false /home/alice/a.sh\"]");
	free(cmd);
	fx_release(&f);
}

static void expect_error(const char *hp, const char *in, const char *field, const char *reason,
                         const char *words)
{
	struct fixture f;
	struct template_error e;
	char *cmd;

	fx_init(&f, "[\"python3\", \"{script}\", \"{hyperparameters}\"]",
	        "[{\"name\": \"lr\", \"type\": \"float\", \"min\": 0.0001, \"max\": 1},"
	        " {\"name\": \"epochs\", \"type\": \"int\", \"default\": 3, \"min\": 1},"
	        " {\"name\": \"opt\", \"type\": \"choice\", \"default\": \"adam\","
	        "  \"choices\": [\"adam\", \"sgd\"]},"
	        " {\"name\": \"bs\", \"type\": \"choice\", \"default\": 32, \"choices\": [16, 32]},"
	        " {\"name\": \"fast\", \"type\": \"bool\"}]",
	        "[{\"name\": \"script\", \"required\": true}]");
	cmd = expand(&f, hp, in, &e, NULL);
	CHECK_STR(cmd, "");
	CHECK_STR(e.field, field);
	CHECK_STR(e.reason, reason);
	if (!strstr(e.msg, words))
		fprintf(stderr, "message \"%s\" lacks \"%s\"\n", e.msg, words);
	CHECK(strstr(e.msg, words) != NULL);
	free(cmd);
	fx_release(&f);
}

TEST(user_errors_name_the_field)
{
	const char *in = "{\"script\": \"t.py\"}";

	expect_error("{\"lr\": 5}", in, "hyperparameters.lr", "max",
	             "hyperparameter 'lr' must be at most 1");
	expect_error("{\"lr\": 0}", in, "hyperparameters.lr", "min", "at least 0.0001");
	expect_error("{\"lr\": \"0.1\"}", in, "hyperparameters.lr", "type", "must be a number");
	expect_error("{\"lr\": 0.1, \"epochs\": 2.5}", in, "hyperparameters.epochs", "type",
	             "must be an integer");
	expect_error("{\"lr\": 0.1, \"opt\": \"rmsprop\"}", in, "hyperparameters.opt", "choice",
	             "one of: adam, sgd");
	expect_error("{\"lr\": 0.1, \"bs\": 64}", in, "hyperparameters.bs", "choice",
	             "one of: 16, 32");
	expect_error("{\"lr\": 0.1, \"fast\": 1}", in, "hyperparameters.fast", "type",
	             "true or false");
	expect_error("{\"lr\": 0.1, \"momentum\": 0.9}", in, "hyperparameters.momentum", "unknown",
	             "unknown hyperparameter 'momentum' (this template has: lr, epochs, opt, bs,");
	expect_error("{}", in, "hyperparameters.lr", "required", "'lr' has no default");
	expect_error("{\"lr\": 0.1}", NULL, "inputs.script", "required", "input 'script'");
	expect_error("{\"lr\": 0.1}", "{\"data\": \"x\"}", "inputs.data", "unknown",
	             "unknown input 'data'");
	expect_error("{\"lr\": 0.1}", "{\"script\": 3}", "inputs.script", "type", "a string");
}

TEST(choice_numbers_are_numbers)
{
	struct fixture f;
	struct template_error e;
	char *cmd, *done;

	fx_init(&f, "[\"t\", \"{hyperparameters}\"]",
	        "[{\"name\": \"bs\", \"type\": \"choice\", \"default\": 32, \"choices\": [16, "
	        "32]}]",
	        NULL);
	cmd = expand(&f, "{\"bs\": 16}", NULL, &e, &done);
	CHECK_STR(cmd, "[\"t\",\"--bs\",\"16\"]");
	CHECK_STR(done, "{\"bs\":16}");
	free(cmd);
	free(done);
	fx_release(&f);
}

static void expect_bad_template(const char *pattern, const char *schema, const char *inputs,
                                const char *field, const char *words)
{
	struct fixture f;
	struct template_error e;

	fx_init(&f, pattern, schema, inputs);
	CHECK(template_check(&f.def, &e) < 0);
	CHECK_STR(e.field, field);
	if (!strstr(e.msg, words))
		fprintf(stderr, "message \"%s\" lacks \"%s\"\n", e.msg, words);
	CHECK(strstr(e.msg, words) != NULL);
	fx_release(&f);
}

TEST(bad_templates_are_refused)
{
	const char *p = "[\"python3\", \"{hyperparameters}\"]";

	expect_bad_template(p, "[{\"name\": \"lr\", \"type\": \"double\"}]", NULL,
	                    "hyperparameters[0].type", "int, float, string, bool or choice");
	expect_bad_template(p, "[{\"name\": \"1lr\", \"type\": \"int\"}]", NULL,
	                    "hyperparameters[0].name", "starting with a letter");
	expect_bad_template(p,
	                    "[{\"name\": \"a\", \"type\": \"int\"}, {\"name\": \"a\", \"type\": "
	                    "\"int\"}]",
	                    NULL, "hyperparameters[1].name", "defined twice");
	expect_bad_template(p, "[{\"name\": \"a\", \"type\": \"int\", \"min\": 5, \"max\": 1}]",
	                    NULL, "hyperparameters[0].max", "below its min");
	expect_bad_template(p, "[{\"name\": \"a\", \"type\": \"int\", \"min\": 0.5}]", NULL,
	                    "hyperparameters[0].min", "an integer");
	expect_bad_template(p, "[{\"name\": \"a\", \"type\": \"string\", \"max\": 3}]", NULL,
	                    "hyperparameters[0].max", "only int and float");
	expect_bad_template(p, "[{\"name\": \"a\", \"type\": \"choice\"}]", NULL,
	                    "hyperparameters[0].choices", "list 1 to 64 choices");
	expect_bad_template(p, "[{\"name\": \"a\", \"type\": \"int\", \"default\": 9, \"max\": 3}]",
	                    NULL, "hyperparameters[0].default",
	                    "the default of 'a' must be at most 3");
	expect_bad_template(p, "[{\"name\": \"a\", \"type\": \"int\", \"step\": 1}]", NULL,
	                    "hyperparameters[0]", "unknown field 'step'");
	expect_bad_template("[\"python3\", \"x{hyperparameters}\"]", "[]", NULL, "command[1]",
	                    "whole element");
	expect_bad_template("[\"{hyperparameters}\"]", "[]", NULL, "command[0]",
	                    "name the program");
	expect_bad_template("[\"python3\", \"{hp.lr}\"]", "[]", NULL, "command[1]",
	                    "no hyperparameter is named 'lr'");
	expect_bad_template("[\"python3\", \"{data}\"]", "[]", NULL, "command[1]", "not an input");
	expect_bad_template("[\"python3\", \"{script\"]", "[]", "[{\"name\": \"script\"}]",
	                    "command[1]", "without its '}'");
	expect_bad_template("[\"python3\", \"a}b\"]", "[]", NULL, "command[1]", "without its '{'");
	expect_bad_template("[]", "[]", NULL, "command", "1 to 256");
	expect_bad_template(p, "{}", NULL, "hyperparameters", "must be an array");
	expect_bad_template(p, "[]", "[{\"name\": \"Script\"}]", "inputs[0].name", "lower-case");
}

TEST(shortest_reals)
{
	char b[40];

	template_format_real(0.1, b, sizeof(b));
	CHECK_STR(b, "0.1");
	template_format_real(0.1 + 0.2, b, sizeof(b));
	CHECK_STR(b, "0.30000000000000004");
	template_format_real(1e-6, b, sizeof(b));
	CHECK_STR(b, "1e-06");
	template_format_real(3.0, b, sizeof(b));
	CHECK_STR(b, "3");
}

TEST(env_per_hyperparameter)
{
	json_t *hp = J("{\"lr\": 0.1, \"batch-size\": 32, \"verbose\": true, \"opt\": \"sgd\"}"),
	       *env = json_object();

	template_env(hp, env);
	CHECK_STR(json_string_value(json_object_get(env, "GPUCLOUD_HP_LR")), "0.1");
	CHECK_STR(json_string_value(json_object_get(env, "GPUCLOUD_HP_BATCH_SIZE")), "32");
	CHECK_STR(json_string_value(json_object_get(env, "GPUCLOUD_HP_VERBOSE")), "true");
	CHECK_STR(json_string_value(json_object_get(env, "GPUCLOUD_HP_OPT")), "sgd");
	CHECK(json_object_size(env) == 4);
	json_decref(hp);
	json_decref(env);
}

int main(void)
{
	RUN(expands_defaults_in_schema_order);
	RUN(user_values_bool_flag_and_exact_reals);
	RUN(single_values_inputs_and_braces);
	RUN(user_errors_name_the_field);
	RUN(choice_numbers_are_numbers);
	RUN(bad_templates_are_refused);
	RUN(shortest_reals);
	RUN(env_per_hyperparameter);
	return harness_done("test_template");
}
