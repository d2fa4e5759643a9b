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
	/* storage */
	char *data_root; /* homes, shared and class areas; "" = state_dir/data */
	int uid_base;    /* container uid of user id N is uid_base + N */
	/* scheduler */
	int sched_interval_ms;
	int preempt_grace; /* seconds */
	/* workers */
	int workers;
	/* auth */
	int scrypt_ln;            /* log2(N) for new hashes */
	int session_idle_timeout; /* seconds */
	int session_max_age;      /* seconds */
	int login_free_failures;  /* failures before backoff starts */
	int login_max_delay;      /* cap of the backoff, seconds */
	char *admin_username;
	char *admin_password; /* secret; generated when unset */
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
