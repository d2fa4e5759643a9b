/* storage.c — where users' files live and how containers mount them.
 *
 * Owns: the layout of the data root (home/<username>, shared/,
 * classes/<id>/), the uid mapping, and the bind mounts of containers.
 * Does not own: the file API (api_files.c) or quota accounting.
 */
#include "storage.h"

#include <errno.h>
#include <stdio.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "config.h"

static char root[1100];

const char *storage_root(void)
{
	if (cfg.data_root && *cfg.data_root)
		return cfg.data_root;
	snprintf(root, sizeof(root), "%s/data", cfg.state_dir);
	return root;
}

long long storage_uid(long long user_id)
{
	return (long long)cfg.uid_base + user_id;
}

static int ensure_dir(const char *path, mode_t mode, long long uid, char *err, size_t errlen)
{
	if (mkdir(path, mode) < 0 && errno != EEXIST) {
		snprintf(err, errlen, "cannot create '%s': %s", path, strerror(errno));
		return -1;
	}
	if (uid >= 0 && chown(path, (uid_t)uid, (gid_t)uid) < 0) {
		snprintf(err, errlen, "cannot give '%s' to uid %lld: %s", path, uid,
		         strerror(errno));
		return -1;
	}
	return 0;
}

int storage_binds(long long user_id, const char *username, json_t *binds, char *err,
                  size_t errlen)
{
	char home[1200], shared[1200], bind[2600];
	const char *r = storage_root();

	snprintf(home, sizeof(home), "%s/home", r);
	snprintf(shared, sizeof(shared), "%s/shared", r);
	if (ensure_dir(r, 0755, -1, err, errlen) < 0 ||
	    ensure_dir(home, 0755, -1, err, errlen) < 0 ||
	    ensure_dir(shared, 0755, -1, err, errlen) < 0)
		return -1;
	snprintf(home, sizeof(home), "%s/home/%s", r, username);
	if (ensure_dir(home, 0700, storage_uid(user_id), err, errlen) < 0)
		return -1;
	snprintf(bind, sizeof(bind), "%s:/home/%s:rw", home, username);
	json_array_append_new(binds, json_string(bind));
	snprintf(bind, sizeof(bind), "%s:/shared:ro", shared);
	json_array_append_new(binds, json_string(bind));
	return 0;
}
