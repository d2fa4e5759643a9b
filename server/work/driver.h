/* driver.h — the leader's workload driver loop, written once for every
 * workload kind.
 *
 * A kind (instances today, with TensorBoards among them; jobs next)
 * registers a small table: the statement that reads its workloads whose
 * state and desired state disagree, and decide(), which starts at most one
 * engine operation for such a row.  The driver owns the rest of the loop:
 * one cron section per kind at the kind's period, brought forward by the
 * wake-ups EV_WORKLOAD_CHANGED and EV_ALLOC_GRANTED (a kick while a pass
 * is out gives one more pass right after it), passes on the leader only,
 * and the cluster identity every container name and label carries.
 *
 * The engine steps of a launch are written once here too (the launcher
 * below): the user's network on the node, the hardened create with the
 * deterministic name (a 409 inspects the container there and reuses it
 * when its gpucloud.sig matches, else replaces it once), the user's
 * account in the container's /etc/passwd and /etc/group (passwd.c), start,
 * and the published ports read back.  A kind keeps its database writes and calls
 * the launcher between them.
 *
 * Stop with a grace and remove, the two engine calls every kind makes at
 * the end of a container, are here too (driver_container_stop/_remove);
 * the pull step is images_ensure() beside the kind's own state write.
 */
#ifndef GPUCLOUD_DRIVER_H
#define GPUCLOUD_DRIVER_H

#include <jansson.h>
#include <libpq-fe.h>

#include "engine/docker.h"

struct driver_kind {
	const char *name; /* logs and the cron section */
	int period_ms;    /* the pass period (e.g. cfg.instance_tick_ms) */
	int first_ms;     /* the first pass after start-up */
	/* the pass: rows whose state and desired state disagree (no
	 * parameters; ordered, bounded) */
	const char *pass_sql;
	/* one row of the pass, on the leader: start at most one operation */
	void (*decide)(const PGresult *res, int row);
};

/* Registers kind (a static table, borrowed for good) on the cron and the
 * wake-ups; cron_init() first.  Returns 0 or -1. */
int driver_register(const struct driver_kind *kind);

/* This database's cluster id (the gpucloud.cluster label of our
 * containers), "" until the first pass loaded it. */
const char *driver_cluster_id(void);

/* ---- the launcher ---- */

struct driver_launch_ops {
	/* the launch failed (why: for the workload's reason); the launch is
	 * over and may be freed */
	void (*failed)(void *arg, const char *why);
	/* the container exists (l->cid): the kind records what it must, then
	 * calls driver_launch_start() (or drops the launch) */
	void (*created)(void *arg);
	/* started; ports: [{"name","port","host","host_port"}] as JSON text
	 * (borrowed); the launch is over and may be freed */
	void (*running)(void *arg, const char *ports);
};

/* One launch: the kind fills the first block, the launcher the rest.
 * Embedded in the kind's operation; it must stay put until a callback
 * said it is over, or driver_launch_cancel(). */
struct driver_launch {
	long long id;      /* the workload (logs) */
	long long node_id; /* where */
	long long user_id; /* owner: its network, labelled with its name */
	char owner[64];
	char name[96];     /* the container's deterministic name */
	char net[128];     /* the user's network on the node */
	char host[256];    /* address app ports are published on */
	char sig[600];     /* gpucloud.sig of the spec */
	json_t *spec;      /* the create body (owned: freed by driver_launch_release) */
	json_t *app_ports; /* [{"name","port"}] (owned likewise) */
	/* the create body of net when it is not the user's bridge network (a
	 * distributed job's own network, jobs.c); owned likewise */
	json_t *netbody;
	const struct driver_launch_ops *ops;
	void *arg;

	char cid[80];          /* the container's id once created */
	double t_eng0, t_eng1; /* the engine's calls: first sent, last answered (ms) */
	int recreated;         /* removed a mismatching container once */
	int netcall;           /* this launch's network create is out */
	int netwait;           /* waits for another launch's create of net */
	int netretried;        /* re-made the network once (the reconciler raced) */
	int netfails;          /* network creates the engine failed (5xx) so far */
	int linked;
	int fresh;         /* the container was created by this launch (not reused) */
	char image_id[80]; /* its image's id (sha256:...), once inspected */
	int etc_known;     /* the account files came from the image's remembered ones */
	/* the account files read out of the container before its start:
	 * passwd, group (driver.c) */
	struct driver_etc {
		char *text; /* owned; NULL when not read or left alone */
		size_t len;
		unsigned mode;
		long long uid, gid;
	} etc[2];
	int etc_at; /* the one being read */
	struct docker_call *call;
	struct driver_launch *next;
};

/* Starts the engine steps (network, create...); the outcome comes through
 * l->ops. */
void driver_launch_begin(struct driver_launch *l);
/* Goes on after ops->created: the user's account in the container, start,
 * read the ports back. */
void driver_launch_start(struct driver_launch *l);
/* Stops the launch without a callback (cancels its engine call). */
void driver_launch_cancel(struct driver_launch *l);
/* Frees what l owns (spec, app_ports); l itself is the caller's. */
void driver_launch_release(struct driver_launch *l);

/* The engine's message from an error body, or err, or fallback, into out. */
void driver_engine_msg(enum rc rc, const char *body, size_t len, const char *err,
                       const char *fallback, char *out, size_t outlen);

/* ---- the end of a container ---- */

/* POST /containers/<name>/stop?t=grace on node_id (SIGTERM, grace seconds,
 * SIGKILL); cb as docker_request's, with a timeout of grace + 30 s.
 * Returns the call (cancel with docker_cancel) or NULL when the node has
 * no engine client or the call could not start (cb never fires). */
struct docker_call *driver_container_stop(long long node_id, const char *name, int grace,
                                          docker_cb cb, void *arg);

/* DELETE /containers/<name>?force=1&v=1 on node_id (kills it first); cb,
 * return value as driver_container_stop's.  A 404 means it was gone. */
struct docker_call *driver_container_remove(long long node_id, const char *name, docker_cb cb,
                                            void *arg);

/* Forgets the kinds (their sections go with the cron). */
void driver_shutdown(void);

#endif
