/* place.h — the scheduler's placement engine: a pure function from a
 * snapshot of the cluster and the queue to decisions.
 *
 * No I/O, no allocation beyond a context made once per pass, no clock: the
 * caller (the scheduler, which owns the database side and the leader lock)
 * fills a struct place_input, calls place_run(), and commits the decisions
 * in one transaction.  Being pure makes every policy testable with exact
 * outcomes and benchmarkable without engines.
 *
 * Policy, in order:
 *  1. Order: priority class (exam < normal < scavenger in enum order), then
 *     fair share (less recent GPU-seconds of the user first), then submit
 *     time, then id.
 *  2. A request asks for `slices` slices of one pool on each of `nodes`
 *     nodes (gang: all nodes or nothing), plus cpu and memory per node.
 *     Only schedulable nodes with enough free slices of that pool and free
 *     cpu/memory qualify.  Quota: a request whose user would exceed
 *     `quota_slices` live slices (or `quota_cpu` millicores, `quota_mem` MiB)
 *     in that pool waits (reason QUOTA).
 *  3. Packing (best fit): among qualifying nodes, the one with the fewest
 *     free slices of the pool left after placing, ties by lowest node index;
 *     within a node, slices on GPUs that already have used slices first,
 *     then lowest slice index — so whole GPUs and whole nodes stay free.
 *  4. Backfill: when a request cannot be placed, the node where it would
 *     fit best once resources free up is reserved for it (for a gang, its
 *     best `nodes` nodes); later, lower-ordered requests may still be placed
 *     but not on reserved nodes.  A scavenger request never gets a reservation.
 *  5. Preemption: an exam or normal request that cannot be placed may name
 *     running scavenger allocations (of other users) whose release would make
 *     it fit on one node (fewest victims, then youngest first); it is then
 *     pending with reason PREEMPTING and those allocations are returned as
 *     victims (the owner stops them with a grace period; a later pass places
 *     the request).
 *  6. Every request not placed gets a reason code, a human sentence and its
 *     position among the still-pending requests of its pool (1-based).
 *  6b. A request that no node could ever hold as asked, counting nodes that
 *     are down or draining (they may come back) but not cordoned ones
 *     (taken out, or declared dead), waits with reason CANNOT_RUN and a
 *     sentence saying what it could ask instead (place_fit_say()); the API
 *     refuses such a request at submit with the same computation
 *     (place_max_fit()).  TOO_BIG is left for a request that only a node
 *     not taking work now (down, draining) could hold.
 *  6c. Classes (0028): a request in a class's context (class_id) is held
 *     to student ⊂ class ⊂ pool instead of its user's own quota: the
 *     student's class limits (CLASS_LIMIT), the class's allocation
 *     (CLASS_FULL), outside lab-session windows the class's off-hours share
 *     and inside them the larger of that share and the reservation
 *     (CLASS_SESSION); a spent class or student GPU-hour budget, or a class
 *     the user is no longer in, waits with the caller's sentence
 *     (CLASS_BUDGET, CLASS_CLOSED).  Inside a window the reservation's
 *     unused slices are held for the class: no other work (other users', or
 *     another class's) may take them (RESERVED_CLASS).  Class work counts
 *     against the class and the student, not the user's own quota.
 *  7. A request without a pool (pool_id 0, slices 0: CPU-only work such as a
 *     TensorBoard) asks for cpu and memory on one node: any schedulable
 *     unreserved node with that much free (best fit: least cpu left after
 *     placing, then lowest index); its quota counts under pool 0.  It never
 *     preempts and never reserves.
 */
#ifndef GPUCLOUD_PLACE_H
#define GPUCLOUD_PLACE_H

#include <stddef.h>
#include <stdint.h>

enum place_priority { PRIO_EXAM = 0, PRIO_NORMAL = 1, PRIO_SCAVENGER = 2 };

enum place_reason {
	REASON_NONE = 0,       /* placed */
	REASON_QUOTA,          /* the user's live slices in the pool + this > quota */
	REASON_NO_NODES,       /* the pool has no schedulable node at all */
	REASON_TOO_BIG,        /* no node could ever hold it (slices, cpu or memory per node) */
	REASON_CAPACITY,       /* would fit on an empty node, none has room now */
	REASON_GANG,           /* fewer than `nodes` nodes have room now */
	REASON_RESERVED,       /* room exists only on nodes reserved for an earlier request */
	REASON_PREEMPTING,     /* victims named; waits for them to stop */
	REASON_CUDA,           /* too few nodes of the pool have a driver for its CUDA */
	REASON_CANNOT_RUN,     /* no node, even down or draining, could ever hold it as
	                    * asked, or it asks more than the user's limit */
	REASON_DEGRADED,       /* like NO_NODES, but some of its nodes are degraded: up and
	                    * active, their engines failing to start containers */
	REASON_CLASS_LIMIT,    /* the student's class limit (slices, cpu, memory) */
	REASON_CLASS_FULL,     /* the class's allocation (slices, cpu, memory) */
	REASON_CLASS_SESSION,  /* the class's off-hours share, or its lab-session
	                        * reservation while one is open */
	REASON_CLASS_BUDGET,   /* a class or student GPU-hour budget is spent */
	REASON_CLASS_CLOSED,   /* the class is archived, or the user left it */
	REASON_RESERVED_CLASS, /* the free slices are held for a class's lab session */
};

/* A class with an allocation (0028), for work in its context; in
 * place_input.classes sorted by id. */
struct place_class {
	int64_t id;
	int64_t pool_id;
	const char *name;  /* for sentences (borrowed) */
	int alloc_slices;  /* live slices of its work at most */
	int64_t alloc_cpu; /* millicores of its work at most; 0 = no cap */
	int64_t alloc_mem; /* MiB; 0 = no cap */
	int offhours;      /* slices outside lab sessions; < 0 = the whole allocation */
	int reserved;      /* slices held for it now (open lab windows); 0 = none */
	const char *until; /* when the open window ends, for sentences ("11:30 UTC") */
};

struct place_node {
	int64_t id;
	int schedulable;  /* up and active (not draining/cordoned/down), not degraded */
	int degraded;     /* up and active, but degraded (so not schedulable) */
	int64_t cpu_free; /* millicores */
	int64_t mem_free; /* MiB */
	int64_t cpu_total;
	int64_t mem_total;
	int cuda_max; /* newest CUDA its driver supports (12.4 = 12040); 0 = unknown */
	int cordoned; /* taken out by an admin (or declared dead): its capacity
	               * does not count even for "could it ever fit" */
};

struct place_slice {
	int64_t id;
	int node; /* index into nodes[] */
	int64_t pool_id;
	int gpu;         /* index of its GPU within the node (for packing) */
	int64_t used_by; /* allocation (request id) holding it, 0 when free */
};

struct place_request {
	int64_t id;
	int64_t user_id;
	int64_t pool_id;
	enum place_priority priority;
	int slices;          /* per node, >= 1 (0 with pool_id 0: no GPUs) */
	int nodes;           /* >= 1; > 1 is a gang */
	int64_t cpu;         /* millicores per node */
	int64_t mem;         /* MiB per node */
	int64_t submitted;   /* any monotonic order, e.g. unix microseconds */
	int64_t user_recent; /* the user's recent GPU-seconds (fair share) */
	int quota_slices;    /* max live slices of this user in this pool; < 0 = none */
	int64_t quota_cpu;   /* max live millicores of this user in this pool; 0 = none */
	int64_t quota_mem;   /* max live MiB of this user in this pool; 0 = none */
	int cuda_min;        /* CUDA its image needs (12.4 = 12040); 0 = none.  Never
	                      * placed on a node whose known cuda_max is lower */
	int quota_block;     /* 1: waits with REASON_QUOTA whatever is in use (no
	                      * quota at all, the pool closed to the role); 2: asks
	                      * more than the user's limit allows even with nothing
	                      * else in use (REASON_CANNOT_RUN).  The caller has the
	                      * sentence */
	int64_t class_id;    /* 0, or its class (in place_input.classes; work of a
	                      * class missing there waits with CLASS_CLOSED) */
	int student_slices;  /* the student's class limit; < 0 = the class's */
	int64_t student_cpu; /* millicores; 0 = the class's */
	int64_t student_mem; /* MiB; 0 = the class's */
	int class_block;     /* 1: a class or student GPU-hour budget is spent
	                      * (CLASS_BUDGET); 2: the class is closed to the user
	                      * (CLASS_CLOSED).  The caller has the sentence */
};

/* A running allocation, for quota counting and preemption. */
struct place_running {
	int64_t request_id;
	int64_t user_id;
	int64_t pool_id;
	enum place_priority priority;
	int node;         /* index into nodes[] */
	int slices;       /* slices it holds on that node */
	int64_t cpu, mem; /* what it holds on that node */
	int64_t started;  /* for "youngest first" */
	int64_t class_id; /* 0, or the class whose work it is */
};

struct place_input {
	struct place_node *nodes;
	int nnodes;
	struct place_slice *slices; /* all slices of all pools */
	int nslices;
	struct place_request *queue; /* pending requests, any order */
	int nqueue;
	struct place_running *running;
	int nrunning;
	const struct place_class *classes; /* sorted by id; may be NULL */
	int nclasses;
};

/* One decision per queued request, in the order they were considered. */
struct place_decision {
	int64_t request_id;
	enum place_reason reason; /* REASON_NONE when placed */
	int position;             /* pending only: 1-based within its pool */
	char message[240];        /* human sentence, e.g.
					 * "no node has 2 free slices of this pool now (most free: 1)" */
	int nchosen;              /* placed: slices chosen (slices * nodes) */
	int64_t node_id;          /* placed without slices (pool 0): the node */
	int64_t *chosen;          /* slice ids, grouped by node */
	int nvictims;             /* PREEMPTING: request ids to stop */
	int64_t *victims;
};

struct place_result {
	struct place_decision *decisions; /* nqueue entries */
	int ndecisions;
	int placed; /* how many were placed */
};

/* Runs one pass.  Does not modify in (slices marked used during the pass are
 * tracked internally).  Returns a result to free with place_result_free(),
 * or NULL when out of memory.  Deterministic: the same input gives the same
 * result. */
struct place_result *place_run(const struct place_input *in);
void place_result_free(struct place_result *r);

/* Stable code for a reason ("quota", "capacity", ...). */
const char *place_reason_code(enum place_reason r);

/* ---- could a request ever fit? ---- */

/* One node as place_max_fit() sees it: the slices of the pool on it (0 for
 * CPU-only work), its cpu (millicores) and memory (MiB) in all.  0 cpu or
 * memory: not known yet (never checked), which limits nothing. */
struct place_cap {
	int slices;
	int64_t cpu, mem;
};

enum place_fit {
	FIT_OK = 0,   /* at least `nodes` nodes could hold it */
	FIT_NO_NODES, /* no node at all: nothing to say (an admin may add one) */
	FIT_SLICES,   /* no node has that many slices of the pool */
	FIT_CPU,      /* none with the slices has that much cpu */
	FIT_MEM,      /* none with the slices and cpu has that much memory */
	FIT_NODES,    /* fewer than `nodes` nodes could hold it (a gang) */
};

/* A request's shape per node, and what place_max_fit() found. */
struct place_fit_r {
	int slices, nodes;
	int64_t cpu, mem;
	enum place_fit fit;
	int64_t most; /* the most the failing dimension allows, the earlier ones
	               * as asked: slices, millicores, MiB or nodes */
};

/* Whether a request of f->slices slices, f->cpu millicores and f->mem MiB
 * on each of f->nodes nodes could ever fit on caps[0..n) (each node whole
 * and empty), checked in that order: slices, cpu, memory, nodes.  Sets
 * f->fit and f->most, returns f->fit.  Pure; no allocation. */
enum place_fit place_max_fit(const struct place_cap *caps, int n, struct place_fit_r *f);

/* What a failed fit says: msg (e.g. "no node in pool 'a100' can ever give
 * 16000 millicores of cpu: the largest has 2 CPU cores") and hint ("ask for
 * at most 2000 millicores of cpu"); where names the place ("pool 'a100'",
 * "this pool", "the cluster").  Either buffer may be NULL. */
void place_fit_say(const struct place_fit_r *f, const char *where, char *msg, size_t mlen,
                   char *hint, size_t hlen);

#endif
