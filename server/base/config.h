/* config.h — the one settings table of gpucloudd.
 *
 * Each setting has a name, a type, a default, an environment variable
 * (GPUCLOUD_<NAME> upper-cased), bounds and a help line.  Precedence:
 * default < config file (--config=FILE, "name = value" lines) < environment
 * < command-line flags (--name=value).  `gpucloudd --help-config` prints the
 * table.  Settings marked secret are never printed or logged.
 */
#ifndef GPUCLOUD_CONFIG_H
#define GPUCLOUD_CONFIG_H

#include <stdint.h>
#include <stdio.h>

struct config {
	/* network */
	char *listen;     /* address to bind, e.g. 127.0.0.1 */
	int port;         /* 0 = ephemeral */
	char *port_file;  /* write the bound port here (tests) */
	char *public_url; /* origin browsers use, for Origin checks */
	char *tls_cert;   /* PEM; TLS when set */
	char *tls_key;
	int max_connections;
	/* http limits and timeouts (seconds) */
	int max_header_bytes;
	int max_headers;
	int max_url;
	int64_t max_body; /* default JSON body limit, bytes */
	int header_timeout;
	int body_timeout;
	int keepalive_timeout;
	char *access_log; /* all | changes | errors | none */
	int write_timeout;
	int shutdown_timeout;
	/* storage of the process */
	char *web_root;
	char *migrations_dir;
	char *openapi_file;
	char *state_dir; /* writable dir: admin password file, keys */
	/* database */
	char *db_url;
	int db_pool_size;
	int db_queue_max;
	int db_statement_timeout; /* seconds */
	/* nodes */
	char *docker_host;       /* a local engine registered as node 'local' */
	char *discovery_image;   /* runs nvidia-smi on nodes with the NVIDIA runtime */
	int node_check_interval; /* seconds */
	int node_down_after;     /* seconds */
	char *node_app_bind;     /* HostIp of app ports on tcp:// nodes; "" = the node's host */
	/* storage */
	char *data_root;           /* homes, shared and class areas; "" = state_dir/data */
	int uid_base;              /* container uid of user id N is uid_base + N */
	int storage_scan_interval; /* seconds between usage scans */
	int upload_expiry;         /* seconds an unfinished upload is kept */
	int64_t upload_part_size;  /* resumable upload part, bytes */
	int64_t upload_max_bytes;  /* largest single upload */
	int64_t preview_max_bytes; /* bytes read for a preview */
	/* scheduler */
	int sched_interval_ms;
	int preempt_grace;   /* seconds */
	int alloc_max_lease; /* seconds: longest lease of a non-admin's raw allocation */
	/* instances */
	int instance_tick_ms;       /* driver period (the scheduler also nudges it) */
	int instance_stop_grace;    /* seconds between SIGTERM and SIGKILL on stop */
	int instance_pids_limit;    /* PidsLimit of instance containers */
	int reconcile_interval_ms;  /* period of the engine listing per node */
	int reclaim_interval;       /* seconds between idle checks */
	int idle_cpu_percent;       /* CPU use (percent of one core) that counts as activity */
	int user_image_quota;       /* personal images (save as image) per user */
	int instance_test_pause_ms; /* tests: pause after a container is created */
	/* workers */
	int workers;
	/* auth */
	int scrypt_ln;            /* log2(N) for new hashes */
	int session_idle_timeout; /* seconds */
	int session_max_age;      /* seconds */
	int login_free_failures;  /* failures before backoff starts */
	int login_max_delay;      /* cap of the backoff, seconds */
	/* login throttling, password hashing */
	int login_account_failures; /* verified failures per account and hour */
	int login_reserve_failures; /* each reserve (known, new addresses) per hour */
	int password_workers;       /* threads of the password lane */
	int password_queue;         /* its queue bound */
	int login_queue;            /* logins waiting in it at most */
	char *trusted_proxies;      /* X-Forwarded-For believed from these */
	char *admin_username;
	char *admin_password; /* secret; generated when unset */
	/* proxy: apps on their own origins */
	char *apps_domain;         /* routes at <route>.<apps_domain> */
	int apps_port;             /* port in route URLs; 0 = the port we listen on */
	int route_session_ttl;     /* seconds a route cookie lives */
	int proxy_connect_timeout; /* seconds */
	int proxy_timeout;         /* seconds an upstream may stay silent mid-response */
	int proxy_recheck;         /* seconds between re-checks of open tunnels */
	char *metrics_allow;       /* addresses that may scrape /metrics without a token */
	int proxy_cache_ms;        /* how long a route/session check is reused */
	char *tensorboard_image;   /* catalog image started by POST /tensorboards */
	/* logging */
	char *log_level;
};

extern struct config cfg;

/* Fills cfg from defaults, file, environment and argv.  Returns 0 on success,
 * 1 when the process should exit 0 (help printed), -1 on error (message
 * printed to stderr). */
int config_load(int argc, char **argv);

/* Sets one setting by name from a string; validates bounds.  Returns 0 or -1
 * and writes a message into err (size errlen). */
int config_set(const char *name, const char *value, char *err, size_t errlen);

/* Writes the settings table (name, type, default, env, help) to f. */
void config_help(FILE *f);

/* Frees strings held by cfg. */
void config_free(void);

#endif
