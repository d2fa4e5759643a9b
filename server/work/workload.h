/* workload.h — the one state machine of every workload (instances,
 * TensorBoards and jobs): states as an enum, the edges between them in one
 * table, and the one function that changes a state.
 *
 * Instances: queued → pulling → creating → running → stopping → stopped,
 * and failed (with a reason), lost (the container vanished), deleted (the
 * row is kept for accounting).  Jobs run to an end: queued → starting
 * (pull, create, start) → running → succeeded | failed | cancelled | lost,
 * through stopping when a cancel or the runtime limit stops them.  The
 * database stores the state's name (instances.state, jobs.state); the
 * names below are exactly those.
 */
#ifndef GPUCLOUD_WORKLOAD_H
#define GPUCLOUD_WORKLOAD_H

enum workload_state {
	WL_QUEUED,
	WL_PULLING,
	WL_CREATING,
	WL_RUNNING,
	WL_STOPPING,
	WL_STOPPED,
	WL_FAILED,
	WL_LOST,
	WL_DELETED,
	WL_STARTING,  /* jobs: pull, create, start */
	WL_SUCCEEDED, /* jobs: exited 0 */
	WL_CANCELLED, /* jobs: cancelled by a user */
	WL__COUNT
};

/* A set of states (the states a change may start from). */
#define WL_BIT(s) (1u << (s))

/* The state's name as stored ("queued"), or "?" for no state. */
const char *workload_state_name(enum workload_state s);

/* The state named s, or -1. */
int workload_state_parse(const char *s);

/* 1 when to may follow from (the edges). */
int workload_edge_ok(enum workload_state from, enum workload_state to);

/* workload_change.flags */
enum {
	WL_RELEASE = 1 << 0,         /* release the allocation request, forget the ports */
	WL_SETTLE = 1 << 1,          /* a final state: desired running becomes stopped */
	WL_STOPPED_AT = 1 << 2,      /* stopped_at = now() */
	WL_DELETED_AT = 1 << 3,      /* deleted_at = now() */
	WL_CLEAR_CONTAINER = 1 << 4, /* container_id = NULL */
	WL_EXIT_CODE = 1 << 5,       /* exit_code = exit_code */
	WL_PLACE = 1 << 6,           /* node_id = node_id, container_name = container_name */
};

/* Whose record a change writes. */
enum workload_kind { WL_KIND_INSTANCE, WL_KIND_JOB };

/* One state change of one workload. */
struct workload_change {
	enum workload_kind kind; /* the table: instances (the default) or jobs */
	long long id;
	unsigned from; /* WL_BIT()s: the row must be in one of them */
	enum workload_state to;
	const char *reason;      /* NULL keeps the stored reason */
	const char *reason_code; /* jobs: NULL keeps the stored code */
	unsigned flags;
	int exit_code;              /* WL_EXIT_CODE */
	long long node_id;          /* WL_PLACE */
	const char *container_name; /* WL_PLACE */
};

/* Called with the rows changed (0: the workload was not in from) or -1 on
 * a database error or a refused edge. */
typedef void (*workload_set_cb)(int changed, void *arg);

/* Moves c->id from one of c->from to c->to in one statement, logging
 * "from → to" when it changed; refuses (cb(-1), logged as a bug) when an
 * edge from one of c->from to c->to is not in the table.  WL_RELEASE also
 * publishes EV_ALLOC_CHANGED.  cb may be NULL; c is copied.
 * Jobs: running sets started_at, a final state finished_at; WL_SETTLE,
 * WL_STOPPED_AT and WL_DELETED_AT mean nothing for them. */
void workload_set_state(const struct workload_change *c, workload_set_cb cb, void *arg);

/* Records an action the system took by itself in the audit log (actor
 * "system", gc_audit_system: 0035): action like "instance.lost", target
 * like "instance:12", the reason shown with it.  Fire and forget. */
void workload_audit(const char *action, const char *target, const char *reason);

#endif
