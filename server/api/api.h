/* api.h — helpers shared by the api_<resource>.c handlers: strict JSON body
 * decoding, the read side of a resource (lists, cursor pages, one-row
 * replies with their 404), user JSON from database rows, pagination cursors,
 * and the registration of every resource's route table.
 */
#ifndef GPUCLOUD_API_H
#define GPUCLOUD_API_H

#include <libpq-fe.h>
#include <jansson.h>
#include "net/http.h"
#include "db/db.h"
#include "storage/areas.h"

enum jtype { J_STRING, J_INT, J_BOOL, J_STRINGS, J_OBJECT, J_ARRAY, J_NUMBER };

struct jfield {
	const char *name; /* NULL ends a spec */
	enum jtype type;
	int required;
	size_t max_len; /* strings: bytes; arrays: elements; 0 = no limit */
};

/* Decodes r->body as a JSON object that has only the fields of spec with
 * the right types (an empty body is {}).  On success returns a new
 * reference.  On failure replies 400/415 with the JSON error shape and
 * returns NULL (the request is then finished). */
json_t *api_json_body(struct http_req *r, const struct jfield *spec);

/* Pure part of the above, for tests and the fuzz target: decodes buf and
 * checks it.  Returns the object or NULL with a message in err. */
json_t *api_json_decode(const char *buf, size_t len, const struct jfield *spec, char *err,
                        size_t errlen);

/* http_reply_db_error() (net/http.h), under the name api/ uses. */
void api_reply_db_error(struct http_req *r, enum rc rc, const char *what);

/* Replies for a failed registry call (registry.h): err is registry.c's
 * message; 404 for a repository the registry does not know, 409 when the
 * credentials are missing or refused, 503 when it cannot be reached or
 * answers nonsense, 400 for the rest of RC_INVALID. */
void api_reply_registry_error(struct http_req *r, enum rc rc, const char *err);

/* The tags of repository prefix ("127.0.0.1:5055/nvidia/pytorch") in tags
 * (a JSON array of strings, borrowed), as [{"tag", "reference",
 * "in_catalog"}] newest first (registry_tag_cmp); only those
 * registry_tag_newer() than after when after is not NULL.  catalog: a JSON
 * array of the references in the catalog (borrowed).  Caller frees. */
json_t *api_tag_items(const char *prefix, json_t *tags, const char *after, json_t *catalog);

/* Allocates size zeroed bytes as r's handler state, freed with the request
 * by free_fn (free() when NULL).  On failure replies 500 and returns NULL. */
void *api_state(struct http_req *r, size_t size, void (*free_fn)(void *));

/* http_query() that replies 400 itself for a malformed value (and returns
 * -2: the request is then finished); -1 when absent. */
long api_query(struct http_req *r, const char *name, char *out, size_t outlen);

/* Reads ?limit= (default def, capped at max) and ?cursor= (an id; 0 when
 * absent).  Replies 400 and returns -1 on malformed values. */
int api_page(struct http_req *r, int def, int max, int *limit, long long *cursor);

/* http_param_id() (net/http.h), under the name api/ uses. */
int api_id(struct http_req *r, const char *name, long long *id);

/* ---- the read side of a resource ----
 * A resource says how one of its rows becomes JSON and what a missing one is
 * called; these run its SQL and make the reply.  The SQL and its parameters
 * stay with the resource (its visibility rules are its own). */
struct api_resource {
	const char *noun;                           /* "node": a 404 says "no such node" */
	json_t *(*row)(const PGresult *res, int i); /* row i as JSON; new reference */
	int quote_id; /* the 404 also quotes the route's {id}: "no such user '7'" */
};

/* Runs sql with a (NULL: no parameters) and replies 200 {"items": [every
 * row]}.  A database error replies as api_reply_db_error() does. */
void api_list(struct http_req *r, const struct api_resource *rs, const char *sql,
              const struct db_args *a);

/* One page of a list ordered by id (either way): sql must return at most
 * limit + 1 rows with the id in column 0 (bind limit + 1 as its LIMIT, and
 * the cursor from api_page() as where the ids continue).  Replies 200
 * {"items": [the first limit rows], "next_cursor": the id of the last row
 * shown, as a string, or null at the end}. */
void api_list_page(struct http_req *r, const struct api_resource *rs, int limit, const char *sql,
                   const struct db_args *a);

/* Runs sql, which selects at most one row, and replies status with that
 * row; no row replies 404 "no such <noun>". */
void api_one(struct http_req *r, const struct api_resource *rs, int status, const char *sql,
             const struct db_args *a);

/* GET /<resource>/{id}: runs sql with the route's {id} as $1 and replies as
 * api_one() with 200; an {id} that is not a positive integer is a 404. */
void api_get(struct http_req *r, const struct api_resource *rs, const char *sql);

/* For the completion of a change that returns its row: 0 when res holds
 * exactly one row; else replies (api_reply_db_error() with what, or 404
 * "no such <noun>") and returns -1, the request then being finished.
 * Errors that mean something particular to the resource are checked first. */
int api_one_row(struct http_req *r, const PGresult *res, enum rc rc, const char *noun,
                const char *what);

/* The columns of a user, in the order api_user_row() reads them. */
/* clang-format off */
#define API_USER_COLS(FIRST, COL)                   \
	FIRST(USER_ID, "id")                        \
	COL(USER_USERNAME, "username")              \
	COL(USER_DISPLAY_NAME, "display_name")      \
	COL(USER_EMAIL, "email")                    \
	COL(USER_ROLE, "role")                      \
	COL(USER_DISABLED, "disabled")              \
	COL(USER_CREATED_AT, DB_TS("created_at"))   \
	COL(USER_MUST_CHANGE, "must_change_password") \
	COL(USER_DELETED_AT, DB_TS("deleted_at"))
/* clang-format on */
enum api_user_col { DB_COLS_ENUM(API_USER_COLS) API_USER_NCOLS };
/* The SELECT list of API_USER_COLS. */
#define API_USER_SELECT DB_COLS_SQL(API_USER_COLS)

/* User JSON from the API_USER_COLS columns of row, starting at column col.
 * New reference. */
json_t *api_user_row(const PGresult *res, int row, int col);

/* Account field checks (api_users.c; the class roster import uses them too):
 * NULL when fine, else a message for the user. */
const char *api_users_check_username(const char *u);
const char *api_users_check_email(const char *e);
const char *api_users_check_display_name(const char *d);

/* Registers the route tables of every resource. */
void api_register_all(void);

/* Route tables, one per api_<resource>.c. */
int api_auth_register(void); /* its routes, and /me's caller extension */
extern const struct route api_users_routes[];
extern const struct route api_tokens_routes[];
extern const struct route api_health_routes[];
extern const struct route api_audit_routes[];
extern const struct route api_nodes_routes[];
extern const struct route api_pools_routes[];
extern const struct route api_allocations_routes[];
extern const struct route api_files_routes[];
extern const struct route api_uploads_routes[];
extern const struct route api_images_routes[];
extern const struct route api_registries_routes[];
extern const struct route api_routes_routes[];
extern const struct route api_terminal_routes[];
extern const struct route api_tensorboards_routes[];
extern const struct route api_instances_routes[];
extern const struct route api_jobs_routes[];
extern const struct route api_job_metrics_routes[];
extern const struct route api_sweeps_routes[];
extern const struct route api_settings_routes[];
extern const struct route api_job_templates_routes[];
extern const struct route api_classes_routes[];
extern const struct route api_class_sessions_routes[];
/* The periodic pre-pull of class images before lab sessions (leader only). */
void api_class_sessions_init(void);
extern const struct route api_assignments_routes[];
extern const struct route api_class_ops_routes[];
extern const struct route api_usage_routes[];
extern const struct route api_notifications_routes[];
/* The mailer of notifications (work/mailer.c; it mails on the leader). */
void api_notifications_init(void);
/* The leader's periodic collects at deadlines and releases to new members
 * (api_assignments.c). */
void api_assignments_init(void);

/* ---- job templates (api_job_templates.c, api_jobs.c, job_body.c) ---- */

/* One job template as a JSON document (text), from job_templates t LEFT
 * JOIN images tim ON tim.id = t.image_id. */
#define API_JOB_TEMPLATE_TS \
	"'created_at', " DB_TS("t.created_at") ", 'updated_at', " DB_TS("t.updated_at")
#define API_JOB_TEMPLATE_JSON                                                                 \
	"json_build_object('id', t.id, 'name', t.name, 'title', t.title, 'description',"      \
	" t.description, 'kind', t.kind, 'image_id', t.image_id, 'image', tim.reference,"     \
	" 'image_name', tim.display_name, 'command', to_json(t.command), 'inputs', t.inputs," \
	" 'hyperparameters', t.hyperparameters, 'pool', t.pool, 'slices', t.slices,"          \
	" 'cpu_millis', t.cpu_millis, 'mem_mib', t.mem_mib, 'shm_mib', t.shm_mib,"            \
	" 'max_runtime_s', t.max_runtime_s, 'members', t.members, 'allow_overrides',"         \
	" t.allow_overrides, 'enabled', t.enabled, " API_JOB_TEMPLATE_TS ")::text"
#define API_JOB_TEMPLATE_FROM " FROM job_templates t LEFT JOIN images tim ON tim.id = t.image_id"

/* Records this replica's configured values of the site settings (the
 * admin's, when set, still win).  Synchronous, at start-up; 0 or -1. */
int api_settings_seed(const char *db_url);

/* Seeds the first admin when no admin exists (blocking, start-up only).
 * Returns 0 or -1. */
int api_users_seed_admin(const char *db_url);

/* storage/areas.c's areas_resolve() for the request's caller. */
struct auth_info;
void api_area_resolve(const struct auth_info *auth, const char *name, int want_write, areas_cb cb,
                      void *arg);

/* One byte range header ("bytes=a-b", "bytes=a-", "bytes=-n") against a
 * resource of size bytes.  Returns 1 with [*from, *from + *len) set, 0 when
 * absent or not usable (serve it all), -1 when unsatisfiable (416). */
int api_byte_range(const char *h, int64_t size, int64_t *from, int64_t *len);

/* SQL: the latest sampled utilisation (percent, gpu_samples) of the GPU
 * row aliased g, from the last 5 minutes; NULL for a declared GPU and
 * without a recent sample ("not measurable", never 0). */
#define GPU_UTIL_NOW                                                                          \
	"(SELECT round(x.util_pct) FROM gpu_samples x WHERE NOT g.simulated"                  \
	" AND x.gpu_uuid = g.uuid AND x.at > now() - interval '5 minutes' ORDER BY x.at DESC" \
	" LIMIT 1)"

#endif
