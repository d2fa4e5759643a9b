/* instances.h — interactive instances: the leader's driver that moves
 * instances through the workload state machine (workload.h) on the nodes'
 * engines.
 *
 * Users (the API) only write the desired state
 * (running, stopped, deleted) and queue allocation requests; the driver on
 * the scheduler leader does the engine work, so a crash at any point is
 * resumed by the next leader from the database: container names are
 * deterministic (gc-<cluster8>-inst-<id>), so a create retried after a
 * crash finds the container it made before.
 */
#ifndef GPUCLOUD_INSTANCES_H
#define GPUCLOUD_INSTANCES_H

#include <event2/event.h>

/* Starts the driver's timer (cfg.instance_tick_ms) and loads the cluster
 * id.  Returns 0 or -1. */
int instances_init(struct event_base *base);

/* A driver pass soon (an instance was created or changed, or the scheduler
 * allocated something). */
void instances_kick(void);

/* Stops the timer; in-flight engine calls are cancelled with the engines. */
void instances_shutdown(void);

/* This database's cluster id (the gpucloud.cluster label of our
 * containers), "" until loaded. */
const char *instances_cluster_id(void);

/* The deterministic container name of instance id into out. */
void instances_container_name(long long id, char *out, size_t outlen);

/* The name of a user's network on every node: gpucloud-<cluster>-u<id>
 * (the whole cluster id: a shared network would join two tenants).  Each
 * user's containers on a node share it and reach each other; Docker's
 * isolation rules drop traffic between networks, so users do not. */
void instances_network_name(long long user_id, char *out, size_t outlen);

/* 1 while a launch on the node is under way in this process (it may be
 * about to use a network the listing shows as empty). */
int instances_launching(long long node_id);

/* 1 while this process runs an engine operation on instance id (the
 * reconciler leaves such instances alone). */
int instances_op_busy(long long id);

#endif
