/* nodes.h — the GPU nodes: one Docker engine client per registered node,
 * and the periodic health check that keeps each node's health, versions and
 * capacity current in the database.
 *
 * The database is the source of truth: every check starts by reading the
 * node list, so nodes added, changed or removed through the API (on any
 * replica) are picked up at the next check.
 */
#ifndef GPUCLOUD_NODES_H
#define GPUCLOUD_NODES_H

#include <event2/event.h>

/* Starts the periodic check on base (every cfg.node_check_interval s; the
 * first one at once).  Returns 0 or -1. */
int nodes_init(struct event_base *base);

/* Runs a check soon (after the API changed a node). */
void nodes_check_soon(void);

/* Stops checking and frees the engine clients. */
void nodes_shutdown(void);

/* 1 when version (e.g. "1.1.12", "v1.1.11-0ubuntu1", "1.17.8") is older
 * than minimum ("1.1.12"); 0 when not; -1 when it cannot be read. */
int nodes_version_older(const char *version, const char *minimum);

/* Writes the PEM files of a TLS node into dir (created 0700; the key 0600)
 * and returns 0, or -1.  key is plaintext PEM. */
int nodes_write_tls(const char *dir, const char *ca, const char *cert, const char *key);

/* Start-up, blocking: when no node exists and url (a unix:// engine) is
 * set, registers it as node "local" so a single machine works out of the
 * box.  Returns 0 or -1. */
int nodes_seed_local(const char *db_url, const char *url);

/* What a launch on node_id came to, for its degraded state (0019).  ok 1:
 * a container started there: the count of consecutive failures goes back
 * to 0 and a degraded node is healthy again.  ok 0: the engine failed a
 * network create, container create or start with an error of its own (an
 * HTTP 5xx; why is its message): the count goes up, and at
 * cfg.node_degrade_after the node becomes degraded (the scheduler places
 * nothing there) until a start succeeds or an admin clears it.  The health
 * check never clears it: an engine that answers /info may still fail every
 * start.  Fire and forget (one statement). */
void nodes_launch_result(long long node_id, int ok, const char *why);

struct docker_engine;
/* The engine client of a node, or NULL when the node is unknown to this
 * process yet (the list loads at the first check, then at every check) or
 * its client could not be made.  Borrowed: valid until control returns to
 * the loop; look it up again for every call (a node whose URL or TLS
 * material changed gets a new client, and the old one's calls end with
 * RC_UNAVAILABLE). */
struct docker_engine *nodes_engine(long long node_id);
/* Frees e from the loop, later: for engines whose own callback is running. */
void nodes_free_engine_later(struct docker_engine *e);

#endif
