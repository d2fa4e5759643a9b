/* gpucloud.h — what gpucloud.c shares with the other commands' files. */
#ifndef GPUCLOUD_CLI_GPUCLOUD_H
#define GPUCLOUD_CLI_GPUCLOUD_H

#include "cli/client.h"

/* Options every command takes (getopt_long entries). */
#define COMMON_OPTS                                                                     \
	{ "json", no_argument, NULL, 'J' }, { "server", required_argument, NULL, 'S' }, \
	{                                                                               \
		"help", no_argument, NULL, 'h'                                          \
	}

/* Handles a common option: 1 when opt was one, -1 after printing cmd's
 * --help, 0 when it is the command's own. */
int gpucloud_common_opt(struct client *c, int opt, const char *cmd);

/* Prints "gpucloud CMD: message" and the --help hint; returns EXIT_USAGE. */
int usage_error(const char *cmd, const char *fmt, ...) __attribute__((format(printf, 2, 3)));

#endif
