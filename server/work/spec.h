/* spec.h — the container spec: one pure function from a description of a
 * workload's container to the Docker Engine API create body.
 *
 * Everything SPEC §14 asks of a container gpucloudd creates is decided
 * here, in one place, for every kind (instances and TensorBoards today,
 * jobs and distributed members later): hardening (no privilege, every
 * capability dropped, no-new-privileges, private IPC and cgroup namespaces,
 * a PID limit, Memory = MemorySwap, NanoCpus, ShmSize), the user's uid, the
 * devices of exactly the allocated GPUs, the binds the storage module made
 * (nothing else is mounted), the gpucloud.* labels, the environment (the
 * platform's variables cannot be overridden), the per-user network and the
 * published app ports.
 * No I/O, no globals, no configuration reads: unit-tested without an engine.
 */
#ifndef GPUCLOUD_SPEC_H
#define GPUCLOUD_SPEC_H

#include <stddef.h>

#include <jansson.h>

#define SPEC_MAX_DEVICES 8

/* One allocated GPU (or MIG slice). */
struct spec_gpu {
	const char *uuid; /* the GPU's, or the MIG slice's, UUID (may be NULL) */
	/* declared GPUs (nodes without the NVIDIA runtime): the host device
	 * files to pass, the first being the GPU's own (/dev/nvidiaN); none for
	 * a discovered GPU, which the NVIDIA runtime passes by UUID */
	const char *devices[SPEC_MAX_DEVICES];
	int ndevices;
};

struct spec_input {
	const char *cluster; /* gpucloud.cluster */
	const char *kind;    /* gpucloud.kind: "instance", "tensorboard", ... */
	long long id;        /* gpucloud.id and GPUCLOUD_INSTANCE_ID (not for jobs) */
	const char *name;    /* the container's name, also its hostname */
	const char *owner;   /* the user's name: gpucloud.owner, HOME, USER */
	long long uid;       /* the container runs as uid:uid (storage_uid) */
	long long image_id;  /* part of gpucloud.sig */
	const char *image;   /* the reference to run */
	const json_t *cmd;   /* a non-empty array overrides the image's command */
	/* variables: env is the user's (no NVIDIA_*, CUDA_VISIBLE_DEVICES,
	 * GPUCLOUD_*, HOME or USER gets through); platform_env is what the
	 * platform sets for this kind (e.g. GPUCLOUD_LOGDIR), which may use
	 * GPUCLOUD_* but not the names set below */
	const json_t *env;
	const json_t *platform_env;
	const char *app_token; /* GPUCLOUD_APP_TOKEN */
	int jupyter;           /* also JUPYTER_TOKEN = app_token (spec_jupyter()) */
	const json_t *binds;   /* HostConfig.Binds, exactly as storage_binds() made them */
	const json_t *groups;  /* HostConfig.GroupAdd (class groups), NULL: none */
	const char *classes;   /* part of gpucloud.sig: the class mounts ("3r,5w"), may be NULL */
	const struct spec_gpu *gpus;
	int ngpus;
	const json_t *app_ports; /* [{"name", "port"}] published on host */
	const char *host;        /* address app ports are published on */
	const char *network;     /* the user's network (NetworkMode) */
	const char *ipv4;        /* a fixed address on network (NULL: the engine's pick) */
	const char *workdir;     /* the working directory; NULL: /home/<owner> */
	long long cpu_millis, mem_mib, shm_mib, pids_limit;
};

/* The create body for in, or NULL (out of memory).  Caller frees
 * (json_decref).  sig (may be NULL) gets the gpucloud.sig label: what the
 * container was made for (image, GPUs, network), so that a retried create
 * can tell whether the container it finds by name may be reused. */
json_t *spec_build(const struct spec_input *in, char *sig, size_t siglen);

/* 1 when an image is a Jupyter: its framework is "jupyter" (any case) or
 * it has an app port named "jupyter".  Such a container gets JUPYTER_TOKEN
 * set to its app token, the token the proxy sends with every request
 * ("Authorization: token ..."), so Jupyter run with the image's own
 * command opens signed in; the user's env cannot set JUPYTER_TOKEN then. */
int spec_jupyter(const char *framework, const json_t *app_ports);

/* 1 when the user's env may not set k (the platform sets it). */
int spec_env_reserved(const char *k);

/* The address a node's published app ports bind to, into out: loopback on
 * unix:// nodes (a container cannot reach it as the node); on tcp:// nodes
 * app_bind when set (a management address), else the node's own address. */
void spec_publish_host(const char *node_url, const char *app_bind, char *out, size_t outlen);

#endif
