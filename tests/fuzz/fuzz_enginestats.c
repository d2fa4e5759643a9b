/* fuzz_enginestats.c — libFuzzer target for what the instance modules read
 * from engines: a stats document (CPU use for idle reclamation and the
 * usage API) and a container listing's Status (exit codes for
 * reconciliation).  The input is JSON; when it is an object with a string
 * "Status", that string goes to the exit code parser too, else the whole
 * input does (NUL-terminated).  Checked: CPU use is -1 or a finite number
 * not below 0, and an exit code is -1 or read back from the text.
 */
#include <assert.h>
#include <math.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <jansson.h>

#include "work/reclaim.h"
#include "work/reconcile.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	json_t *j = json_loadb((const char *)data, size, JSON_DECODE_ANY, NULL);
	double pct = reclaim_cpu_percent(j);
	const char *status = json_string_value(json_object_get(j, "Status"));
	char *text = malloc(size + 1);
	int code;

	assert(pct == -1 || (isfinite(pct) && pct >= 0));
	if (!text) {
		json_decref(j);
		return 0;
	}
	memcpy(text, data, size);
	text[size] = '\0';
	code = reconcile_exit_code(status ? status : text);
	if (code != -1) {
		int again;
		assert(sscanf(status ? status : text, "Exited (%d)", &again) == 1 && again == code);
	}
	free(text);
	json_decref(j);
	return 0;
}
