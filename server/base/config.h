/* config.h — the one settings table of gpucloudd.
 *
 * Each setting has a name, a type, a default, an environment variable
 * (GPUCLOUD_<NAME> upper-cased), bounds and a help line.  Precedence:
 * default < config file (--config=FILE, "name = value" lines) < environment
 * < command-line flags (--name=value).  `gpucloudd --help-config` prints the
 * table.  Settings marked secret are never printed or logged.
 *
 * A duration's name ends in its unit (_s, _ms).  Settings renamed for that
 * keep their old names as deprecated aliases.  Where other modules still read
 * a renamed field by its old C name, an anonymous union keeps that name too
 * (DEPRECATED_NAME below) until they move to the new one.
 */
#ifndef GPUCLOUD_CONFIG_H
#define GPUCLOUD_CONFIG_H

#include <stdint.h>
#include <stdio.h>

/* A field under its new name and, for code not yet moved, its old one. */
#define DEPRECATED_NAME(type, name, old) \
	union {                          \
		type name;               \
		type old;                \
	}

struct config {
	/* network */
	char *listen;     /* address to bind, e.g. 127.0.0.1 */
	int port;         /* 0 = ephemeral */
	char *port_file;  /* write the bound port here (tests) */
	char *public_url; /* origin browsers use, for Origin checks */
	char *tls_cert;   /* PEM; TLS when set */
	char *tls_key;
	int max_connections;
	/* http limits and timeouts */
	int max_header_bytes;
	int max_headers;
	int max_url;
	int64_t max_body; /* default JSON body limit, bytes */
	DEPRECATED_NAME(int, header_timeout_s, header_timeout);
	DEPRECATED_NAME(int, body_timeout_s, body_timeout);
	DEPRECATED_NAME(int, keepalive_timeout_s, keepalive_timeout);
	char *access_log; /* all | changes | errors | none */
	DEPRECATED_NAME(int, write_timeout_s, write_timeout);
	DEPRECATED_NAME(int, shutdown_timeout_s, shutdown_timeout);
	/* storage of the process */
	char *web_root;
	char *migrations_dir;
	char *openapi_file;
	char *state_dir; /* writable dir: admin password file, keys */
	/* database */
	char *db_url;
	int db_pool_size;
	int db_queue_max;
	DEPRECATED_NAME(int, db_statement_timeout_s, db_statement_timeout);
	/* nodes */
	char *docker_host;     /* a local engine registered as node 'local' */
	char *discovery_image; /* runs nvidia-smi on nodes with the NVIDIA runtime */
	DEPRECATED_NAME(int, node_check_interval_s, node_check_interval);
	DEPRECATED_NAME(int, node_down_after_s, node_down_after);
	int node_degrade_after; /* consecutive engine failures to start work: degraded */
	char *node_app_bind;    /* HostIp of app ports on tcp:// nodes; "" = the node's host */
	/* storage */
	char *data_root; /* homes, shared and class areas; "" = state_dir/data */
	int uid_base;    /* container uid of user id N is uid_base + N */
	DEPRECATED_NAME(int, storage_scan_interval_s, storage_scan_interval);
	int upload_expiry_s;       /* an unfinished upload is kept */
	int64_t upload_part_size;  /* resumable upload part, bytes */
	int64_t upload_max_bytes;  /* largest single upload */
	int64_t preview_max_bytes; /* bytes read for a preview */
	/* scheduler */
	int sched_interval_ms;
	DEPRECATED_NAME(int, preempt_grace_s, preempt_grace);
	int alloc_max_lease_s; /* longest lease of a non-admin's raw allocation */
	/* instances */
	int instance_tick_ms; /* driver period (the scheduler also nudges it) */
	DEPRECATED_NAME(int, instance_stop_grace_s, instance_stop_grace); /* SIGTERM to SIGKILL */
	int instance_pids_limit;   /* PidsLimit of instance containers */
	int reconcile_interval_ms; /* period of the engine listing per node */
	DEPRECATED_NAME(int, reclaim_interval_s, reclaim_interval); /* between idle checks */
	int idle_cpu_percent;       /* CPU use (percent of one core) that counts as activity */
	int user_image_quota;       /* personal images (save as image) per user */
	int instance_test_pause_ms; /* tests: pause after a container is created */
	/* job metrics */
	int job_metrics_interval_ms; /* between reads of jobs' metric lines */
	int job_metrics_max_points;  /* points per metric series at most (thinned beyond) */
	int job_usage_interval_ms;   /* between CPU/memory samples of running jobs */
	/* workers */
	int workers;
	/* auth */
	int scrypt_ln; /* log2(N) for new hashes */
	DEPRECATED_NAME(int, session_idle_timeout_s, session_idle_timeout);
	int session_max_age_s;
	int login_free_failures; /* failures before backoff starts */
	int login_max_delay_s;   /* cap of the backoff */
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
	char *apps_domain; /* routes at <route>.<apps_domain> */
	int apps_port;     /* port in route URLs; 0 = the port we listen on */
	DEPRECATED_NAME(int, route_session_ttl_s, route_session_ttl); /* route cookie */
	DEPRECATED_NAME(int, proxy_connect_timeout_s, proxy_connect_timeout);
	DEPRECATED_NAME(int, proxy_timeout_s, proxy_timeout); /* upstream silent */
	DEPRECATED_NAME(int, proxy_recheck_s, proxy_recheck); /* open tunnels */
	char *metrics_allow;     /* addresses that may scrape /metrics without a token */
	int proxy_cache_ms;      /* how long a route/session check is reused */
	char *tensorboard_image; /* catalog image started by POST /tensorboards */
	/* notifications: e-mail (work/mailer.c) */
	char *smtp_url;             /* "" = no e-mail */
	char *smtp_from;            /* From header and envelope sender */
	char *smtp_user;            /* "" = no login */
	char *smtp_password;        /* secret */
	char *smtp_tls;             /* try, required or none (STARTTLS) */
	int mail_poll_ms;           /* between looks for mails to send */
	int mail_retry_s;           /* first retry delay, doubling */
	int mail_max_attempts;      /* tries before a mail fails */
	int notification_keep_days; /* older notifications are removed */
	/* logging */
	char *log_level;
	/* observability */
	int gpu_sample_interval_s; /* between GPU utilisation samples; 0: none */
	char *gpu_dcgm_url;        /* DCGM exporter URL ({host}); empty: nvidia-smi */
	int idle_gpu_percent;      /* GPU utilisation that counts as activity */
	int metrics_refresh_ms;    /* between reads of /metrics' gauges */
	/* replicas (issue 15, part 5): leadership */
	int leader_heartbeat_ms; /* leader: lock session checked; others: lock tried */
	int leader_takeover_ms;  /* a lock session silent this long is cut off */
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
