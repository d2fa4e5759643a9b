/* quota.h — storage usage accounting: periodic and on-demand scans of
 * areas on worker threads, and the clean-up of expired uploads.
 *
 * Usage (bytes = allocated blocks, each hard-linked inode once; files =
 * entries) is written to storage_areas; limits and reservations live in
 * the database (0009_storage.sql), which is what enforces them.
 */
#ifndef GPUCLOUD_QUOTA_H
#define GPUCLOUD_QUOTA_H

#include <event2/event.h>

#include "storage/storage.h"

/* Starts the once-a-second timer.  Returns 0 or -1. */
int quota_init(struct event_base *base);
void quota_shutdown(void);

/* Asks for a rescan of area soon (after gpucloudd changed it). */
void quota_dirty(const struct storage_area *a);

/* Removes the staging file of an upload on a worker (fire and forget). */
void quota_unlink_staging(const char *name);

#endif
