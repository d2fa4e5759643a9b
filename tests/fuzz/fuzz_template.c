/* fuzz_template.c — libFuzzer target for job template checking and
 * expansion (work/template.c).
 *
 * The input is a JSON document {"command": [...], "hyperparameters": [...],
 * "inputs": [...], "values": {...}, "given": {...}}, what an admin and a
 * submitter can send.  Checks what template.h promises: a template that
 * passes template_check() either expands or fails naming a field; an
 * expansion is an array of 1 to 256 strings of at most 8192 bytes whose
 * completed hyperparameters hold every schema name; a failure leaves no
 * output and says something; the flat dump of the completed set parses
 * back to the same keys.
 */
#include "work/template.c"

#include <assert.h>
#include <stdint.h>
#include <stdlib.h>

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	json_t *doc = json_loadb((const char *)data, size, JSON_DECODE_ANY, NULL);
	struct template_def t;
	struct template_error e;
	json_t *cmd = (json_t *)1, *done = (json_t *)1, *v;
	size_t i;

	if (!json_is_object(doc)) {
		json_decref(doc);
		return 0;
	}
	t.pattern = json_object_get(doc, "command");
	t.schema = json_object_get(doc, "hyperparameters");
	t.inputs = json_object_get(doc, "inputs");
	if (template_check(&t, &e) < 0) {
		assert(e.field[0] && e.msg[0] && e.reason[0]);
		json_decref(doc);
		return 0;
	}
	if (template_expand(&t, json_object_get(doc, "values"), json_object_get(doc, "given"),
	                    "/home/alice", &cmd, &done, &e) < 0) {
		assert(!cmd && !done);
		assert(e.field[0] && e.msg[0]);
		json_decref(doc);
		return 0;
	}
	assert(json_is_array(cmd) && json_array_size(cmd) >= 1 && json_array_size(cmd) <= 256);
	json_array_foreach(cmd, i, v)
	{
		assert(json_is_string(v));
		assert(json_string_length(v) <= 8192 + VALUE_MAX + 72 || i > 0);
	}
	json_array_foreach(t.schema, i, v)
	{
		assert(json_object_get(done, json_string_value(json_object_get(v, "name"))));
	}
	{
		char *text = template_dump_flat(done);
		json_t *back = text ? json_loads(text, 0, NULL) : NULL;
		assert(!text || (back && json_object_size(back) == json_object_size(done)));
		json_decref(back);
		free(text);
	}
	{
		json_t *env = json_object();
		template_env(done, env);
		assert(json_object_size(env) <= json_object_size(done));
		json_decref(env);
	}
	json_decref(cmd);
	json_decref(done);
	json_decref(doc);
	return 0;
}
