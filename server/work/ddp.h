/* ddp.h — distributed jobs: what a member of an N-node job is given.
 *
 * A job with members > 1 runs one container per node (a gang allocation,
 * 0027_job_members.sql).  The members talk to each other over the job's own
 * network, made on each member's node by the launcher (driver.c) from
 * ddp_net_body():
 *
 * Why a macvlan network, one /27 per job.  gloo and NCCL open further
 * connections on random ports besides MASTER_PORT, and each rank
 * advertises the address of its own interface to its peers; so publishing
 * ports of a bridged container cannot work (the advertised bridge address
 * is not routable from another node — nodes are separate hosts and
 * gpucloud runs nothing on them to route it — and no fixed set of ports
 * can be published).  Host networking would work but breaks SPEC §14 (no
 * host network) and opens every port of the job to every container on the
 * node.  So each member gets an address of its own on the nodes' data LAN:
 * a Docker macvlan network (made through the engine API, nothing installed
 * on the node) on the parent interface the node's label ddp.parent names.
 * Docker allows one macvlan network per parent interface, so a node has
 * one such network for the cluster (gc-<cluster8>-ddp, made on first use,
 * swept by the reconciler when empty), declaring DDP_SLOTS /27 subnets of
 * the range in label ddp.subnet (default 10.208.0.0/16; rank 0's node's
 * label counts); a job takes the lowest slot no other job holds
 * (jobs.ddp_slot, given back when it ends), rank r the 2+r-th address of
 * that /27 (its gateway, the first, is nobody); MASTER_ADDR is rank 0's
 * and MASTER_PORT fixed.
 * Keeping other tenants out: a job's members are alone in their /27, and
 * a member's only route outside it is the /27's gateway, which does not
 * exist: another job's member (another /27) cannot reach it, and no
 * container can change that — every capability is dropped, so no
 * NET_ADMIN/NET_RAW for addresses, routes, ARP or raw frames.  A container
 * on a user's bridge network reaches the LAN only through its node, whose
 * kernel never delivers to macvlan children of its own parent.  Where the
 * LAN has hosts that are not nodes, ddp.parent should name an interface
 * (or VLAN sub-interface) kept for the nodes.  Every other rule of SPEC
 * §14 applies unchanged (spec.c).  Limit: DDP_SLOTS distributed jobs at
 * once (fewer when ddp.subnet is smaller than a /19); one more waits for a
 * slot in starting.
 *
 * Pure functions: no I/O, unit-tested without an engine.
 */
#ifndef GPUCLOUD_DDP_H
#define GPUCLOUD_DDP_H

#include <stddef.h>

#include <jansson.h>

#define DDP_MAX_MEMBERS    16
#define DDP_MASTER_PORT    29500
#define DDP_DEFAULT_SUBNET "10.208.0.0/16"
#define DDP_SLOTS          256

/* The /27 of slot (modulo the range's /27s) in range (a.b.c.d/p,
 * 8 <= p <= 27; NULL or "": the default; at most its first DDP_SLOTS /27s
 * are used), into
 * subnet ("a.b.c.d/27") and gateway (its first address), and member rank's
 * address into addr.  Returns 0, or -1 when range is not such a CIDR or
 * rank is out of 0..15. */
int ddp_addresses(const char *range, long long slot, int rank, char *subnet, size_t subnetlen,
                  char *gateway, size_t gatewaylen, char *addr, size_t addrlen);

/* The cluster's distributed-job network on a node: gc-<cluster8>-ddp. */
void ddp_net_name(const char *cluster, char *out, size_t outlen);

/* Its /networks/create body: macvlan on parent (the node's ddp.parent),
 * the /27s of range, gpucloud.* labels.  NULL when range is bad or out of
 * memory. */
json_t *ddp_net_body(const char *name, const char *parent, const char *range, const char *cluster);

/* Sets the torchrun-style variables of member rank of world members into
 * env (an object): MASTER_ADDR, MASTER_PORT, WORLD_SIZE, RANK, NODE_RANK,
 * LOCAL_RANK (0), NPROC_PER_NODE and LOCAL_WORLD_SIZE (1: one process per
 * member), and the NCCL/gloo settings the node's labels imply:
 *   nccl.socket_ifname=X  → NCCL_SOCKET_IFNAME=X and GLOO_SOCKET_IFNAME=X
 *                           (default eth0: the job network, the member's
 *                           only interface besides lo)
 *   ib=false              → NCCL_IB_DISABLE=1
 *   nccl.<name>=V         → NCCL_<NAME>=V (name: a-z, 0-9, '_')
 * labels may be NULL. */
void ddp_env(json_t *env, const json_t *labels, const char *master_addr, int members, int rank);

#endif
