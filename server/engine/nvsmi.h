/* nvsmi.h — parsers for nvidia-smi output (GPU discovery on a node).
 *
 * Discovery runs, in a short-lived container with the NVIDIA runtime,
 *   nvidia-smi --query-gpu=index,uuid,name,memory.total,mig.mode.current --format=csv,noheader
 * and, when a GPU has MIG enabled,
 *   nvidia-smi -L
 * and then plain `nvidia-smi` for the "CUDA Version" in its header.
 * The parsers have the picohttpparser shape: (buf, len) in, no allocation,
 * no I/O; results go into caller-provided arrays.
 */
#ifndef GPUCLOUD_NVSMI_H
#define GPUCLOUD_NVSMI_H

#include <stddef.h>

#define NVSMI_MAX_GPUS 64
#define NVSMI_MAX_MIG  7 /* MIG instances per GPU at most (A100/H100/H200) */

struct nvsmi_mig {
	int gpu_index;    /* parent GPU */
	int index;        /* "MIG 1g.10gb Device 0" -> 0 */
	char profile[32]; /* "1g.10gb" */
	char uuid[64];    /* "MIG-..." */
};

struct nvsmi_gpu {
	int index;
	char uuid[64];        /* "GPU-..." */
	char name[96];        /* "NVIDIA H200" */
	long long memory_mib; /* memory.total in MiB */
	int mig_enabled;      /* mig.mode.current == "Enabled" */
	int nmig;
	struct nvsmi_mig mig[NVSMI_MAX_MIG];
};

/* Parses the --query-gpu CSV above (with or without the "[MiB]"/"MiB"
 * units, with or without a header line) into gpus (up to max).  Returns the
 * number of GPUs, or -1 when the text is not such output (an error message
 * from nvidia-smi, a wrong column count, a bad number, a duplicate index or
 * UUID, too many GPUs), with a short reason in err. */
int nvsmi_parse_query(const char *buf, size_t len, struct nvsmi_gpu *gpus, int max, char *err,
                      size_t errlen);

/* Parses `nvidia-smi -L` and attaches MIG devices to the GPUs already parsed
 * (matched by index; GPU lines are checked against their UUIDs).  Returns the
 * number of MIG devices attached, or -1 on malformed input (reason in err). */
int nvsmi_parse_list(const char *buf, size_t len, struct nvsmi_gpu *gpus, int ngpus, char *err,
                     size_t errlen);

/* Reads the newest CUDA version the driver supports from the header of plain
 * `nvidia-smi` ("| NVIDIA-SMI 550.54.15  Driver Version: 550.54.15  CUDA
 * Version: 12.4 |") into *cuda as major*1000 + minor*10 (12.4 -> 12040, the
 * encoding of nodes.cuda_max).  Returns 1 when read, 0 when the header says
 * "N/A" (*cuda = 0: unknown), or -1 when the text has no such header (an
 * error message from nvidia-smi, a driver too old to print it, two headers,
 * a malformed version), with a short reason in err. */
int nvsmi_parse_cuda(const char *buf, size_t len, int *cuda, char *err, size_t errlen);

/* One GPU's line of the utilisation query the sampler runs:
 *   nvidia-smi --query-gpu=uuid,utilization.gpu,memory.used --format=csv,noheader,nounits
 * util_pct is 0..100, or -1 when nvidia-smi cannot tell ("[N/A]", "[Not
 * Supported]": a GPU in MIG mode reports no utilisation of the whole GPU);
 * mem_used_mib is -1 when unknown.  Units ("%", "MiB") are accepted when
 * present, a header line ("uuid, utilization.gpu [%], ...") is skipped. */
struct nvsmi_util {
	char uuid[64]; /* "GPU-..." */
	int util_pct;
	long long mem_used_mib;
};

/* Parses the utilisation query into util[max].  Returns the number of GPUs
 * (0 for empty output), or -1 with the reason in err: a malformed line, a
 * UUID twice, more than max GPUs, or nvidia-smi's own error message. */
int nvsmi_parse_util(const char *buf, size_t len, struct nvsmi_util *util, int max, char *err,
                     size_t errlen);

/* Reads the same from a DCGM exporter's Prometheus text: the samples of
 * DCGM_FI_DEV_GPU_UTIL (percent) and DCGM_FI_DEV_FB_USED (MiB), one GPU per
 * UUID label (a GPU's MIG instances, labelled GPU_I_ID, are skipped).  Other
 * series and comments are ignored; a GPU seen in only one of the two has
 * -1 for the other.  Returns the number of GPUs or -1 with the reason
 * (a malformed sample of those two, a value out of range, more than max). */
int nvsmi_parse_dcgm(const char *buf, size_t len, struct nvsmi_util *util, int max, char *err,
                     size_t errlen);

#endif
