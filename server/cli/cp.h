/* cp.h — `gpucloud cp`: one file to or from a storage area (home, shared,
 * class:ID, job:ID), resumable both ways. */
#ifndef GPUCLOUD_CLI_CP_H
#define GPUCLOUD_CLI_CP_H

#include "cli/client.h"

/* Files larger than this upload through /api/v1/uploads, in parts. */
#define CP_RESUMABLE_OVER (8LL << 20)

/* The command; argv[0] is "cp".  Returns an exit code. */
int cp_main(struct client *c, int argc, char **argv);

#endif
