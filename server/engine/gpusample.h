/* gpusample.h — periodic GPU utilisation sampling on the nodes.
 *
 * On the leader, every cfg.gpu_sample_interval seconds, each node that is up
 * and has measured (discovered, not declared) GPUs is asked how busy they
 * are: by default by running
 *   nvidia-smi --query-gpu=uuid,utilization.gpu,memory.used --format=csv,noheader,nounits
 * in a short-lived container of cfg.discovery_image through the node's
 * NVIDIA runtime (what discovery does), or, when cfg.gpu_dcgm_url is set, by
 * reading that DCGM exporter's /metrics instead (no container).  Each answer
 * becomes rows of gpu_samples (0033) for that node's measured GPUs; declared
 * GPUs never get a row.  Idle reclamation, accounting and /metrics read them.
 */
#ifndef GPUCLOUD_GPUSAMPLE_H
#define GPUCLOUD_GPUSAMPLE_H

#include <stddef.h>

/* Registers the cron section (nothing when the interval is 0 or neither
 * discovery_image nor gpu_dcgm_url is set).  Returns 0 or -1. */
int gpusample_init(void);

/* Samples every eligible node now (tests, and the first round). */
void gpusample_run(void);

/* Node host for a DCGM URL template: "tcp://gpu7:2376" -> "gpu7",
 * "tcp://[fd00::7]:2376" -> "[fd00::7]", unix:// -> "127.0.0.1".  Writes
 * into out (NUL-terminated); returns 0, or -1 when it does not fit or the
 * URL is neither. */
int gpusample_node_host(const char *url, char *out, size_t outlen);

#endif
