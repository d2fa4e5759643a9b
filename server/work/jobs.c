/* jobs.c — the job kind of the leader's workload driver (see jobs.h).
 *
 * Owns: the job kind's pass and decide(); its operations in flight —
 * launch (the launch row, the job directory, images_ensure beside the
 * "starting" write, the spec, then driver.c's launcher) and watch (the
 * engine's log stream appended to output.log; at its end the container's
 * exit read back, the cause from the log tail (logscan.c), the container
 * removed and the final state written with the allocation released); the
 * runtime limit's timer; cancel and preemption as a stop with a grace.
 * A distributed job's members are operations of their own (op.rank), see
 * "distributed jobs" below.
 * Does not own: the API (api_jobs.c), the loop and the engine steps
 * (driver.c), the create body (spec.c), the edges (workload.c), the mounts
 * (storage.c), the members' network and variables (ddp.c).
 */
#include "work/jobs.h"

#include <errno.h>
#include <fcntl.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include <jansson.h>

#include "base/config.h"
#include "base/events.h"
#include "base/log.h"
#include "db/db.h"
#include "engine/docker.h"
#include "engine/images.h"
#include "engine/nodes.h"
#include "storage/paths.h"
#include "storage/storage.h"
#include "work/ddp.h"
#include "work/driver.h"
#include "work/instances.h"
#include "work/jobmetrics.h"
#include "work/logscan.h"
#include "work/spec.h"
#include "work/template.h"
#include "work/workload.h"

enum op_kind { OP_LAUNCH, OP_WATCH, OP_REQUEUE };

/* one operation in flight for one job */
struct op {
	long long id;
	int rank;    /* a distributed job's member (0027); 0 otherwise */
	int members; /* the job's members (1: not distributed) */
	enum op_kind kind;
	long long node_id;
	long long image_id;
	long long user_id;
	long long mem_mib;
	long long max_runtime;
	char name[96]; /* the container's */
	char username[64];
	char dir[700];    /* the job directory, below the data root */
	int pending;      /* launch: the starting write and the image still out */
	int changed;      /* launch: rows the starting write changed */
	char failed[400]; /* launch: why a step failed */
	char addr[20];    /* a member's address on the job's network */
	struct driver_launch l;
	struct docker_call *call; /* watch: the log stream, then inspect, remove */
	int logfd;                /* watch: output.log, appending */
	int posfd;                /* watch: the log's checkpoint (POS_FILE) */
	off_t size;               /* watch: bytes in output.log */
	long long msgs;           /* watch: the engine's log messages begun so far */
	long long skip;           /* watch: messages this stream still skips (written before) */
	int skipping;             /* watch: the current message is one of them */
	int restreams;            /* watch: log streams re-opened for a running container */
	struct event *timer;      /* watch: the runtime limit */
	struct event *again;      /* watch: the next try while the engine is unreachable */
	int unreachable;          /* watch: tries since the engine last answered */
	/* watch: how it ends when stopped on purpose (0: not stopped) */
	enum workload_state stop_to;
	char stop_reason[700];
	char stop_code[32];
	/* watch: what the end writes */
	int exit_code, has_exit, oom;
	int swept; /* watch: the log was read once more after the exit */
	struct op *next;
};

static struct event_base *base;
static struct op *ops;

#define Q  WL_BIT(WL_QUEUED)
#define ST WL_BIT(WL_STARTING)
#define R  WL_BIT(WL_RUNNING)
#define S  WL_BIT(WL_STOPPING)

static void set_state(long long id, unsigned from, enum workload_state to, const char *reason,
                      const char *code, unsigned flags, workload_set_cb cb, void *arg)
{
	struct workload_change c = { .kind = WL_KIND_JOB,
		                     .id = id,
		                     .from = from,
		                     .to = to,
		                     .reason = reason,
		                     .reason_code = code,
		                     .flags = flags };

	workload_set_state(&c, cb, arg);
}

void jobs_directory(const char *username, long long id, const char *name, char *out, size_t outlen)
{
	snprintf(out, outlen, "home/%s/jobs/%lld-%s", username, id, name);
}

/* Rank 0's (and a one-member job's) is the job's name; rank r's has -r<r>. */
static void container_name(long long id, int rank, char *out, size_t outlen)
{
	if (rank > 0)
		snprintf(out, outlen, "gc-%.8s-job-%lld-r%d", driver_cluster_id(), id, rank);
	else
		snprintf(out, outlen, "gc-%.8s-job-%lld", driver_cluster_id(), id);
}

/* ---- operations ---- */

static struct op *op_find(long long id)
{
	for (struct op *o = ops; o; o = o->next)
		if (o->id == id)
			return o;
	return NULL;
}

static struct op *op_find_rank(long long id, int rank)
{
	for (struct op *o = ops; o; o = o->next)
		if (o->id == id && o->rank == rank)
			return o;
	return NULL;
}

int jobs_launching(long long node_id)
{
	for (struct op *o = ops; o; o = o->next)
		if (o->kind == OP_LAUNCH && (o->node_id == node_id || !o->node_id))
			return 1;
	return 0;
}

int jobs_op_busy(long long id)
{
	return op_find(id) != NULL;
}

static struct op *op_new_rank(long long id, int rank, enum op_kind kind)
{
	struct op *o = calloc(1, sizeof(*o));

	if (!o)
		return NULL;
	o->id = id;
	o->rank = rank;
	o->members = 1;
	o->kind = kind;
	o->logfd = -1;
	o->posfd = -1;
	container_name(id, rank, o->name, sizeof(o->name));
	o->next = ops;
	ops = o;
	return o;
}

static void op_free(struct op *o)
{
	struct op **pp;

	for (pp = &ops; *pp; pp = &(*pp)->next)
		if (*pp == o) {
			*pp = o->next;
			break;
		}
	if (o->timer)
		event_free(o->timer);
	if (o->again)
		event_free(o->again);
	if (o->logfd >= 0)
		close(o->logfd);
	if (o->posfd >= 0)
		close(o->posfd);
	driver_launch_release(&o->l);
	free(o);
}

static struct op *op_new(long long id, enum op_kind kind)
{
	return op_new_rank(id, 0, kind);
}

static void op_end_cb(int changed, void *arg)
{
	(void)changed;
	op_free(arg);
}

/* ---- the job directory ----
 *
 * output.log is written from the engine's logs stream, one frame per log
 * message, in the order of the engine's log file (docker.c marks where
 * each frame begins).  Each time a message begins, the ones before it are
 * whole: (how many, the log's size) is the checkpoint, kept in POS_FILE
 * beside the log.  A stream that must start again (this process's follow
 * ended before the program did, the last read after the exit, a new
 * process after a crash) asks for the log from its first message and
 * skips the messages already written — after a crash, from the checkpoint,
 * with the log cut back to its size: nothing is lost, nothing written
 * twice.  (Timestamps would not do: stdout's and stderr's are not in
 * order with each other.) */
#define POS_FILE ".gpucloud-log-position"
#define POS_LEN  63

/* Opens the job directory's parent chain beneath the user's home, making
 * what is missing (owned by the user), and returns the directory's fd, or
 * -1 with err.  Everything is resolved beneath the home (paths_open): a
 * link the user planted cannot lead a write of ours elsewhere.
 * Blocking, but a few syscalls on local disk. */
static int dir_open(long long user_id, const char *username, const char *leaf, char *err,
                    size_t errlen)
{
	struct storage_area a = { 0 };
	int home = -1, jobs = -1, d = -1;
	long long uid = storage_uid(user_id);
	char rel[400];

	storage_area_home(&a, user_id, username);
	home = storage_area_open(&a);
	if (home < 0)
		goto fail;
	if (mkdirat(home, "jobs", 0755) == 0 &&
	    fchownat(home, "jobs", (uid_t)uid, (gid_t)uid, AT_SYMLINK_NOFOLLOW) < 0)
		goto fail;
	jobs = paths_open(home, "jobs", O_DIRECTORY | O_RDONLY, 0);
	if (jobs < 0)
		goto fail;
	if (mkdirat(jobs, leaf, 0755) == 0 &&
	    fchownat(jobs, leaf, (uid_t)uid, (gid_t)uid, AT_SYMLINK_NOFOLLOW) < 0)
		goto fail;
	snprintf(rel, sizeof(rel), "jobs/%s", leaf);
	d = paths_open(home, rel, O_DIRECTORY | O_RDONLY, 0);
	if (d < 0)
		goto fail;
	close(home);
	close(jobs);
	return d;
fail:
	snprintf(err, errlen, "could not make the job directory 'jobs/%s' in your home: %s", leaf,
	         strerror(errno));
	if (home >= 0)
		close(home);
	if (jobs >= 0)
		close(jobs);
	return -1;
}

/* Opens (creating, owned by the user) file in the directory dfd; a regular
 * file only. */
static int file_open(int dfd, const char *file, int flags, long long uid)
{
	int fd = paths_open(dfd, file, flags | O_CREAT, 0644);
	struct stat st;

	if (fd < 0)
		return -1;
	if (fstat(fd, &st) < 0 || !S_ISREG(st.st_mode)) {
		close(fd);
		errno = EINVAL;
		return -1;
	}
	if (st.st_uid != (uid_t)uid && fchown(fd, (uid_t)uid, (gid_t)uid) < 0) {
		close(fd);
		return -1;
	}
	return fd;
}

/* The job's leaf (<id>-<name>) from its directory. */
static const char *leaf_of(const char *dir)
{
	const char *s = strrchr(dir, '/');

	return s ? s + 1 : dir;
}

/* Opens output.log for appending (and the hyperparameters file when
 * hparams is given); o->logfd.  0 or -1 with err. */
static int prepare_dir(struct op *o, const char *hparams, char *err, size_t errlen)
{
	long long uid = storage_uid(o->user_id);
	int d = dir_open(o->user_id, o->username, leaf_of(o->dir), err, errlen);

	if (d < 0)
		return -1;
	if (hparams) {
		int fd = file_open(d, "hyperparameters.json", O_WRONLY | O_TRUNC, uid);
		size_t n = strlen(hparams);
		if (fd < 0 || write(fd, hparams, n) != (ssize_t)n) {
			snprintf(err, errlen, "could not write hyperparameters.json: %s",
			         strerror(errno));
			if (fd >= 0)
				close(fd);
			close(d);
			return -1;
		}
		close(fd);
	}
	/* a member's log (rank r > 0): output.rank<r>.log, its checkpoint
	 * beside it */
	if (o->logfd < 0) {
		char f[48];
		if (o->rank > 0)
			snprintf(f, sizeof(f), "output.rank%d.log", o->rank);
		else
			snprintf(f, sizeof(f), "output.log");
		o->logfd = file_open(d, f, O_RDWR | O_APPEND, uid);
	}
	if (o->posfd < 0) {
		char f[64];
		if (o->rank > 0)
			snprintf(f, sizeof(f), "%s.rank%d", POS_FILE, o->rank);
		else
			snprintf(f, sizeof(f), "%s", POS_FILE);
		o->posfd = file_open(d, f, O_RDWR, uid);
	}
	close(d);
	if (o->logfd < 0) {
		snprintf(err, errlen, "could not open output.log in the job directory: %s",
		         strerror(errno));
		return -1;
	}
	return 0;
}

/* ---- watch: the log, the end ---- */

/* watch_stream() modes */
enum { LOG_NEW, LOG_ON, LOG_RESUME };

static void watch_stream(struct op *o, int mode);
static void exited(struct op *o);

/* The messages before the one now beginning are whole: checkpoint them. */
static void checkpoint(struct op *o)
{
	char rec[POS_LEN + 1];
	int n;

	if (o->posfd < 0)
		return;
	n = snprintf(rec, sizeof(rec), "%lld %lld", o->msgs, (long long)o->size);
	if (n < 0 || n >= POS_LEN)
		return;
	memset(rec + n, ' ', (size_t)(POS_LEN - 1 - n));
	rec[POS_LEN - 1] = '\n';
	if (pwrite(o->posfd, rec, POS_LEN, 0) != POS_LEN)
		log_msg(LOG_WARN, "jobs", NULL, "job %lld: cannot write the log checkpoint: %s",
		        o->id, strerror(errno));
}

/* The checkpoint a process before this one left: the log is cut back to
 * it, and its messages are not written again.  None: from the start. */
static void resume_checkpoint(struct op *o)
{
	char rec[POS_LEN + 1];
	long long msgs = 0, size = 0;
	ssize_t n = o->posfd >= 0 ? pread(o->posfd, rec, POS_LEN, 0) : -1;

	if (n > 0) {
		rec[n] = '\0';
		if (sscanf(rec, "%lld %lld", &msgs, &size) != 2 || msgs < 0 || size < 0)
			msgs = size = 0;
	}
	o->msgs = msgs;
	o->size = (off_t)size;
	if (o->logfd >= 0 && ftruncate(o->logfd, o->size) < 0)
		log_msg(LOG_WARN, "jobs", NULL, "job %lld: cannot cut output.log back: %s", o->id,
		        strerror(errno));
}

static void ended(int changed, void *arg)
{
	struct op *o = arg;

	(void)changed;
	op_free(o);
}

static void member_finish(struct op *o, enum workload_state to, const char *reason,
                          const char *code);

/* The container is gone (or could not be removed): the final state. */
static void finish(struct op *o, enum workload_state to, const char *reason, const char *code)
{
	unsigned flags = WL_RELEASE | WL_CLEAR_CONTAINER;

	if (o->members > 1) {
		member_finish(o, to, reason, code);
		return;
	}
	struct workload_change c = {
		.kind = WL_KIND_JOB, .id = o->id, .to = to, .reason = reason, .reason_code = code
	};

	/* from whichever of starting, running, stopping may end so */
	for (int s = WL_RUNNING; s < WL__COUNT; s++)
		if ((s == WL_STARTING || s == WL_RUNNING || s == WL_STOPPING) &&
		    workload_edge_ok((enum workload_state)s, to))
			c.from |= WL_BIT(s);
	if (o->has_exit)
		flags |= WL_EXIT_CODE;
	c.flags = flags;
	c.exit_code = o->exit_code;
	workload_set_state(&c, ended, o);
}

struct ending {
	struct op *o;
	enum workload_state to;
	char reason[600];
	char code[32];
};

static void removed(struct docker_call *call, enum rc rc, int status, const char *body, size_t len,
                    const char *err, void *arg)
{
	struct ending *e = arg;

	(void)call;
	(void)body;
	(void)len;
	e->o->call = NULL;
	if (rc != RC_OK || (status != 204 && status != 404))
		log_msg(LOG_WARN, "jobs", NULL, "job %lld: container %s not removed (%s %d %s)",
		        e->o->id, e->o->name, rc_code(rc), status, err ? err : "");
	finish(e->o, e->to, e->reason, e->code);
	free(e);
}

/* Removes the container, then writes the final state. */
static void end_with(struct op *o, enum workload_state to, const char *reason, const char *code)
{
	struct ending *e = calloc(1, sizeof(*e));

	if (!e) {
		finish(o, to, reason, code);
		return;
	}
	e->o = o;
	e->to = to;
	snprintf(e->reason, sizeof(e->reason), "%s", reason ? reason : "");
	snprintf(e->code, sizeof(e->code), "%s", code);
	o->call = driver_container_remove(o->node_id, o->name, removed, e);
	if (!o->call)
		removed(NULL, RC_UNAVAILABLE, 0, "", 0, "the node's engine is not available", e);
}

/* What the log's tail says went wrong, into out ("" when nothing known). */
static void log_cause(struct op *o, char *out, size_t outlen)
{
	static char buf[LOGSCAN_TAIL];
	struct stat st;
	off_t from;
	ssize_t n;

	out[0] = '\0';
	if (o->logfd < 0 || fstat(o->logfd, &st) < 0)
		return;
	from = st.st_size > (off_t)sizeof(buf) ? st.st_size - (off_t)sizeof(buf) : 0;
	n = pread(o->logfd, buf, sizeof(buf), from);
	if (n > 0)
		logscan_reason(buf, (size_t)n, from > 0, out, outlen);
}

/* An engine that does not answer is asked again UNREACHABLE_TRIES times,
 * UNREACHABLE_PAUSE_S apart, before the job is lost. */
#define UNREACHABLE_TRIES   10
#define UNREACHABLE_PAUSE_S 3

static void try_again(evutil_socket_t fd, short what, void *arg)
{
	(void)fd;
	(void)what;
	watch_stream(arg, LOG_ON);
}

static void inspected(struct docker_call *call, enum rc rc, int status, const char *body,
                      size_t len, const char *err, void *arg)
{
	struct op *o = arg;
	json_t *j, *st;
	char why[600], msg[300];

	(void)call;
	o->call = NULL;
	if (rc != RC_OK && o->unreachable++ < UNREACHABLE_TRIES) {
		/* an engine restarting, a network blip: the job may well run on;
		 * follow it again in a moment (what was written is not again) */
		struct timeval tv = { UNREACHABLE_PAUSE_S, 0 };
		if (!o->again)
			o->again = evtimer_new(base, try_again, o);
		if (o->again && evtimer_add(o->again, &tv) == 0)
			return;
	}
	if (rc != RC_OK) {
		snprintf(why, sizeof(why), "the node's engine is unreachable: %s",
		         err && *err ? err : rc_code(rc));
		end_with(o, o->stop_to ? o->stop_to : WL_LOST, o->stop_to ? o->stop_reason : why,
		         o->stop_to ? o->stop_code : "node_lost");
		return;
	}
	if (status == 404) {
		end_with(o, o->stop_to ? o->stop_to : WL_LOST,
		         o->stop_to ? o->stop_reason : "the job's container vanished",
		         o->stop_to ? o->stop_code : "container_lost");
		return;
	}
	if (status != 200) {
		driver_engine_msg(rc, body, len, err, "could not inspect the container", msg,
		                  sizeof(msg));
		end_with(o, o->stop_to ? o->stop_to : WL_LOST, o->stop_to ? o->stop_reason : msg,
		         o->stop_to ? o->stop_code : "container_lost");
		return;
	}
	o->unreachable = 0;
	j = json_loadb(body, len, 0, NULL);
	st = json_object_get(j, "State");
	if (json_is_true(json_object_get(st, "Running")) && o->restreams++ < 20) {
		/* the stream ended, the program did not: follow it again */
		json_decref(j);
		watch_stream(o, LOG_ON);
		return;
	}
	o->exit_code = (int)json_integer_value(json_object_get(st, "ExitCode"));
	o->has_exit = 1;
	o->oom = json_is_true(json_object_get(st, "OOMKilled"));
	json_decref(j);
	if (!o->swept) {
		/* a follow may end before the engine has read the last of the
		 * program's output: read what came after the checkpoint once
		 * more, whole, now that nothing more can come */
		o->swept = 1;
		watch_stream(o, LOG_ON);
		return;
	}
	exited(o);
}

/* The container exited (o->exit_code, o->oom) and its log is whole. */
static void exited(struct op *o)
{
	char why[600], cause[300];
	int oom = o->oom;

	if (o->stop_to) {
		end_with(o, o->stop_to, o->stop_reason, o->stop_code);
		return;
	}
	if (o->exit_code == 0 && !oom) {
		end_with(o, WL_SUCCEEDED, "", "");
		return;
	}
	log_cause(o, cause, sizeof(cause));
	if (oom)
		snprintf(why, sizeof(why),
		         "killed for going over its memory limit of %lld MiB (OOM), exit code "
		         "%d%s%s",
		         o->mem_mib, o->exit_code, cause[0] ? ": " : "", cause);
	else
		snprintf(why, sizeof(why), "exited with code %d%s%s", o->exit_code,
		         cause[0] ? ": " : "", cause);
	end_with(o, WL_FAILED, why, oom ? "oom_killed" : "exit_code");
}

static int log_data(struct docker_call *call, int stream, const char *data, size_t len, void *arg)
{
	struct op *o = arg;

	(void)call;
	if (stream & DOCKER_FRAME_START) {
		if (o->skip > 0) {
			/* written by an earlier stream */
			o->skip--;
			o->skipping = 1;
		} else {
			/* a message begins: the ones before are whole */
			o->skipping = 0;
			if (o->msgs > 0)
				checkpoint(o);
			o->msgs++;
		}
	}
	if (o->skipping)
		return 0;
	/* stdout and stderr in the order they came, as one file */
	while (len > 0 && o->logfd >= 0) {
		ssize_t n = write(o->logfd, data, len);
		if (n < 0 && errno == EINTR)
			continue;
		if (n <= 0) {
			log_msg(LOG_WARN, "jobs", NULL, "job %lld: cannot write output.log: %s",
			        o->id, strerror(errno));
			break;
		}
		o->size += n;
		jobmetrics_job_output(o->id, data, (size_t)n); /* a line: its metrics soon */
		data += n;
		len -= (size_t)n;
	}
	events_publish(EV_JOB_LOG); /* followers read now, here and (NOTIFY) on other replicas */
	return 0;
}

/* The log stream ended: the container exited (or the engine went away):
 * read how it ended. */
static void stream_ended(struct docker_call *call, enum rc rc, int status, const char *body,
                         size_t len, const char *err, void *arg)
{
	struct op *o = arg;
	struct docker_engine *e = nodes_engine(o->node_id);
	char path[200];

	(void)call;
	(void)rc;
	(void)status;
	(void)body;
	(void)len;
	(void)err;
	o->call = NULL;
	if (o->swept) {
		exited(o); /* the last read, after the exit, is done */
		return;
	}
	snprintf(path, sizeof(path), "/containers/%s/json", o->name);
	o->call =
	        e ? docker_request(e, "GET", path, NULL, NULL, 0, NULL, 30000, inspected, o) : NULL;
	if (!o->call)
		inspected(NULL, RC_UNAVAILABLE, 0, "", 0, "the node's engine is not available", o);
}

/* Follows the container's log into output.log until it exits (after the
 * exit, o->swept: reads it once, without following).  mode: the log is new
 * (a launch), goes on (this process wrote o->msgs messages), or resumes
 * from the checkpoint of a process before (see POS_FILE above). */
static void watch_stream(struct op *o, int mode)
{
	struct docker_engine *e = nodes_engine(o->node_id);
	char path[300];

	if (mode == LOG_NEW) {
		o->msgs = 0;
		o->size = 0;
		if ((o->logfd >= 0 && ftruncate(o->logfd, 0) < 0) ||
		    (o->posfd >= 0 && ftruncate(o->posfd, 0) < 0))
			log_msg(LOG_WARN, "jobs", NULL, "job %lld: cannot empty output.log: %s",
			        o->id, strerror(errno));
	} else if (mode == LOG_RESUME) {
		resume_checkpoint(o);
	}
	o->skip = o->msgs;
	o->skipping = 0;
	snprintf(path, sizeof(path), "/containers/%s/logs?%sstdout=1&stderr=1", o->name,
	         o->swept ? "" : "follow=1&");
	o->call = e ? docker_stream(e, "GET", path, NULL, NULL, 0, NULL, 0, DOCKER_DEMUX_FRAMES,
	                            log_data, stream_ended, o)
	            : NULL;
	if (!o->call)
		inspected(NULL, RC_UNAVAILABLE, 0, "", 0, "the node's engine is not available", o);
}

static void deadline(evutil_socket_t fd, short what, void *arg);

/* Stops the watched container on purpose: the end writes to with why. */
static void watch_stop(struct op *o, enum workload_state to, const char *why, const char *code,
                       int grace)
{
	if (o->stop_to)
		return;
	o->stop_to = to;
	snprintf(o->stop_reason, sizeof(o->stop_reason), "%s", why);
	snprintf(o->stop_code, sizeof(o->stop_code), "%s", code);
	set_state(o->id, ST | R | S, WL_STOPPING, why, code, 0, NULL, NULL);
	/* fire and forget: the log stream ends when the container does, and
	 * the end follows from that */
	driver_container_stop(o->node_id, o->name, grace, docker_ignore, NULL);
}

static void deadline(evutil_socket_t fd, short what, void *arg)
{
	struct op *o = arg;
	char why[200];

	(void)fd;
	(void)what;
	snprintf(why, sizeof(why), "exceeded its maximum runtime of %lld s", o->max_runtime);
	if (o->rank == 0) { /* one entry for a distributed job */
		char target[32];
		snprintf(target, sizeof(target), "job:%lld", o->id);
		workload_audit("job.max_runtime", target, why);
	}
	watch_stop(o, WL_FAILED, why, "runtime_exceeded", cfg.instance_stop_grace);
}

/* Starts watching a started job: the log, the runtime limit (left: seconds
 * until it is reached). */
static void watch_begin(struct op *o, int mode, long long left)
{
	struct timeval tv;

	o->kind = OP_WATCH;
	o->timer = evtimer_new(base, deadline, o);
	tv.tv_sec = left > 0 ? left : 0;
	tv.tv_usec = 0;
	if (o->timer)
		evtimer_add(o->timer, &tv);
	watch_stream(o, mode);
}

/* -- resume a watch (a process that died, a new leader) -- */

struct resume {
	struct op *o;
	enum workload_state stop_to;
	char why[300];
	char code[32];
};

static void settle(long long id);
static void member_mark_stopped(long long id, int rank);

/* Columns: 0 user_id, 1 username, 2 directory, 3 node_id, 4 seconds left,
 * 5 mem_mib, 6 max_runtime_s, 7 state, 8 reason, 9 reason_code,
 * 10 the member's state, 11 members. */
static void resume_row(PGresult *res, enum rc rc, void *arg)
{
	struct resume *x = arg;
	struct op *o = x->o;
	char err[400];

	if (rc != RC_OK || PQntuples(res) != 1) {
		free(x);
		op_free(o);
		return;
	}
	o->members = (int)strtol(db_val(res, 0, 11), NULL, 10);
	if (o->members > 1) {
		const char *ms = db_val(res, 0, 10) ? db_val(res, 0, 10) : "";
		int stopping = strcmp(db_val(res, 0, 7), "stopping") == 0 || x->stop_to;
		if (strcmp(ms, "starting") != 0 && strcmp(ms, "running") != 0) {
			/* ended (or never launched, in a job that stops): the job
			 * may be over */
			long long id = o->id;
			int rank = o->rank;
			free(x);
			op_free(o);
			if (strcmp(ms, "queued") == 0 && stopping)
				member_mark_stopped(id, rank);
			else
				settle(id);
			return;
		}
		if (strtoll(db_val(res, 0, 3), NULL, 10) &&
		    !nodes_engine(strtoll(db_val(res, 0, 3), NULL, 10))) {
			/* the node's client is not loaded yet (start-up): a later pass */
			free(x);
			op_free(o);
			return;
		}
		if (stopping && strcmp(db_val(res, 0, 7), "stopping") != 0) {
			/* stopped now by the pass (cancel, preemption...): its
			 * reason, not the row's */
			o->stop_to = x->stop_to;
			snprintf(o->stop_reason, sizeof(o->stop_reason), "%s", x->why);
			snprintf(o->stop_code, sizeof(o->stop_code), "%s", x->code);
		}
	}
	o->user_id = strtoll(db_val(res, 0, 0), NULL, 10);
	snprintf(o->username, sizeof(o->username), "%s", db_val(res, 0, 1));
	snprintf(o->dir, sizeof(o->dir), "%s", db_val(res, 0, 2));
	o->node_id = strtoll(db_val(res, 0, 3), NULL, 10);
	o->mem_mib = strtoll(db_val(res, 0, 5), NULL, 10);
	o->max_runtime = strtoll(db_val(res, 0, 6), NULL, 10);
	if (prepare_dir(o, NULL, err, sizeof(err)) < 0)
		log_msg(LOG_WARN, "jobs", NULL, "job %lld: %s (the log is not kept)", o->id, err);
	if (o->stop_to) {
		driver_container_stop(o->node_id, o->name, cfg.instance_stop_grace, docker_ignore,
		                      NULL);
	} else if (strcmp(db_val(res, 0, 7), "stopping") == 0) {
		/* stopped on purpose before: end as that stop said */
		o->stop_to = x->stop_to ? x->stop_to : WL_FAILED;
		snprintf(o->stop_reason, sizeof(o->stop_reason), "%s",
		         x->stop_to == WL_CANCELLED ? x->why : db_val(res, 0, 8));
		snprintf(o->stop_code, sizeof(o->stop_code), "%s",
		         x->stop_to == WL_CANCELLED ? "cancelled" : db_val(res, 0, 9));
		driver_container_stop(o->node_id, o->name, cfg.instance_stop_grace, docker_ignore,
		                      NULL);
	}
	free(x);
	watch_begin(o, LOG_RESUME, strtoll(db_val(res, 0, 4), NULL, 10));
}

/* Follows rank's container again (0: a job of one member); stop_to (not
 * 0): stops it, ending so with why and code. */
static void op_resume_member(long long id, int rank, enum workload_state stop_to, const char *why,
                             const char *code)
{
	struct op *o = op_new_rank(id, rank, OP_WATCH);
	struct resume *x = calloc(1, sizeof(*x));
	char ids[24], rk[16];
	const char *p[2] = { ids, rk };

	if (!o || !x) {
		free(x);
		if (o)
			op_free(o);
		return;
	}
	x->o = o;
	x->stop_to = stop_to;
	snprintf(x->why, sizeof(x->why), "%s", why ? why : "");
	snprintf(x->code, sizeof(x->code), "%s", code ? code : "");
	snprintf(ids, sizeof(ids), "%lld", id);
	snprintf(rk, sizeof(rk), "%d", rank);
	db_query("SELECT j.user_id, u.username, j.directory,"
	         " COALESCE(CASE WHEN j.members > 1 THEN m.node_id ELSE j.node_id END, 0),"
	         " COALESCE(extract(epoch FROM COALESCE(j.started_at, now())"
	         "  + make_interval(secs => j.max_runtime_s) - now()), 0)::bigint,"
	         " j.mem_mib, j.max_runtime_s, j.state, j.reason, j.reason_code, m.state,"
	         " j.members"
	         " FROM jobs j JOIN users u ON u.id = j.user_id"
	         " LEFT JOIN job_members m ON m.job_id = j.id AND m.rank = $2::int"
	         " WHERE j.id = $1",
	         2, p, resume_row, x);
}

static void op_resume(long long id, enum workload_state stop_to, const char *why)
{
	op_resume_member(id, 0, stop_to, why, "cancelled");
}

/* ---- distributed jobs: the members' ends (0027_job_members.sql) ----
 *
 * Each member is an operation of its own (rank), launched and watched as a
 * job of one member is, into its own log.  Its end is written on its
 * job_members row; a member that fails by itself (exit code, OOM, its
 * container vanished, its start failed) puts the job in stopping with its
 * reason, naming its rank, and the pass (decide_members) stops the others
 * (SIGTERM, the grace, SIGKILL).  Once no member is live, settle() writes
 * the job's end from the rows: succeeded when all exited 0, else the
 * stopping's reason — the allocation (all nodes) released then.  settle()
 * reads only the database, so two members ending at once, or a process
 * that died between the writes, settle on the next pass all the same. */

struct settling {
	long long id;
	enum workload_state to;
	char reason[700];
	char code[32];
	int exit_code, has_exit;
};

static void settle_final(struct settling *x)
{
	struct workload_change c = { .kind = WL_KIND_JOB,
		                     .id = x->id,
		                     .to = x->to,
		                     .reason = x->reason,
		                     .reason_code = x->code };

	for (int st = WL_RUNNING; st < WL__COUNT; st++)
		if ((st == WL_STARTING || st == WL_RUNNING || st == WL_STOPPING) &&
		    workload_edge_ok((enum workload_state)st, x->to))
			c.from |= WL_BIT(st);
	c.flags = WL_RELEASE | WL_CLEAR_CONTAINER | (x->has_exit ? WL_EXIT_CODE : 0);
	c.exit_code = x->exit_code;
	log_msg(LOG_INFO, "jobs", NULL, "job %lld: all members ended: %s%s%s", x->id,
	        workload_state_name(x->to), x->reason[0] ? ": " : "", x->reason);
	workload_set_state(&c, NULL, NULL);
	free(x);
}

static void settle_running(int changed, void *arg)
{
	(void)changed;
	settle_final(arg);
}

static enum workload_state end_for(const char *code)
{
	if (strcmp(code, "cancelled") == 0)
		return WL_CANCELLED;
	if (strcmp(code, "container_lost") == 0 || strcmp(code, "node_lost") == 0)
		return WL_LOST;
	return WL_FAILED;
}

/* Columns: 0 state, 1 reason, 2 reason_code, 3 live members,
 * 4 succeeded members, 5 members, 6 the first failed member's rank,
 * 7 its reason, 8 its reason_code, 9 its exit code. */
static void settle_row(PGresult *res, enum rc rc, void *arg)
{
	struct settling *x = arg;
	const char *st;

	if (rc != RC_OK || PQntuples(res) != 1 || strcmp(db_val(res, 0, 3), "0") != 0) {
		free(x);
		return;
	}
	st = db_val(res, 0, 0);
	if (strcmp(st, "starting") && strcmp(st, "running") && strcmp(st, "stopping")) {
		free(x);
		return;
	}
	if (strcmp(db_val(res, 0, 4), db_val(res, 0, 5)) == 0 && strcmp(st, "stopping") != 0) {
		x->to = WL_SUCCEEDED;
		x->has_exit = 1;
		x->exit_code = 0;
		if (strcmp(st, "starting") == 0) {
			/* all ran (some ended before the last started) */
			set_state(x->id, ST, WL_RUNNING, "", "", 0, settle_running, x);
			return;
		}
		settle_final(x);
		return;
	}
	if (db_val(res, 0, 9)) {
		x->has_exit = 1;
		x->exit_code = (int)strtol(db_val(res, 0, 9), NULL, 10);
	}
	if (strcmp(st, "stopping") == 0) {
		snprintf(x->reason, sizeof(x->reason), "%s", db_val(res, 0, 1));
		snprintf(x->code, sizeof(x->code), "%s", db_val(res, 0, 2));
	} else if (db_val(res, 0, 6)) {
		snprintf(x->reason, sizeof(x->reason), "rank %s: %s", db_val(res, 0, 6),
		         db_val(res, 0, 7));
		snprintf(x->code, sizeof(x->code), "%s", db_val(res, 0, 8));
	} else {
		snprintf(x->reason, sizeof(x->reason), "its members were stopped");
		snprintf(x->code, sizeof(x->code), "stopped");
	}
	x->to = end_for(x->code);
	settle_final(x);
}

/* Writes the job's end when none of its members is live any more. */
static void settle(long long id)
{
	struct settling *x = calloc(1, sizeof(*x));
	char ids[24];
	const char *p[1] = { ids };

	if (!x)
		return;
	x->id = id;
	snprintf(ids, sizeof(ids), "%lld", id);
	db_query("SELECT j.state, j.reason, j.reason_code,"
	         " count(*) FILTER (WHERE m.state IN ('queued', 'starting', 'running')),"
	         " count(*) FILTER (WHERE m.state = 'succeeded'), count(*),"
	         " f.rank, f.reason, f.reason_code, f.exit_code"
	         " FROM jobs j JOIN job_members m ON m.job_id = j.id"
	         " LEFT JOIN LATERAL (SELECT x.rank, x.reason, x.reason_code, x.exit_code"
	         "  FROM job_members x WHERE x.job_id = j.id AND x.state IN ('failed', 'lost')"
	         "  ORDER BY x.finished_at, x.rank LIMIT 1) f ON true"
	         " WHERE j.id = $1"
	         " GROUP BY j.id, f.rank, f.reason, f.reason_code, f.exit_code",
	         1, p, settle_row, x);
}

static void settle_cb(PGresult *res, enum rc rc, void *arg)
{
	(void)res;
	(void)rc;
	settle((long long)(intptr_t)arg);
}

/* A member never launched, in a job that stops. */
static void member_mark_stopped(long long id, int rank)
{
	char ids[24], rk[16];
	const char *p[2] = { ids, rk };

	snprintf(ids, sizeof(ids), "%lld", id);
	snprintf(rk, sizeof(rk), "%d", rank);
	db_query(
	        "UPDATE job_members SET state = 'stopped', reason = 'not started: the job stopped',"
	        " reason_code = 'stopped', finished_at = now(), updated_at = now()"
	        " WHERE job_id = $1 AND rank = $2::int AND state = 'queued'",
	        2, p, settle_cb, (void *)(intptr_t)id);
}

/* Stops a watched member on purpose (the job stops). */
static void member_stop(struct op *o, enum workload_state to, const char *why, const char *code,
                        int grace)
{
	if (o->stop_to || !o->node_id)
		return;
	o->stop_to = to;
	snprintf(o->stop_reason, sizeof(o->stop_reason), "%s", why);
	snprintf(o->stop_code, sizeof(o->stop_code), "%s", code);
	driver_container_stop(o->node_id, o->name, grace, docker_ignore, NULL);
}

struct member_end {
	struct op *o;
	int own; /* failed by itself: the job stops */
	enum workload_state to;
	char reason[700];
	char code[32];
};

static void job_stopping(int changed, void *arg)
{
	struct member_end *m = arg;

	(void)changed;
	/* the others here at once (the pass would, a tick later) */
	for (struct op *p = ops; p; p = p->next)
		if (p->id == m->o->id && p != m->o && p->kind == OP_WATCH)
			member_stop(p, m->to, m->reason, m->code, cfg.instance_stop_grace);
	settle(m->o->id);
	op_free(m->o);
	free(m);
}

static void member_written(PGresult *res, enum rc rc, void *arg)
{
	struct member_end *m = arg;

	(void)res;
	(void)rc;
	if (m->own) {
		set_state(m->o->id, ST | R, WL_STOPPING, m->reason, m->code, 0, job_stopping, m);
		return;
	}
	settle(m->o->id);
	op_free(m->o);
	free(m);
}

/* The member's container is gone: its row's end, then the job's. */
static void member_finish(struct op *o, enum workload_state to, const char *reason,
                          const char *code)
{
	struct member_end *m = calloc(1, sizeof(*m));
	const char *state = to == WL_SUCCEEDED ? "succeeded"
	                    : o->stop_to       ? "stopped"
	                    : to == WL_LOST    ? "lost"
	                                       : "failed";
	char ids[24], rk[16], ec[16];
	const char *p[6] = { ids, rk, state, o->has_exit ? ec : NULL, reason ? reason : "", code };

	if (!m) {
		op_free(o);
		return;
	}
	m->o = o;
	m->own = !o->stop_to && to != WL_SUCCEEDED;
	m->to = to;
	snprintf(m->reason, sizeof(m->reason), "rank %d: %s", o->rank, reason ? reason : "");
	snprintf(m->code, sizeof(m->code), "%s", code);
	snprintf(ids, sizeof(ids), "%lld", o->id);
	snprintf(rk, sizeof(rk), "%d", o->rank);
	snprintf(ec, sizeof(ec), "%d", o->exit_code);
	db_query("UPDATE job_members SET state = $3, exit_code = $4::int, reason = $5,"
	         " reason_code = $6, finished_at = now(), updated_at = now()"
	         " WHERE job_id = $1 AND rank = $2::int"
	         " AND state IN ('queued', 'starting', 'running')",
	         6, p, member_written, m);
}

/* ---- launch ---- */

static void launch_fail(struct op *o, const char *why, const char *code)
{
	if (o->members > 1) {
		/* the member fails; the job stops its others (member_finish) */
		o->has_exit = 0;
		member_finish(o, WL_FAILED, why, code);
		return;
	}
	set_state(o->id, Q | ST, WL_FAILED, why, code, WL_RELEASE, op_end_cb, o);
}

static void running_set(int changed, void *arg)
{
	struct op *o = arg;
	char ids[24];
	const char *p[2] = { ids, o->l.cid };

	if (changed <= 0) {
		/* cancelled meanwhile (stopping): the next pass resumes the
		 * container as a watch and stops it */
		op_free(o);
		return;
	}
	snprintf(ids, sizeof(ids), "%lld", o->id);
	db_query("UPDATE jobs SET container_id = $2 WHERE id = $1", 2, p, NULL, NULL);
	log_msg(LOG_INFO, "jobs", NULL, "job %lld: container %.12s started on node %lld", o->id,
	        o->l.cid, o->node_id);
	driver_launch_release(&o->l);
	watch_begin(o, LOG_NEW, o->max_runtime);
}

/* A member runs: the job does once all its members have started.
 * Columns: 0 rows changed, 1 other members started, 2 members. */
static void member_running_set(PGresult *res, enum rc rc, void *arg)
{
	struct op *o = arg;

	if (rc == RC_OK && PQntuples(res) == 1 &&
	    strtol(db_val(res, 0, 1), NULL, 10) + 1 >= strtol(db_val(res, 0, 2), NULL, 10))
		set_state(o->id, ST, WL_RUNNING, "", "", 0, NULL, NULL);
	log_msg(LOG_INFO, "jobs", NULL, "job %lld: rank %d's container %.12s started on node %lld",
	        o->id, o->rank, o->l.cid, o->node_id);
	driver_launch_release(&o->l);
	watch_begin(o, LOG_NEW, o->max_runtime);
}

static void launch_running(void *arg, const char *ports)
{
	struct op *o = arg;

	(void)ports;
	if (o->members > 1) {
		char ids[24], rk[16];
		const char *p[3] = { ids, rk, o->l.cid };
		snprintf(ids, sizeof(ids), "%lld", o->id);
		snprintf(rk, sizeof(rk), "%d", o->rank);
		db_query(
		        "WITH u AS (UPDATE job_members SET state = 'running', container_id = $3,"
		        "  started_at = COALESCE(started_at, now()), updated_at = now()"
		        "  WHERE job_id = $1 AND rank = $2::int AND state IN ('queued', 'starting')"
		        "  RETURNING rank)"
		        " SELECT (SELECT count(*) FROM u), (SELECT count(*) FROM job_members"
		        "  WHERE job_id = $1 AND rank <> $2::int AND started_at IS NOT NULL),"
		        " j.members FROM jobs j WHERE j.id = $1",
		        3, p, member_running_set, o);
		return;
	}
	set_state(o->id, ST, WL_RUNNING, "", "", 0, running_set, o);
}

static void launch_created(void *arg)
{
	struct op *o = arg;

	driver_launch_start(&o->l);
}

static void launch_failed(void *arg, const char *why)
{
	struct op *o = arg;

	/* a container the create left behind goes with the failure */
	driver_container_remove(o->node_id, o->name, docker_ignore, NULL);
	launch_fail(o, why, "start_failed");
}

static const struct driver_launch_ops launch_ops = {
	.failed = launch_failed,
	.created = launch_created,
	.running = launch_running,
};

/* Both the starting write (the node on record first, for the reconciler)
 * and the image on the node must be there before the create. */
static void launch_joined(struct op *o)
{
	if (--o->pending > 0)
		return;
	if (o->changed <= 0) {
		op_free(o);
		return;
	}
	if (o->failed[0]) {
		launch_fail(o, o->failed, "image_pull_failed");
		return;
	}
	o->l.ops = &launch_ops;
	o->l.arg = o;
	o->l.id = o->id;
	o->l.node_id = o->node_id;
	snprintf(o->l.name, sizeof(o->l.name), "%s", o->name);
	driver_launch_begin(&o->l);
}

static void image_ready(enum rc rc, const char *err, void *arg)
{
	struct op *o = arg;

	if (rc != RC_OK)
		snprintf(o->failed, sizeof(o->failed), "could not pull the image: %s",
		         err ? err : "error");
	launch_joined(o);
}

static void starting_set(int changed, void *arg)
{
	struct op *o = arg;

	if (o->changed >= 0) /* (a member's own write may have failed) */
		o->changed = changed;
	launch_joined(o);
}

/* A member's starting write (both it and the job's must change a row). */
static void member_starting_set(PGresult *res, enum rc rc, void *arg)
{
	struct op *o = arg;

	if (rc != RC_OK || strcmp(PQcmdTuples(res), "1") != 0)
		o->changed = -1;
	launch_joined(o);
}

/* A member's network and variables (ddp.h): the job's own network on the
 * member's node, its address there, MASTER_ADDR (rank 0's), the ranks and
 * what the node's labels say; the user's env does not override them. */
static int member_net(struct op *o, const PGresult *res, json_t *penv, json_t *env, char *err,
                      size_t errlen)
{
	json_t *labels = json_loads(db_val(res, 0, 19) ? db_val(res, 0, 19) : "{}", 0, NULL);
	json_t *labels0 = json_loads(db_val(res, 0, 20) ? db_val(res, 0, 20) : "{}", 0, NULL);
	const char *parent = json_string_value(json_object_get(labels, "ddp.parent"));
	const char *range = json_string_value(json_object_get(labels0, "ddp.subnet"));
	char subnet[40], gw[20], master[20], rk[16];
	const char *k;
	json_t *v;
	void *tmp;
	int rc = -1;

	if (!parent || !*parent) {
		snprintf(err, errlen,
		         "the node has no label ddp.parent (the interface distributed jobs' "
		         "members use to reach each other): an admin sets it");
		goto out;
	}
	if (ddp_addresses(range, strtoll(db_val(res, 0, 22), NULL, 10), 0, subnet, sizeof(subnet),
	                  gw, sizeof(gw), master, sizeof(master)) < 0 ||
	    ddp_addresses(range, strtoll(db_val(res, 0, 22), NULL, 10), o->rank, subnet,
	                  sizeof(subnet), gw, sizeof(gw), o->addr, sizeof(o->addr)) < 0) {
		snprintf(err, errlen,
		         "the node label ddp.subnet is not an IPv4 range (a.b.c.d/8..27)");
		goto out;
	}
	ddp_net_name(driver_cluster_id(), o->l.net, sizeof(o->l.net));
	o->l.netbody = ddp_net_body(o->l.net, parent, range, driver_cluster_id());
	ddp_env(penv, labels, master, o->members, o->rank);
	snprintf(rk, sizeof(rk), "%d", o->rank);
	json_object_set_new(penv, "GPUCLOUD_JOB_RANK", json_string(rk));
	json_object_foreach_safe(penv, tmp, k, v)
	{
		json_object_del(env, k);
	}
	rc = o->l.netbody ? 0 : -1;
	if (rc < 0)
		snprintf(err, errlen, "out of memory");
out:
	json_decref(labels);
	json_decref(labels0);
	return rc;
}

/* The create body from the launch row (columns: see op_launch). */
static int build_spec(struct op *o, const PGresult *res, char *err, size_t errlen)
{
	json_t *cmd = json_loads(db_val(res, 0, 5), 0, NULL);
	json_t *env = json_loads(db_val(res, 0, 6), 0, NULL);
	json_t *gpus = json_loads(db_val(res, 0, 11), 0, NULL);
	json_t *penv = json_object(), *binds = json_array(), *g, *groups = json_array();
	json_t *classes = json_loads(db_val(res, 0, 23) ? db_val(res, 0, 23) : "[]", 0, NULL);
	struct spec_gpu sg[64];
	struct spec_input in = { 0 };
	char workdir[800], idv[24], csig[300] = "";
	size_t i;
	int rc = -1;

	spec_publish_host(db_val(res, 0, 12), cfg.node_app_bind, o->l.host, sizeof(o->l.host));
	o->l.user_id = o->user_id;
	snprintf(o->l.owner, sizeof(o->l.owner), "%s", o->username);
	instances_network_name(o->user_id, o->l.net, sizeof(o->l.net));
	if (!binds || !penv || !groups ||
	    storage_binds(o->user_id, o->username, binds, err, errlen) < 0 ||
	    storage_class_binds(classes, binds, groups, csig, sizeof(csig), err, errlen) < 0)
		goto out;
	if (o->members > 1 && member_net(o, res, penv, env, err, errlen) < 0)
		goto out;
	memset(sg, 0, sizeof(sg));
	json_array_foreach(gpus, i, g)
	{
		json_t *devs = json_object_get(g, "devices"), *dv;
		size_t d;
		struct spec_gpu *x = &sg[in.ngpus];
		if (in.ngpus >= (int)(sizeof(sg) / sizeof(sg[0])))
			break;
		x->uuid = json_string_value(json_object_get(g, "mig"))
		                  ? json_string_value(json_object_get(g, "mig"))
		                  : json_string_value(json_object_get(g, "uuid"));
		json_array_foreach(devs, d, dv)
		{
			if (x->ndevices < SPEC_MAX_DEVICES)
				x->devices[x->ndevices++] = json_string_value(dv);
		}
		in.ngpus++;
	}
	/* the directory is /home/<user>/jobs/<id>-<name> inside, as outside
	 * below the data root's home/<user> */
	snprintf(workdir, sizeof(workdir), "/home/%s/jobs/%s", o->username, leaf_of(o->dir));
	snprintf(idv, sizeof(idv), "%lld", o->id);
	json_object_set_new(penv, "GPUCLOUD_JOB_ID", json_string(idv));
	json_object_set_new(penv, "GPUCLOUD_JOB_DIR", json_string(workdir));
	json_object_set_new(penv, "GPUCLOUD_HPARAMS_JSON", json_string(db_val(res, 0, 7)));
	{
		/* and one variable per hyperparameter (GPUCLOUD_HP_LR=0.01) */
		json_t *hp = json_loads(db_val(res, 0, 7), 0, NULL);
		template_env(hp, penv);
		json_decref(hp);
	}
	in.cluster = driver_cluster_id();
	in.kind = "job";
	in.id = o->id;
	in.name = o->name;
	in.owner = o->username;
	in.uid = storage_uid(o->user_id);
	in.image_id = o->image_id;
	in.image = db_val(res, 0, 4);
	in.cmd = cmd;
	in.env = env;
	in.platform_env = penv;
	in.binds = binds;
	in.groups = groups;
	in.classes = csig;
	in.gpus = sg;
	in.host = o->l.host;
	in.network = o->l.net;
	in.ipv4 = o->members > 1 ? o->addr : NULL;
	in.workdir = workdir;
	in.cpu_millis = strtoll(db_val(res, 0, 8), NULL, 10);
	in.mem_mib = o->mem_mib;
	in.shm_mib = strtoll(db_val(res, 0, 10), NULL, 10);
	in.pids_limit = cfg.instance_pids_limit;
	o->l.spec = spec_build(&in, o->l.sig, sizeof(o->l.sig));
	if (!o->l.spec) {
		snprintf(err, errlen, "out of memory");
		goto out;
	}
	rc = 0;
out:
	json_decref(cmd);
	json_decref(env);
	json_decref(gpus);
	json_decref(binds);
	json_decref(penv);
	json_decref(groups);
	json_decref(classes);
	return rc;
}

/* Columns: 0 id, 1 user_id, 2 username, 3 image_id, 4 reference,
 * 5 command (JSON), 6 env, 7 hyperparameters, 8 cpu_millis, 9 mem_mib,
 * 10 shm_mib, 11 GPUs (of the rank's node), 12 node url, 13 node id,
 * 14 state, 15 request state, 16 directory, 17 max_runtime_s, 18 members,
 * 19 the node's labels, 20 rank 0's node's labels, 21 the member's state,
 * 22 the job's /27 slot (ddp.h), 23 the class areas to mount
 * (gc_class_mounts()). */
static void launch_row(PGresult *res, enum rc rc, void *arg)
{
	struct op *o = arg;
	char err[400];

	if (rc != RC_OK || PQntuples(res) != 1) {
		op_free(o);
		return;
	}
	o->members = (int)strtol(db_val(res, 0, 18), NULL, 10);
	if (o->members > 1 && db_val(res, 0, 21) && strcmp(db_val(res, 0, 21), "queued") != 0 &&
	    strcmp(db_val(res, 0, 21), "starting") != 0) {
		/* this member started (or ended) before: follow it instead */
		long long id = o->id;
		int rank = o->rank;
		op_free(o);
		op_resume_member(id, rank, 0, NULL, NULL);
		return;
	}
	if (o->members > 1 && !db_val(res, 0, 22)) {
		op_free(o); /* its /27 not taken yet (a concurrent taker): next pass */
		return;
	}
	if (!db_val(res, 0, 15) || strcmp(db_val(res, 0, 15), "allocated") != 0) {
		op_free(o);
		return;
	}
	if (!db_val(res, 0, 3) || !db_val(res, 0, 4)) {
		launch_fail(o, "the job's image was removed from the catalog", "image_removed");
		return;
	}
	if (!db_val(res, 0, 13) || !nodes_engine(strtoll(db_val(res, 0, 13), NULL, 10))) {
		op_free(o); /* no client for the node yet (start-up): a later pass */
		return;
	}
	o->user_id = strtoll(db_val(res, 0, 1), NULL, 10);
	snprintf(o->username, sizeof(o->username), "%s", db_val(res, 0, 2));
	o->image_id = strtoll(db_val(res, 0, 3), NULL, 10);
	o->node_id = strtoll(db_val(res, 0, 13), NULL, 10);
	o->mem_mib = strtoll(db_val(res, 0, 9), NULL, 10);
	o->max_runtime = strtoll(db_val(res, 0, 17), NULL, 10);
	snprintf(o->dir, sizeof(o->dir), "%s", db_val(res, 0, 16));
	if (prepare_dir(o, db_val(res, 0, 7), err, sizeof(err)) < 0) {
		launch_fail(o, err, "job_directory");
		return;
	}
	if (build_spec(o, res, err, sizeof(err)) < 0) {
		launch_fail(o, err, "start_failed");
		return;
	}
	{
		struct workload_change c = { .kind = WL_KIND_JOB,
			                     .id = o->id,
			                     .from = Q | ST,
			                     .to = WL_STARTING,
			                     .reason = "",
			                     .reason_code = "",
			                     .flags = o->rank == 0 ? WL_PLACE : 0,
			                     .node_id = o->node_id,
			                     .container_name = o->name };
		o->pending = 2;
		if (o->members > 1) {
			/* the member's node on record before the create (the
			 * reconciler keeps live members' containers) */
			char ids[24], rk[16], nid[24];
			const char *p[5] = { ids, rk, nid, o->name, o->addr };
			snprintf(ids, sizeof(ids), "%lld", o->id);
			snprintf(rk, sizeof(rk), "%d", o->rank);
			snprintf(nid, sizeof(nid), "%lld", o->node_id);
			o->pending++;
			db_query("UPDATE job_members SET state = 'starting', node_id = $3,"
			         " container_name = $4, address = $5, updated_at = now()"
			         " WHERE job_id = $1 AND rank = $2::int"
			         " AND state IN ('queued', 'starting')",
			         5, p, member_starting_set, o);
		}
		workload_set_state(&c, starting_set, o);
		if (images_ensure(o->image_id, o->node_id, image_ready, o) < 0) {
			snprintf(o->failed, sizeof(o->failed), "out of memory");
			launch_joined(o);
		}
	}
}

static void launch_select(struct op *o)
{
	char ids[24], rk[16];
	const char *p[2] = { ids, rk };

	snprintf(ids, sizeof(ids), "%lld", o->id);
	snprintf(rk, sizeof(rk), "%d", o->rank);
	db_query("SELECT j.id, j.user_id, u.username, j.image_id, im.reference,"
	         " array_to_json(j.command)::text, j.env::text, j.hyperparameters::text,"
	         " j.cpu_millis, j.mem_mib, j.shm_mib,"
	         " COALESCE((SELECT json_agg(json_build_object('uuid', g.uuid, 'idx', g.idx,"
	         "   'devices', g.devices, 'mig', m.uuid) ORDER BY x.first)"
	         "  FROM (SELECT s.gpu_id, s.mig_id, min(a.id) AS first FROM allocations a"
	         "   JOIN slices s ON s.id = a.slice_id"
	         "   WHERE a.request_id = j.request_id AND a.released_at IS NULL"
	         "   AND a.node_id = t.node_id"
	         "   GROUP BY s.gpu_id, s.mig_id) x"
	         "  JOIN gpus g ON g.id = x.gpu_id LEFT JOIN gpu_mig m ON m.id = x.mig_id),"
	         "  '[]')::text,"
	         " n.url, t.node_id, j.state, r.state, j.directory, j.max_runtime_s,"
	         " j.members, n.labels::text, n0.labels::text, m.state, j.ddp_slot,"
	         " gc_class_mounts(j.user_id)"
	         " FROM jobs j JOIN users u ON u.id = j.user_id"
	         " LEFT JOIN images im ON im.id = j.image_id"
	         " LEFT JOIN alloc_requests r ON r.id = j.request_id"
	         /* rank r's node: the r-th of the allocation's nodes by their
	          * first allocation (one node for a job of one member) */
	         " LEFT JOIN LATERAL (SELECT x.node_id FROM (SELECT a.node_id, min(a.id) AS first"
	         "  FROM allocations a WHERE a.request_id = j.request_id"
	         "  AND a.released_at IS NULL GROUP BY a.node_id) x"
	         "  ORDER BY x.first OFFSET $2::int LIMIT 1) t ON true"
	         " LEFT JOIN LATERAL (SELECT a.node_id FROM allocations a"
	         "  WHERE a.request_id = j.request_id AND a.released_at IS NULL"
	         "  ORDER BY a.id LIMIT 1) t0 ON true"
	         " LEFT JOIN nodes n ON n.id = t.node_id LEFT JOIN nodes n0 ON n0.id = t0.node_id"
	         " LEFT JOIN job_members m ON m.job_id = j.id AND m.rank = $2::int"
	         " WHERE j.id = $1",
	         2, p, launch_row, o);
}

/* A distributed job's /27 (ddp.h): the lowest slot no job holds, taken
 * once by whichever member launches first; a concurrent taker of the same
 * slot fails on the unique index and its launch tries again next pass.
 * Ended jobs give theirs back (cleared before, in a statement of its own,
 * so the two never meet in one). */
static void slot_taken(PGresult *res, enum rc rc, void *arg)
{
	(void)res;
	(void)rc;
	launch_select(arg);
}

static void slots_freed(PGresult *res, enum rc rc, void *arg)
{
	struct op *o = arg;
	char ids[24];
	const char *p[1] = { ids };

	(void)res;
	(void)rc;
	snprintf(ids, sizeof(ids), "%lld", o->id);
	db_query(
	        "UPDATE jobs SET ddp_slot = (SELECT g FROM generate_series(0, 255) g"
	        "  WHERE NOT EXISTS (SELECT 1 FROM jobs x WHERE x.ddp_slot = g) ORDER BY g LIMIT 1)"
	        " WHERE id = $1 AND ddp_slot IS NULL",
	        1, p, slot_taken, o);
}

static void op_launch(long long id, int rank, int members)
{
	struct op *o = op_new_rank(id, rank, OP_LAUNCH);

	if (!o)
		return;
	if (members <= 1) {
		launch_select(o);
		return;
	}
	db_query("UPDATE jobs SET ddp_slot = NULL WHERE ddp_slot IS NOT NULL"
	         " AND state NOT IN ('queued', 'starting', 'running', 'stopping')",
	         0, NULL, slots_freed, o);
}

/* ---- retry policy ----
 *
 * A job that ended for a cause that is not its own (RETRYABLE: preempted,
 * its node or container lost) and has retries left is queued again with a
 * new allocation request; it keeps its directory, and the ended attempt's
 * log is kept beside it as output.attempt-<n>.log (renamed before the
 * requeue is written, so a crash between the two renames nothing twice:
 * output.log is gone until the next launch makes it). */
#define RETRYABLE "('preempted', 'node_lost', 'container_lost')"

static void requeued(PGresult *res, enum rc rc, void *arg)
{
	struct op *o = arg;

	if (rc == RC_OK && PQntuples(res) == 1 && strcmp(db_val(res, 0, 0), "0") != 0) {
		log_msg(LOG_INFO, "jobs", NULL, "job %lld: %s → queued (retry %s)", o->id,
		        db_val(res, 0, 1), db_val(res, 0, 2));
		events_publish(EV_ALLOC_CHANGED);
	}
	op_free(o);
}

/* Columns: 0 user_id, 1 username, 2 directory, 3 retries, 4 state. */
static void requeue_row(PGresult *res, enum rc rc, void *arg)
{
	struct op *o = arg;
	struct storage_area a = { 0 };
	char ids[24], rel[600], to[640];
	const char *p[1] = { ids };
	int home;

	if (rc != RC_OK || PQntuples(res) != 1 ||
	    !workload_edge_ok((enum workload_state)workload_state_parse(db_val(res, 0, 4)),
	                      WL_QUEUED)) {
		op_free(o);
		return;
	}
	/* the ended attempt's log keeps its number */
	storage_area_home(&a, strtoll(db_val(res, 0, 0), NULL, 10), db_val(res, 0, 1));
	home = storage_area_open(&a);
	snprintf(rel, sizeof(rel), "jobs/%s", leaf_of(db_val(res, 0, 2)));
	if (home >= 0) {
		int d = paths_open(home, rel, O_DIRECTORY | O_RDONLY, 0);
		if (d >= 0) {
			snprintf(to, sizeof(to), "output.attempt-%lld.log",
			         strtoll(db_val(res, 0, 3), NULL, 10) + 1);
			if (renameat(d, "output.log", d, to) < 0 && errno != ENOENT)
				log_msg(LOG_WARN, "jobs", NULL,
				        "job %lld: cannot keep the log as %s: %s", o->id, to,
				        strerror(errno));
			unlinkat(d, POS_FILE, 0);
			close(d);
		}
		close(home);
	}
	snprintf(ids, sizeof(ids), "%lld", o->id);
	db_query(
	        "WITH j AS (SELECT j.id, j.user_id, j.pool_id, j.priority, j.slices, j.cpu_millis,"
	        "  j.mem_mib, j.image_id, j.state, j.members, j.class_id FROM jobs j WHERE j.id = "
	        "$1"
	        "  AND j.state IN ('failed', 'lost') AND j.desired = 'running'"
	        "  AND j.retries < j.retry_limit AND j.reason_code IN " RETRYABLE " FOR UPDATE),"
	        " req AS (INSERT INTO alloc_requests (user_id, pool_id, owner_kind, owner_id,"
	        "  priority, slices, cpu_millis, mem_mib, cuda_min, nodes, class_id)"
	        "  SELECT j.user_id, j.pool_id, 'job', j.id::text, j.priority,"
	        "  CASE WHEN j.pool_id IS NULL THEN 0 ELSE j.slices END, j.cpu_millis, j.mem_mib,"
	        "  CASE WHEN j.pool_id IS NULL THEN 0 ELSE COALESCE(im.cuda_min, 0) END, j.members,"
	        "  j.class_id"
	        "  FROM j LEFT JOIN images im ON im.id = j.image_id RETURNING id),"
	        /* a distributed job's members start over (their logs too) */
	        " mr AS (UPDATE job_members SET state = 'queued', node_id = NULL,"
	        "  container_id = NULL, address = '', exit_code = NULL, reason = '',"
	        "  reason_code = '', started_at = NULL, finished_at = NULL, updated_at = now()"
	        "  WHERE job_id = (SELECT id FROM j)),"
	        " u AS (UPDATE jobs SET state = 'queued', request_id = (SELECT id FROM req),"
	        "  retries = jobs.retries + 1, reason = 'requeued after: ' || jobs.reason ||"
	        "  ' (retry ' || (jobs.retries + 1) || ' of ' || jobs.retry_limit || ')',"
	        "  reason_code = 'requeued', exit_code = NULL, node_id = NULL,"
	        "  container_id = NULL, started_at = NULL, finished_at = NULL, updated_at = now()"
	        "  FROM j WHERE jobs.id = j.id RETURNING jobs.retries)"
	        " SELECT (SELECT count(*) FROM u), (SELECT state FROM j),"
	        " (SELECT retries FROM u)",
	        1, p, requeued, o);
}

static void op_requeue(long long id)
{
	struct op *o = op_new(id, OP_REQUEUE);
	char ids[24];
	const char *p[1] = { ids };

	if (!o)
		return;
	snprintf(ids, sizeof(ids), "%lld", id);
	db_query("SELECT j.user_id, u.username, j.directory, j.retries, j.state"
	         " FROM jobs j JOIN users u ON u.id = j.user_id WHERE j.id = $1",
	         1, p, requeue_row, o);
}

/* ---- the driver's pass ---- */

/* A queued job that ended before it started (set_state's callback, arg:
 * the id): its members never did; they end with its reason. */
static void members_unstarted(int changed, void *arg)
{
	char ids[24];
	const char *p[1] = { ids };

	if (changed <= 0)
		return;
	snprintf(ids, sizeof(ids), "%lld", (long long)(intptr_t)arg);
	db_query("UPDATE job_members m SET state = 'stopped', reason = j.reason,"
	         " reason_code = j.reason_code, finished_at = now(), updated_at = now()"
	         " FROM jobs j WHERE j.id = $1 AND m.job_id = j.id AND m.state = 'queued'",
	         1, p, NULL, NULL);
}

/* A distributed job's row of the pass (columns: see kind.pass_sql). */
static void decide_members(const PGresult *res, int i)
{
	long long id = strtoll(db_val(res, i, 0), NULL, 10);
	const char *state = db_val(res, i, 1), *desired = db_val(res, i, 2);
	const char *rstate = db_val(res, i, 3), *rwhy = db_val(res, i, 4);
	int preempt = strcmp(db_val(res, i, 5), "t") == 0;
	const char *by = db_val(res, i, 7);
	int members = (int)strtol(db_val(res, i, 8), NULL, 10);
	const char *jreason = db_val(res, i, 9), *jcode = db_val(res, i, 10);
	long live = strtol(db_val(res, i, 11), NULL, 10);
	long started = strtol(db_val(res, i, 12), NULL, 10);
	const char *alive = db_val(res, i, 13);
	int cancel = strcmp(desired, "cancelled") == 0, grace = cfg.instance_stop_grace;
	enum workload_state stop_to = 0;
	char why[400] = "", code[32] = "", cancelled[200];

	snprintf(cancelled, sizeof(cancelled), "cancelled by %s", by && *by ? by : "an admin");
	if (strcmp(state, "failed") == 0 || strcmp(state, "lost") == 0) {
		if (!op_find(id))
			op_requeue(id);
		return;
	}
	if (strcmp(state, "queued") == 0) {
		if (op_find(id))
			return;
		if (cancel) {
			set_state(id, Q, WL_CANCELLED, cancelled, "cancelled", WL_RELEASE,
			          members_unstarted, (void *)(intptr_t)id);
		} else if (strcmp(rstate, "allocated") == 0) {
			for (int r = 0; r < members; r++)
				op_launch(id, r, members);
		} else if (strcmp(rstate, "queued") != 0) {
			snprintf(why, sizeof(why), "the allocation request ended: %s",
			         *rwhy     ? rwhy
			         : *rstate ? rstate
			                   : "it is gone");
			set_state(id, Q, WL_FAILED, why, "released", WL_RELEASE, members_unstarted,
			          (void *)(intptr_t)id);
		}
		return;
	}
	/* starting, running, stopping */
	if (live == 0 && !op_find(id)) {
		settle(id); /* every member ended: the job's end */
		return;
	}
	if (strcmp(state, "starting") == 0 && started >= members)
		set_state(id, ST, WL_RUNNING, "", "", 0, NULL, NULL);
	if (cancel) {
		stop_to = WL_CANCELLED;
		snprintf(why, sizeof(why), "%s", cancelled);
		snprintf(code, sizeof(code), "cancelled");
	} else if (strcmp(state, "stopping") == 0) {
		stop_to = end_for(jcode);
		snprintf(why, sizeof(why), "%s", jreason);
		snprintf(code, sizeof(code), "%s", jcode);
	} else if (*rstate && strcmp(rstate, "allocated") != 0) {
		stop_to = WL_FAILED;
		snprintf(why, sizeof(why), "its allocation ended: %s", *rwhy ? rwhy : rstate);
		snprintf(code, sizeof(code), "released");
	} else if (preempt) {
		stop_to = WL_FAILED;
		snprintf(why, sizeof(why), "preempted by higher-priority work");
		snprintf(code, sizeof(code), "preempted");
		grace = cfg.preempt_grace;
	}
	if (stop_to && strcmp(state, "stopping") != 0)
		set_state(id, ST | R, WL_STOPPING, why, code, 0, NULL, NULL);
	for (int r = 0; r < members; r++) {
		struct op *o = op_find_rank(id, r);
		char rk[16];
		snprintf(rk, sizeof(rk), ",%d,", r);
		if (!o && !strstr(alive, rk))
			continue; /* ended: nothing to follow */
		if (!o && strcmp(state, "starting") == 0 && !stop_to)
			op_launch(id, r, members); /* follows a member already started instead */
		else if (!o)
			op_resume_member(id, r, stop_to, why, code);
		else if (o->kind == OP_WATCH && stop_to)
			member_stop(o, stop_to, why, code, grace);
	}
}

static void decide(const PGresult *res, int i)
{
	long long id = strtoll(db_val(res, i, 0), NULL, 10);
	const char *state = db_val(res, i, 1), *desired = db_val(res, i, 2);
	const char *rstate = db_val(res, i, 3), *rwhy = db_val(res, i, 4);
	int preempt = strcmp(db_val(res, i, 5), "t") == 0;
	long long node = strtoll(db_val(res, i, 6), NULL, 10);
	const char *by = db_val(res, i, 7);
	int cancel = strcmp(desired, "cancelled") == 0;
	struct op *o = op_find(id);
	char why[400], cancelled[200];

	if (strtol(db_val(res, i, 8), NULL, 10) > 1) {
		decide_members(res, i);
		return;
	}
	snprintf(cancelled, sizeof(cancelled), "cancelled by %s", by && *by ? by : "an admin");
	if (!o && (strcmp(state, "failed") == 0 || strcmp(state, "lost") == 0)) {
		op_requeue(id); /* the pass reads these for their retry policy only */
		return;
	}
	if (o) {
		/* a watched job: stop it when it must end early */
		if (o->kind != OP_WATCH || o->stop_to)
			return;
		if (cancel) {
			watch_stop(o, WL_CANCELLED, cancelled, "cancelled",
			           cfg.instance_stop_grace);
		} else if (*rstate && strcmp(rstate, "allocated") != 0) {
			snprintf(why, sizeof(why), "its allocation ended: %s",
			         *rwhy ? rwhy : rstate);
			watch_stop(o, WL_FAILED, why, "released", cfg.instance_stop_grace);
		} else if (preempt) {
			watch_stop(o, WL_FAILED, "preempted by higher-priority work", "preempted",
			           cfg.preempt_grace);
		}
		return;
	}
	if (node && !nodes_engine(node) && strcmp(state, "queued") != 0)
		return; /* the node's client is not loaded yet (start-up): wait */
	if (strcmp(state, "queued") == 0) {
		if (cancel) {
			set_state(id, Q, WL_CANCELLED, cancelled, "cancelled", WL_RELEASE, NULL,
			          NULL);
		} else if (strcmp(rstate, "allocated") == 0) {
			op_launch(id, 0, 1);
		} else if (strcmp(rstate, "queued") != 0) {
			snprintf(why, sizeof(why), "the allocation request ended: %s",
			         *rwhy     ? rwhy
			         : *rstate ? rstate
			                   : "it is gone");
			set_state(id, Q, WL_FAILED, why, "released", WL_RELEASE, NULL, NULL);
		}
		return;
	}
	if (strcmp(state, "starting") == 0 && !cancel) {
		op_launch(id, 0, 1); /* a launch of a process that died: resume it */
		return;
	}
	/* starting (cancelled), running, stopping: follow the container to
	 * its end (a cancel stops it first) */
	op_resume(id, cancel ? WL_CANCELLED : 0, cancelled);
	if (cancel && (o = op_find(id)) && strcmp(state, "stopping") != 0) {
		o->stop_to = WL_CANCELLED;
		snprintf(o->stop_reason, sizeof(o->stop_reason), "%s", cancelled);
		snprintf(o->stop_code, sizeof(o->stop_code), "cancelled");
		set_state(id, ST | R | S, WL_STOPPING, cancelled, "cancelled", 0, NULL, NULL);
		driver_container_stop(node, o->name, cfg.instance_stop_grace, docker_ignore, NULL);
	}
}

static const struct driver_kind kind = {
	.name = "jobs",
	.first_ms = 60,
	.pass_sql = "SELECT j.id, j.state, j.desired, COALESCE(r.state::text, ''),"
	            " COALESCE(r.release_reason, ''), r.preempt_requested_at IS NOT NULL,"
	            " COALESCE(j.node_id, 0), COALESCE(j.cancelled_by, ''),"
	            /* distributed jobs (0027): members, the reason a stop
	             * ends with, members live and members started */
	            " j.members, j.reason, j.reason_code,"
	            " (SELECT count(*) FROM job_members m WHERE m.job_id = j.id"
	            "  AND m.state IN ('queued', 'starting', 'running')),"
	            " (SELECT count(*) FROM job_members m WHERE m.job_id = j.id"
	            "  AND m.started_at IS NOT NULL),"
	            /* the live members' ranks: ",0,2," */
	            " COALESCE((SELECT ',' || string_agg(m.rank::text, ',') || ','"
	            "  FROM job_members m WHERE m.job_id = j.id"
	            "  AND m.state IN ('queued', 'starting', 'running')), '')"
	            " FROM jobs j LEFT JOIN alloc_requests r ON r.id = j.request_id"
	            " WHERE j.state IN ('starting', 'running', 'stopping')"
	            " OR (j.state = 'queued' AND (j.desired <> 'running'"
	            "  OR r.state IS DISTINCT FROM 'queued'))"
	            /* ended for a cause its retry policy requeues */
	            " OR (j.state IN ('failed', 'lost') AND j.retries < j.retry_limit"
	            "  AND j.desired = 'running' AND j.reason_code IN " RETRYABLE ")"
	            " ORDER BY j.id LIMIT 1000",
	.decide = decide,
};

int jobs_init(struct event_base *b)
{
	static struct driver_kind k;

	base = b;
	k = kind;
	k.period_ms = cfg.instance_tick_ms;
	return driver_register(&k);
}

void jobs_shutdown(void)
{
	for (struct op *o = ops; o; o = o->next) {
		if (o->call)
			docker_cancel(o->call);
		o->call = NULL;
		driver_launch_cancel(&o->l);
		if (o->timer)
			event_free(o->timer);
		o->timer = NULL;
		if (o->again)
			event_free(o->again);
		o->again = NULL;
	}
}
