/* fuzz_jobfile.c — libFuzzer target for `gpucloud submit -f`: any bytes as
 * a job file (YAML or JSON) through jobfile_parse and jobfile_request, the
 * conversion into the body of POST /jobs or POST /sweeps.
 *
 * Checks what the reader promises: it ends; a refusal says why; what it
 * accepts is an object; the request it makes is an object that dumps as
 * JSON and loads back equal (so what is sent is what was meant); a sweep
 * has its run in "job"; amounts became the API's whole numbers.
 */
#include "cli/jobfile.c"

#include <assert.h>
#include <stdint.h>

static void check_job(json_t *job)
{
	static const char *const ints[] = { "slices", "cpu_millis", "mem_mib", "shm_mib",
		                            "max_runtime_s", "image_id" };

	assert(json_is_object(job));
	for (size_t i = 0; i < sizeof(ints) / sizeof(ints[0]); i++) {
		json_t *v = json_object_get(job, ints[i]);
		assert(!v || json_is_integer(v));
	}
	if (json_object_get(job, "command"))
		assert(json_array_size(json_object_get(job, "command")) > 0);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	struct jobfile_err err;
	json_t *doc, *req, *back;
	char *text;
	int sweep = -1;

	doc = jobfile_parse((const char *)data, size, &err);
	if (!doc) {
		assert(err.msg[0]);
		return 0;
	}
	assert(json_is_object(doc));
	req = jobfile_request(doc, &sweep, &err);
	if (!req) {
		assert(err.msg[0]);
		json_decref(doc);
		return 0;
	}
	assert(sweep == 0 || sweep == 1);
	check_job(sweep ? json_object_get(req, "job") : req);
	text = json_dumps(req, JSON_COMPACT);
	assert(text);
	back = json_loads(text, 0, NULL);
	assert(back && json_equal(back, req));
	json_decref(back);
	free(text);
	json_decref(req);
	json_decref(doc);
	return 0;
}
