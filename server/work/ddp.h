/* ddp.h — distributed jobs: what a member of an N-node job is given.
 *
 * A job with members > 1 runs one container per node (a gang allocation,
 * 0027_job_members.sql).  The members talk to each other over the job's own
 * network, made on each member's node by the launcher (driver.c) from
 * ddp_net_body():
 *
 * Why a per-job macvlan network.  gloo and NCCL open further connections
 * on random ports besides MASTER_PORT, and each rank advertises the
 * address of its own interface to its peers; so publishing ports of a
 * bridged container cannot work (the advertised bridge address is not
 * routable from another node — nodes are separate hosts and gpucloud runs
 * nothing on them to route it — and no fixed port set can be published).
 * Host networking would work but breaks SPEC §14 (no host network) and
 * opens every port of the job to every container on the node.  So each
 * member gets an address of its own on the nodes' data LAN: a Docker
 * macvlan network (created through the engine API; nothing installed on
 * the node) on the parent interface the node's label ddp.parent names, in
 * a /27 of the cluster's job range (label ddp.subnet, default
 * 10.208.0.0/16) chosen by the job's id, rank r at the 2+r-th address.
 * MASTER_ADDR is rank 0's address; MASTER_PORT is fixed (each job has its
 * own addresses).  Keeping other tenants out: the job's addresses are in a
 * subnet of its own; a container on a user's bridge network reaches the
 * LAN only through its node, whose kernel never delivers to macvlan
 * children of its own parent, and has no route into another job's /27
 * (no container can add one: every capability is dropped, so no
 * NET_ADMIN/NET_RAW for routes, ARP or raw frames).  Where the LAN is
 * shared with hosts that are not nodes, ddp.parent may name a VLAN
 * sub-interface (eth1.<vlan>) to keep the job range on its own segment.
 * Every other hardening rule of SPEC §14 applies unchanged (spec.c).
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

/* The job's /27 in range (a.b.c.d/p, p <= 27; NULL or "": the default) by
 * its id, into subnet ("a.b.c.d/27") and gateway (its first address), and
 * member rank's address into addr.  Returns 0, or -1 when range is not an
 * IPv4 CIDR with a prefix of 8 to 27 or rank is out of 0..15. */
int ddp_addresses(const char *range, long long job_id, int rank, char *subnet, size_t subnetlen,
                  char *gateway, size_t gatewaylen, char *addr, size_t addrlen);

/* The job's network name: gc-<cluster8>-job-<id>-net. */
void ddp_net_name(const char *cluster, long long job_id, char *out, size_t outlen);

/* The /networks/create body of the job's network on one node (parent: the
 * node's ddp.parent label).  NULL when out of memory. */
json_t *ddp_net_body(const char *name, const char *parent, const char *subnet,
                     const char *gateway, const char *cluster, const char *owner,
                     long long user_id, long long job_id);

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
