/* storage.h — the data root: per-user homes, the shared area, class areas,
 * their trash and upload staging, kernel quota support, and what containers
 * mount of them.
 *
 * The one place that decides where a user's files live on disk and how
 * they are mounted into containers (instances and jobs call
 * storage_binds(); nothing else builds bind mounts).
 *
 * Layout under storage_root():
 *   home/<username>/     0700, owned by storage_uid(user)
 *   shared/              0755, root (admins write through the API)
 *   classes/<id>/        02770, teacher's uid, group storage_class_gid(id);
 *                        mounted at /class/<code or id> into the
 *                        containers of its people (storage_class_binds)
 *   .trash/<area key>/   0700 root: what was deleted, until restored or emptied
 *   .uploads/            0700 root: uploads and copies in progress (renamed
 *                        into place when complete, so no partial file is ever
 *                        visible in an area)
 */
#ifndef GPUCLOUD_STORAGE_H
#define GPUCLOUD_STORAGE_H

#include <stddef.h>
#include <sys/types.h>
#include <jansson.h>

/* The data root (cfg.data_root, or state_dir/data when that is empty). */
const char *storage_root(void);

/* The uid (and gid) containers of user user_id run as, and that owns the
 * user's files. */
long long storage_uid(long long user_id);

/* The group of class class_id's area (members' containers get it as a
 * supplementary group to read the class material). */
long long storage_class_gid(long long class_id);

/* Appends to binds (a JSON array of Docker HostConfig.Binds strings) the
 * user's mounts: home read-write at /home/<username>, the shared area
 * read-only at /shared.  Creates the home (owned by storage_uid) when it is
 * missing — a few mkdir/chown calls, cheap enough for the loop.
 * Returns 0, or -1 with a message a user can act on in err. */
int storage_binds(long long user_id, const char *username, json_t *binds, char *err, size_t errlen);

/* Appends the binds of the class areas in classes (the JSON array
 * gc_class_mounts() makes: [{"id", "code", "teacher", "write"}]) to binds
 * (/class/<code or id>, ":ro" unless write), each class's group to groups
 * (HostConfig.GroupAdd strings) and "<id>r|w" to sig (comma-separated), so
 * a container made for other classes is not reused.  Creates missing class
 * directories.  Returns 0, or -1 with a message in err. */
int storage_class_binds(const json_t *classes, json_t *binds, json_t *groups, char *sig,
                        size_t siglen, char *err, size_t errlen);

/* A class area's private folders, collected/ and feedback/: made when
 * missing and kept 0700, the owner's, so that students — who share the
 * class group with teachers and TAs — read neither through their mount.
 * Blocking; areafd is the class area's open directory.  0 or -1. */
int storage_class_private(int areafd, long long uid, long long gid);

/* 1 when path (cleaned, relative to a class area) is in one of its
 * private folders. */
int storage_class_private_path(const char *path);

/* One area as the file API sees it. */
struct storage_area {
	char name[80];  /* as the client named it: home, home:alice, shared, class:3 */
	char key[48];   /* usage key: home:<user id>, class:<id>, shared */
	char dir[1200]; /* its directory */
	char trash[1200];
	long long uid, gid; /* owner of what gpucloudd writes there */
	mode_t dir_mode;    /* of the area's root directory */
	long long user_id, class_id;
	int writable; /* the caller may change it */
	/* a student of the class: collected/ and feedback/ (classmates' work,
	 * their grades) are not theirs to open (storage_class_private()) */
	int no_private;
	/* a folder below dir that is the area's root ("" none): a job's
	 * folder in its owner's home, which that owner may have replaced with
	 * a link, so it is opened without following any */
	char sub[400];
};

void storage_area_home(struct storage_area *a, long long user_id, const char *username);
void storage_area_shared(struct storage_area *a);
void storage_area_class(struct storage_area *a, long long class_id, long long teacher_id);

/* Blocking (worker threads): open the area's directory / its trash
 * directory / the staging directory, creating them (with owner and mode)
 * when missing.  Return an O_DIRECTORY fd, or -1 with errno.  An area
 * with a sub folder opens that below dir, never creating it and following
 * no link on the way (ELOOP when one is there, ENOENT/ENOTDIR when it is
 * gone or a file). */
int storage_area_open(const struct storage_area *a);
int storage_trash_open(const struct storage_area *a);
int storage_staging_open(void);

/* Start-up: creates the root layout and detects whether the root's
 * filesystem enforces project quotas (XFS/ext4 prjquota).  Logs the result.
 * Returns 0, or -1 when the root cannot be created. */
int storage_init(void);

/* {"data_root", "project_quotas": bool, "enforcement": "kernel+software" |
 * "software", "reason"} for /readyz and the admin UI.  New reference. */
json_t *storage_support_json(void);

#endif
