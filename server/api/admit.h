/* admit.h — before work is queued for the scheduler (a raw allocation, an
 * instance): would the caller's limits ever admit it, and could any node
 * ever hold it?  A request that fails either is refused at once with the
 * reason and what it could ask instead, rather than waiting for good.
 */
#ifndef GPUCLOUD_ADMIT_H
#define GPUCLOUD_ADMIT_H

struct http_req;

struct admit {
	const char *pool; /* borrowed until done; NULL: CPU-only work */
	int slices;       /* per node (0 for CPU-only work) */
	int nodes;        /* >= 1 */
	long long cpu;    /* millicores per node */
	long long mem;    /* MiB per node */
	/* work in a class's context (0 none): the class's and the student's
	 * limits (gc_class_limit, 0030) replace the user's own quota; pool
	 * NULL means the class's pool, and after the check pool points at the
	 * pool's name in pool_buf */
	long long class_id;
	long long image_id; /* the class may allow only some images */
	char pool_buf[64];
	/* it may be queued (or the pool does not exist: the caller's own
	 * statement says so) */
	void (*ok)(struct http_req *r);
	struct http_req *r; /* set by admit_check() */
};

/* Checks f (which lives in r's state until f->ok runs or r is answered)
 * against the caller's effective quota (gc_request_limit(): 403 forbidden,
 * 422 exceeds_quota) and the nodes of the pool that are not cordoned, down
 * or draining ones included (place_max_fit(): 422 never_fits), and replies
 * with the reason, a hint and details [{what, most, asked, pool}]; or calls
 * f->ok(r). */
void admit_check(struct http_req *r, struct admit *f);

#endif
