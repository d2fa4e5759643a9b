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

#include "rc.h"

/* Completion of images_ensure(): rc RC_OK when the image is present on the
 * node; otherwise err is a message a user can act on (the registry's own
 * message for pull failures, e.g. "unauthorized: authentication
 * required").  Fires exactly once, on the loop, never from inside
 * images_ensure(). */
typedef void (*images_ready_cb)(enum rc rc, const char *err, void *arg);

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

#endif
