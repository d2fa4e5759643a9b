/* storage.c — where users' files live and how containers mount them.
 *
 * Owns: the layout of the data root (home/<username>, shared/,
 * classes/<id>/, .trash/, .uploads/), the uid mapping, the bind mounts of
 * containers and the detection of kernel project quota support.
 * Does not own: the file operations (files.c), the file API (api_files.c)
 * or quota accounting (quota.c).
 */
#include "storage/storage.h"

#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <string.h>
#include <sys/quota.h>
#include <sys/stat.h>
#include <unistd.h>

#include "base/config.h"
#include "base/log.h"
#include "storage/paths.h"

static char root[1100];
static int prj_supported;
static char prj_reason[300] = "not checked yet";

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

long long storage_class_gid(long long class_id)
{
	/* above every user uid of a realistic site, below 2^31 */
	return (long long)cfg.uid_base + 100000000LL + class_id;
}

static int ensure_dir(const char *path, mode_t mode, long long uid, long long gid, char *err,
                      size_t errlen)
{
	if (mkdir(path, mode) < 0 && errno != EEXIST) {
		snprintf(err, errlen, "cannot create '%s': %s", path, strerror(errno));
		return -1;
	}
	if (uid >= 0 && chown(path, (uid_t)uid, (gid_t)gid) < 0) {
		snprintf(err, errlen, "cannot give '%s' to uid %lld: %s", path, uid,
		         strerror(errno));
		return -1;
	}
	return 0;
}

int storage_binds(long long user_id, const char *username, json_t *binds, char *err, size_t errlen)
{
	char home[1200], shared[1200], bind[2600];
	const char *r = storage_root();

	snprintf(home, sizeof(home), "%s/home", r);
	snprintf(shared, sizeof(shared), "%s/shared", r);
	if (ensure_dir(r, 0755, -1, -1, err, errlen) < 0 ||
	    ensure_dir(home, 0755, -1, -1, err, errlen) < 0 ||
	    ensure_dir(shared, 0755, -1, -1, err, errlen) < 0)
		return -1;
	snprintf(home, sizeof(home), "%s/home/%s", r, username);
	if (ensure_dir(home, 0700, storage_uid(user_id), storage_uid(user_id), err, errlen) < 0)
		return -1;
	snprintf(bind, sizeof(bind), "%s:/home/%s:rw", home, username);
	json_array_append_new(binds, json_string(bind));
	snprintf(bind, sizeof(bind), "%s:/shared:ro", shared);
	json_array_append_new(binds, json_string(bind));
	return 0;
}

/* The class areas of classes (gc_class_mounts(): [{"id", "code",
 * "teacher", "write"}]) at /class/<code or id>: each directory made when
 * missing and kept 02770 (owner the teacher, group the class's: its
 * people read through their supplementary group, nobody else gets in);
 * students and TAs get a read-only bind (the kernel refuses their writes
 * whatever the modes say), owner and co-teachers a read-write one. */
int storage_class_binds(const json_t *classes, json_t *binds, json_t *groups, char *sig,
                        size_t siglen, char *err, size_t errlen)
{
	size_t i, n;
	json_t *c;

	json_array_foreach((json_t *)classes, i, c)
	{
		long long id = json_integer_value(json_object_get(c, "id"));
		long long teacher = json_integer_value(json_object_get(c, "teacher"));
		const char *code = json_string_value(json_object_get(c, "code"));
		int write = json_is_true(json_object_get(c, "write"));
		struct storage_area a;
		char bind[1600], name[40], gid[24];
		int fd;

		if (id <= 0)
			continue;
		memset(&a, 0, sizeof(a));
		storage_area_class(&a, id, teacher);
		fd = storage_area_open(&a);
		if (fd < 0) {
			snprintf(err, errlen, "cannot open the area of class %lld: %s", id,
			         strerror(errno));
			return -1;
		}
		/* areas made before 0031 were 02750: co-teachers write too now */
		if (fchmod(fd, a.dir_mode) < 0 || fchown(fd, (uid_t)a.uid, (gid_t)a.gid) < 0 ||
		    storage_class_private(fd, a.uid, a.gid) < 0) {
			snprintf(err, errlen, "cannot set the mode of the area of class %lld: %s",
			         id, strerror(errno));
			close(fd);
			return -1;
		}
		close(fd);
		if (code && *code && !strchr(code, '/') && !strchr(code, ':'))
			snprintf(name, sizeof(name), "%s", code);
		else
			snprintf(name, sizeof(name), "%lld", id);
		snprintf(bind, sizeof(bind), "%s:/class/%s:%s", a.dir, name, write ? "rw" : "ro");
		json_array_append_new(binds, json_string(bind));
		snprintf(gid, sizeof(gid), "%lld", a.gid);
		json_array_append_new(groups, json_string(gid));
		n = strlen(sig);
		if (n < siglen)
			snprintf(sig + n, siglen - n, "%s%lld%s", n ? "," : "", id,
			         write ? "w" : "r");
	}
	return 0;
}

static const char *const private_dirs[] = { "collected", "feedback" };

int storage_class_private(int areafd, long long uid, long long gid)
{
	for (size_t i = 0; i < sizeof(private_dirs) / sizeof(private_dirs[0]); i++) {
		const char *d = private_dirs[i];
		int fd;

		if (mkdirat(areafd, d, 0700) < 0 && errno != EEXIST)
			return -1;
		/* opened without following: a link put there is refused */
		fd = openat(areafd, d, O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
		if (fd < 0)
			return -1;
		if (fchown(fd, (uid_t)uid, (gid_t)gid) < 0 || fchmod(fd, 0700) < 0) {
			int e = errno;
			close(fd);
			errno = e;
			return -1;
		}
		close(fd);
	}
	return 0;
}

int storage_class_private_path(const char *path)
{
	for (size_t i = 0; i < sizeof(private_dirs) / sizeof(private_dirs[0]); i++) {
		size_t n = strlen(private_dirs[i]);
		if (!strncmp(path, private_dirs[i], n) && (path[n] == '/' || path[n] == '\0'))
			return 1;
	}
	return 0;
}

/* ---- areas ---- */

void storage_area_home(struct storage_area *a, long long user_id, const char *username)
{
	const char *r = storage_root();

	a->sub[0] = '\0';

	snprintf(a->key, sizeof(a->key), "home:%lld", user_id);
	snprintf(a->dir, sizeof(a->dir), "%s/home/%s", r, username);
	snprintf(a->trash, sizeof(a->trash), "%s/.trash/home:%lld", r, user_id);
	a->uid = a->gid = storage_uid(user_id);
	a->dir_mode = 0700;
	a->user_id = user_id;
	a->class_id = 0;
}

void storage_area_shared(struct storage_area *a)
{
	const char *r = storage_root();

	a->sub[0] = '\0';

	snprintf(a->key, sizeof(a->key), "shared");
	snprintf(a->dir, sizeof(a->dir), "%s/shared", r);
	snprintf(a->trash, sizeof(a->trash), "%s/.trash/shared", r);
	a->uid = a->gid = 0;
	a->dir_mode = 0755;
	a->user_id = a->class_id = 0;
}

void storage_area_class(struct storage_area *a, long long class_id, long long teacher_id)
{
	const char *r = storage_root();

	a->sub[0] = '\0';

	snprintf(a->key, sizeof(a->key), "class:%lld", class_id);
	snprintf(a->dir, sizeof(a->dir), "%s/classes/%lld", r, class_id);
	snprintf(a->trash, sizeof(a->trash), "%s/.trash/class:%lld", r, class_id);
	a->uid = storage_uid(teacher_id);
	a->gid = storage_class_gid(class_id);
	a->dir_mode = 02770;
	a->user_id = 0;
	a->class_id = class_id;
}

/* mkdir -p of the parents of an area (all root-owned 0755), then the area
 * itself with its owner and mode. */
static int open_made(const char *dir, mode_t mode, long long uid, long long gid)
{
	char tmp[1200], err[300];
	int fd = open(dir, O_RDONLY | O_DIRECTORY | O_CLOEXEC | O_NOFOLLOW);

	if (fd >= 0 || errno != ENOENT)
		return fd;
	snprintf(tmp, sizeof(tmp), "%s", dir);
	for (char *p = tmp + 1; *p; p++) {
		if (*p != '/')
			continue;
		*p = '\0';
		if (mkdir(tmp, 0755) < 0 && errno != EEXIST)
			return -1;
		*p = '/';
	}
	if (ensure_dir(dir, mode, uid, gid, err, sizeof(err)) < 0)
		return -1;
	chmod(dir, mode); /* umask and setgid bits */
	return open(dir, O_RDONLY | O_DIRECTORY | O_CLOEXEC | O_NOFOLLOW);
}

int storage_area_open(const struct storage_area *a)
{
	int fd = open_made(a->dir, a->dir_mode, a->uid, a->gid), sub, err;

	if (fd < 0 || !a->sub[0])
		return fd;
	sub = paths_open_nofollow(fd, a->sub, O_RDONLY | O_DIRECTORY);
	err = errno;
	close(fd);
	errno = err;
	return sub;
}

int storage_trash_open(const struct storage_area *a)
{
	return open_made(a->trash, 0700, 0, 0);
}

int storage_staging_open(void)
{
	char p[1200];

	snprintf(p, sizeof(p), "%s/.uploads", storage_root());
	return open_made(p, 0700, 0, 0);
}

/* ---- kernel project quotas ---- */

/* Mount options of the filesystem holding path (longest mount point that
 * is a prefix of it) from /proc/self/mountinfo. */
static int mount_options(const char *path, char *opts, size_t optslen, char *fstype, size_t fslen)
{
	FILE *f = fopen("/proc/self/mountinfo", "r");
	char line[4096];
	size_t best = 0;

	if (!f)
		return -1;
	while (fgets(line, sizeof(line), f)) {
		char mp[1024], o1[1024], fs[64], o2[1024];
		char *dash = strstr(line, " - ");
		size_t n;

		if (!dash || sscanf(line, "%*s %*s %*s %*s %1023s %1023s", mp, o1) != 2 ||
		    sscanf(dash + 3, "%63s %*s %1023s", fs, o2) != 2)
			continue;
		n = strlen(mp);
		if (strncmp(path, mp, n) != 0 || (path[n] != '/' && path[n] != '\0' && n > 1))
			continue;
		if (n >= best) {
			best = n;
			snprintf(opts, optslen, "%s,%s", o1, o2);
			snprintf(fstype, fslen, "%s", fs);
		}
	}
	fclose(f);
	return best ? 0 : -1;
}

int storage_init(void)
{
	char abs[1200], opts[2100] = "", fs[64] = "?";
	struct dqinfo info;
	int fd;

	memset(&info, 0, sizeof(info));
	fd = open_made(storage_root(), 0755, -1, -1);
	if (fd < 0) {
		log_msg(LOG_ERROR, "storage", NULL, "cannot create the data root '%s': %s",
		        storage_root(), strerror(errno));
		return -1;
	}
	close(fd);
	if (!realpath(storage_root(), abs))
		snprintf(abs, sizeof(abs), "%s", storage_root());
	mount_options(abs, opts, sizeof(opts), fs, sizeof(fs));
	prj_supported = 0;
	if (!strstr(opts, "prjquota") && !strstr(opts, "pquota") && !strstr(opts, "prjjquota")) {
		snprintf(prj_reason, sizeof(prj_reason),
		         "the %s filesystem of the data root is not mounted with prjquota", fs);
	} else if (quotactl(QCMD(Q_GETINFO, PRJQUOTA), NULL, 0, (caddr_t)&info) < 0 &&
	           errno == ENOSYS) {
		snprintf(prj_reason, sizeof(prj_reason), "this kernel has no quota support");
	} else {
		/* mounted for it; the kernel answers */
		prj_supported = 1;
		snprintf(prj_reason, sizeof(prj_reason),
		         "%s project quotas are available but gpucloudd does not set them yet: "
		         "limits hold for its own writes and at instance start, not for writes "
		         "inside containers",
		         fs);
	}
	if (!prj_supported) {
		/* quotactl says more than the mount options when the kernel lacks it */
		if (quotactl(QCMD(Q_GETINFO, PRJQUOTA), "/dev/null", 0, (caddr_t)&info) < 0 &&
		    errno == ENOSYS)
			snprintf(prj_reason, sizeof(prj_reason),
			         "this kernel has no quota support (%s data root)", fs);
	}
	log_msg(LOG_INFO, "storage", NULL, "data root %s; kernel project quotas: %s (%s)", abs,
	        prj_supported ? "yes" : "no", prj_reason);
	return 0;
}

json_t *storage_support_json(void)
{
	/* project quotas are detected, never set: what enforces is software
	 * alone, whatever the filesystem could do */
	return json_pack("{s:s, s:b, s:s, s:s}", "data_root", storage_root(), "project_quotas",
	                 prj_supported, "enforcement", "software", "reason", prj_reason);
}
