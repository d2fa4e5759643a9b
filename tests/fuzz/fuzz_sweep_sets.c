/* fuzz_sweep_sets.c — libFuzzer target for a sweep's hyperparameter sets
 * (api_sweeps.c's sweep_sets) and the runs made from them (run_body): any
 * JSON body, any grid or list.
 *
 * Checks what a sweep promises: it ends; a refusal says why (invalid or
 * too many); accepted sets number 1 to SWEEP_MAX_RUNS, each an object; a
 * grid's sets are its exact product in odometer order (set i takes value
 * (i / stride) % m of each key); a list's sets are the list; each run's
 * body is named <sweep>-<n> and has the set's values over the job's own.
 */
#include "api/api_sweeps.c"

#include <assert.h>
#include <stdint.h>

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	json_t *body = json_loadb((const char *)data, size, JSON_REJECT_DUPLICATES, NULL);
	struct sets_err e = { RC_OK, NULL, "" };
	json_t *sets, *grid, *job;
	size_t i, n;

	if (!json_is_object(body)) {
		json_decref(body);
		return 0;
	}
	sets = sweep_sets(body, &e);
	if (!sets) {
		assert(e.rc == RC_INVALID || e.rc == RC_TOO_MANY);
		assert(e.msg[0]);
		json_decref(body);
		return 0;
	}
	n = json_array_size(sets);
	assert(n >= 1 && n <= SWEEP_MAX_RUNS);
	grid = json_object_get(body, "grid");
	if (grid) {
		size_t prod = 1;
		const char *k;
		json_t *v;
		json_object_foreach(grid, k, v) prod *= json_array_size(v);
		assert(prod == n);
		for (i = 0; i < n; i++) {
			json_t *set = json_array_get(sets, i);
			size_t stride = n;
			assert(json_object_size(set) == json_object_size(grid));
			json_object_foreach(grid, k, v)
			{
				size_t m = json_array_size(v);
				stride /= m;
				assert(json_object_get(set, k) ==
				       json_array_get(v, (i / stride) % m));
			}
		}
	} else {
		assert(json_equal(sets, json_object_get(body, "list")));
	}
	job = json_is_object(json_object_get(body, "job")) ? json_object_get(body, "job") : NULL;
	if (!job)
		job = json_object();
	else
		json_incref(job);
	for (i = 0; i < n; i++) {
		struct template_error terr;
		json_t *set = json_array_get(sets, i),
		       *run = run_body(job, "s", i, set, NULL, "/home/u", &terr), *v;
		const char *k;
		char name[32];
		if (!run)
			continue;
		snprintf(name, sizeof(name), "s-%zu", i + 1);
		assert(strcmp(json_string_value(json_object_get(run, "name")), name) == 0);
		json_object_foreach(set, k, v)
		{
			assert(json_equal(
			        json_object_get(json_object_get(run, "hyperparameters"), k), v));
		}
		json_decref(run);
	}
	json_decref(job);
	json_decref(sets);
	json_decref(body);
	return 0;
}
