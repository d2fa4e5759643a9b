/* storage.h — the data root: per-user homes, the shared area, class areas,
 * and what containers mount of them.
 *
 * The one place that decides where a user's files live on disk and how
 * they are mounted into containers (instances and jobs call
 * storage_binds(); nothing else builds bind mounts).
 */
#ifndef GPUCLOUD_STORAGE_H
#define GPUCLOUD_STORAGE_H

#include <stddef.h>
#include <jansson.h>

/* The data root (cfg.data_root, or state_dir/data when that is empty). */
const char *storage_root(void);

/* The uid (and gid) containers of user user_id run as, and that owns the
 * user's files. */
long long storage_uid(long long user_id);

/* Appends to binds (a JSON array of Docker HostConfig.Binds strings) the
 * user's mounts: home read-write at /home/<username>, the shared area
 * read-only at /shared.  Creates the home (owned by storage_uid) when it is
 * missing — a few mkdir/chown calls, cheap enough for the loop.
 * Returns 0, or -1 with a message a user can act on in err. */
int storage_binds(long long user_id, const char *username, json_t *binds, char *err,
                  size_t errlen);

#endif
