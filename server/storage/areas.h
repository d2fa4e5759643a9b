/* areas.h — storage areas as callers see them, on the loop: which area a
 * name means for a caller and with what access, an area's usage and limits
 * as JSON, and /me's storage columns for the caller lookup.
 *
 * Knows nothing of sessions or roles: the API hands in who is asking as a
 * struct areas_caller.
 */
#ifndef GPUCLOUD_AREAS_H
#define GPUCLOUD_AREAS_H

#include <stdint.h>
#include <jansson.h>

#include "base/rc.h"
#include "db/db.h"
#include "storage/storage.h"

struct pg_result;

/* Who asks for an area. */
struct areas_caller {
	int64_t user_id;
	const char *username;
	int is_admin;
};

/* Resolves an area name for a caller: "home" (their own), "home:<username>"
 * or "home:<user id>" (admins; the caller's own id too), "shared" (everyone
 * reads, admins write), "class:<id>" (its teacher and admins write,
 * members read), "job:<id>" (the job's folder in its owner's home: the
 * owner and admins read, nobody writes here; others get RC_NOTFOUND).
 * cb(arg, area, RC_OK, NULL) when the caller may (write
 * access when want_write), else cb(arg, NULL, rc, message).  cb may run
 * before areas_resolve returns.  caller is read before it returns (it may
 * live on the caller's stack). */
typedef void (*areas_cb)(void *arg, const struct storage_area *a, enum rc rc, const char *msg);
void areas_resolve(const struct areas_caller *caller, const char *name, int want_write, areas_cb cb,
                   void *arg);

/* An area's usage and limits from res's row i, columns c.. (bytes, files,
 * reserved, bytes_soft, bytes_hard, files_soft, files_hard, scanned_at):
 * {bytes, files, reserved, *_soft, *_hard, over_soft, over_hard,
 * scanned_at}.  A new reference. */
json_t *areas_usage_json(const struct pg_result *res, int i, int c);

/* /me's "storage" object (the caller's home area), read with /me's caller
 * extension (auth.h): AREAS_ME_JOIN goes into its FROM after the users
 * table (alias u), and AREAS_ME_COLS (AREAS_ME_NCOLS
 * columns) into its select list.  The block reason is only computed when
 * the home is over a hard limit.  (The LIMIT keeps the planner's row
 * estimate at one: a plain join to the never-analysed one-row
 * storage_defaults is costed at ~900 rows, which pushed the generic plan
 * past jit_above_cost and JIT-compiled every /me.) */
#define AREAS_ME_JOIN                                                    \
	" LEFT JOIN storage_areas me_sa ON me_sa.area = 'home:' || u.id" \
	" LEFT JOIN LATERAL (SELECT * FROM storage_defaults LIMIT 1) me_sd ON true"
#define AREAS_ME_COLS                                                                        \
	", me_sd.one IS NOT NULL, me_sa.area IS NOT NULL, COALESCE(me_sa.bytes, 0),"         \
	" COALESCE(me_sa.files, 0), COALESCE(me_sa.reserved, 0),"                            \
	" COALESCE(me_sa.bytes_soft, me_sd.user_bytes_soft),"                                \
	" COALESCE(me_sa.bytes_hard, me_sd.user_bytes_hard),"                                \
	" COALESCE(me_sa.files_soft, me_sd.user_files_soft),"                                \
	" COALESCE(me_sa.files_hard, me_sd.user_files_hard),"                                \
	" " DB_TS("me_sa.scanned_at") ","                                                    \
	                              " CASE WHEN me_sa.bytes > COALESCE(me_sa.bytes_hard, " \
	                              "me_sd.user_bytes_hard)"                               \
	                              "  OR me_sa.files > COALESCE(me_sa.files_hard, "       \
	                              "me_sd.user_files_hard)"                               \
	                              "  THEN gc_storage_block_reason(u.id) END"
#define AREAS_ME_NCOLS 11

/* The "storage" object from the AREAS_ME_COLS of res's row 0 starting at
 * column col (a new reference; JSON null when there are no defaults).
 * *missing is set when the home area has no row yet. */
json_t *areas_me_storage(const struct pg_result *res, int col, int *missing);

/* Creates the home area row of user_id (fire and forget), so a home first
 * seen by /me gets scanned and limited without waiting for the scanner's
 * periodic pass. */
void areas_home_create(int64_t user_id);

#endif
