/* images.h — the image catalog's engine side: making sure an image is on a
 * node (pulling it with the registry's credentials when it is not), with
 * per-node pull state and progress kept in the image_nodes table.
 *
 * Instances and jobs call images_ensure() before creating a container; the
 * API's "pull to nodes" uses the same path.  Credentials are opened from
 * their sealed form only to build X-Registry-Auth and never leave this
 * module otherwise.
 */
#ifndef GPUCLOUD_IMAGES_H
#define GPUCLOUD_IMAGES_H

#include <stddef.h>
#include <stdint.h>
#include "base/rc.h"

/* Completion of images_ensure(): rc RC_OK when the image is present on the
 * node; otherwise err is a message a user can act on (the registry's own
 * message for pull failures, e.g. "unauthorized: authentication
 * required").  Fires exactly once, on the loop, never from inside
 * images_ensure(). */
typedef void (*images_ready_cb)(enum rc rc, const char *err, void *arg);

struct event_base;
/* Starts the sweep of stale pulls on base (at once, then every 30 s): rows
 * of image_nodes left 'pulling' by a gpucloudd that died mid-pull (no
 * progress written for 2 minutes) become 'failed' with "pull interrupted
 * (gpucloudd restarted)".  The pulls of this process are kept fresh by the
 * same sweep, so replicas never fail each other's.  Returns 0 or -1. */
int images_init(struct event_base *base);
void images_shutdown(void);

/* Makes sure catalog image image_id is on node node_id: present already
 * (GET /images/{ref}/json) → done; else pulls it (POST /images/create with
 * X-Registry-Auth), updating image_nodes as progress arrives.  Concurrent
 * calls for the same image and node share one pull.  Returns 0 (cb will
 * fire) or -1 (cb will not fire: out of memory). */
int images_ensure(long long image_id, long long node_id, images_ready_cb cb, void *arg);

/* Pushes catalog image image_id (already tagged with its reference on
 * node node_id, e.g. by a commit) to its registry with that registry's
 * credentials.  cb as for images_ensure(); the registry's message on
 * failure.  Returns 0 (cb will fire) or -1. */
int images_push(long long image_id, long long node_id, images_ready_cb cb, void *arg);

/* Tests whether the credentials of registry registry_id are accepted by
 * the registry, asking node node_id's engine (POST /auth: the engine checks
 * them against the registry and stores nothing).  cb gets RC_OK and the
 * registry's status ("Login Succeeded"), or an error and the registry's
 * message.  Returns 0 (cb will fire) or -1. */
int images_registry_test(long long registry_id, long long node_id, images_ready_cb cb, void *arg);

/* The AAD a registry's sealed secret is bound to
 * ("registry-secret:<name>@<server>"): a secret opens only for the registry
 * and the server it was entered for, so pointing a registry at another host
 * can never send the key there (the API asks for the password again). */
void images_secret_aad(const char *registry_name, const char *server, char *out, size_t outlen);

/* No shutdown call: at exit docker_shutdown() ends the engine calls and
 * db_shutdown() the statements, and each pull then completes (its callbacks
 * fire with the failure) and frees itself. */

/* ---- pure parts, for the API, unit tests and the fuzz target ---- */

#define IMAGES_MAX_LAYERS 256
#define IMAGES_LINE_MAX   (64 * 1024)

struct images_layer {
	char id[72];
	int64_t dl_cur, dl_total; /* downloading (or pushing) bytes */
	int64_t ex_cur, ex_total; /* extracting bytes */
	int downloaded;           /* "Download complete" / "Verifying Checksum" seen */
	int done;                 /* "Pull complete", "Already exists", "Pushed" ... */
};

/* What the engine's JSON-lines progress stream of a pull or push said so
 * far.  Zero it before the first feed. */
struct images_progress {
	struct images_layer layers[IMAGES_MAX_LAYERS];
	int nlayers;
	int failed;      /* an {"error": ...} line arrived */
	char error[512]; /* its message (the registry's words) */
	long lines;      /* lines seen */
};

/* Feeds buf[0..len): consumes every complete line ('\n'-terminated) and
 * returns the bytes consumed (the caller keeps the rest for the next call),
 * or -1 when an unterminated line passes IMAGES_LINE_MAX.  Lines that are
 * not JSON objects are skipped.  No I/O. */
long images_progress_feed(struct images_progress *p, const char *buf, size_t len);

/* Overall progress in percent (0..100; 100 only when every layer seen is
 * done). */
int images_progress_percent(const struct images_progress *p);

/* "12.6", "12.6.0", "v12.4" -> 12060 / 12040 (major*1000 + minor*10);
 * -1 when s is not a CUDA version. */
int images_cuda_parse(const char *s);
/* 12060 -> "12.6" into out. */
void images_cuda_format(int v, char *out, size_t outlen);

/* 1 when ref looks like an image reference ([host[:port]/]path[:tag]
 * [@digest], lower-case path, at most 255 bytes), else 0. */
int images_ref_valid(const char *ref);

/* Splits ref into repository and tag (or digest; "latest" when none).
 * Returns 0, or -1 when a part does not fit. */
int images_ref_split(const char *ref, char *repo, size_t repolen, char *tag, size_t taglen);

#endif
