/* fuzz_account_import.c — libFuzzer target for the CSV import of accounts
 * (account_import.c's ai_parse), run with both specs that use it: POST
 * /users/import's and a class roster's.  The whole file, every line, the
 * resynchronisation after a malformed line, the line numbers of records
 * that span lines.
 *
 * Checks what the import promises: it ends; every problem names a line of
 * the file; rows come in file order, each with every field; a file
 * reported clean has at least one row and no row marked bad; a row not
 * marked bad passes the field checks (the spec's own too).
 */
#include "api/account_import.h"

#include <assert.h>
#include <stdint.h>
#include <stdlib.h>

#include "api/api.h"

static void one(const struct ai_spec *spec, const uint8_t *data, size_t size)
{
	struct ai_import im = { 0 };
	size_t lines = 1, n;
	int rc, last = 0;

	if (ai_init(&im, NULL, spec) < 0) {
		ai_release(&im);
		return;
	}
	for (size_t i = 0; i < size; i++)
		if (data[i] == '\n')
			lines++;
	rc = ai_parse(&im, (const char *)data, size);
	n = json_array_size(im.errors);
	assert((rc == 0) == (n == 0));
	for (size_t i = 0; i < n; i++) {
		json_t *e = json_array_get(im.errors, i);
		json_int_t line = json_integer_value(json_object_get(e, "line"));
		const char *msg = json_string_value(json_object_get(e, "message"));
		assert(line >= 1 && (size_t)line <= lines);
		assert(msg && *msg);
	}
	assert(im.n >= 0 && im.n <= AI_MAX_ROWS);
	if (rc == 0)
		assert(im.n > 0);
	for (int i = 0; i < im.n; i++) {
		struct ai_row *row = &im.rows[i];
		assert(row->line > last && (size_t)row->line <= lines);
		last = row->line;
		for (int k = 0; k < AI__N; k++)
			assert(row->v[k]);
		if (rc == 0)
			assert(!row->bad);
		if (!row->bad) {
			assert(!api_users_check_username(row->v[AI_USERNAME]));
			assert(!spec->check(row));
		}
	}
	ai_release(&im);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	one(&api_users_import_spec, data, size);
	one(&api_classes_import_spec, data, size);
	return 0;
}
