/* config.c — the settings table: defaults, config file, environment, flags.
 *
 * Owns struct config cfg and its parsing; does not interpret the values.
 * Adding a setting means one field in config.h and one row below.  A
 * duration's name ends in its unit (_s, _ms); a setting renamed keeps its old
 * name as a deprecated alias (file, environment and flags), so existing
 * deployments go on working.
 */
#include "base/config.h"

#include <errno.h>
#include <limits.h>
#include <stddef.h>
#include <stdlib.h>
#include <string.h>

struct config cfg;

enum type { T_STR, T_INT, T_I64 };

struct setting {
	const char *name;
	enum type type;
	size_t off;
	const char *def;
	long long min, max;
	int secret;
	const char *help;
	const char *alias; /* the deprecated old name, or NULL */
};

/* clang-format off */
#define S(n, d, h)         { #n, T_STR, offsetof(struct config, n), d, 0, 0, 0, h, NULL }
#define SECRET(n, d, h)    { #n, T_STR, offsetof(struct config, n), d, 0, 0, 1, h, NULL }
#define I(n, d, lo, hi, h) { #n, T_INT, offsetof(struct config, n), d, lo, hi, 0, h, NULL }
#define L(n, d, lo, hi, h) { #n, T_I64, offsetof(struct config, n), d, lo, hi, 0, h, NULL }
/* An int setting renamed from old (kept as a deprecated alias). */
#define R(n, old, d, lo, hi, h) \
	{ #n, T_INT, offsetof(struct config, n), d, lo, hi, 0, h, #old }
/* clang-format on */

static const struct setting table[] = {
	S(listen, "127.0.0.1", "address to listen on (IPv4 or IPv6 literal)"),
	I(port, "8080", 0, 65535, "TCP port; 0 picks a free one"),
	S(port_file, "", "write the bound port to this file once listening"),
	S(public_url, "",
	  "URL browsers use to reach the API (Origin checks); default http(s)://<Host>"),
	S(tls_cert, "", "PEM certificate chain; enables TLS with tls_key"),
	S(tls_key, "", "PEM private key for tls_cert"),
	I(max_connections, "10000", 16, 1000000, "open client connections at most"),
	I(max_header_bytes, "16384", 1024, 1048576, "request line plus headers, bytes"),
	I(max_headers, "100", 8, 1000, "header fields per request"),
	I(max_url, "8192", 256, 65536, "request target length, bytes"),
	L(max_body, "1048576", 0, 1LL << 40, "default request body limit for JSON routes, bytes"),
	R(header_timeout_s, header_timeout, "10", 1, 3600,
	  "seconds to receive a request's headers"),
	R(body_timeout_s, body_timeout, "30", 1, 3600,
	  "seconds of silence allowed while a body is read"),
	R(keepalive_timeout_s, keepalive_timeout, "60", 1, 3600,
	  "seconds an idle keep-alive connection is kept"),
	S(access_log, "changes",
	  "requests logged at info: all, changes (errors, upgrades and every method but "
	  "GET/HEAD/OPTIONS), errors (status >= 400) or none; the rest at debug"),
	R(write_timeout_s, write_timeout, "30", 1, 3600,
	  "seconds a client may stall reading a response"),
	R(shutdown_timeout_s, shutdown_timeout, "10", 0, 3600,
	  "seconds in-flight requests get on SIGTERM"),
	S(web_root, "web", "directory of the static frontend"),
	S(migrations_dir, "db/migrations", "directory of NNNN_*.sql migrations"),
	S(openapi_file, "server/api/openapi.yaml",
	  "the API description served at /api/v1/openapi.yaml"),
	S(state_dir, "var/state", "writable directory for generated state (admin password file)"),
	SECRET(db_url, "postgresql:///gpucloud", "libpq connection URL (may hold a password)"),
	I(db_pool_size, "8", 1, 256,
	  "PostgreSQL connections serving requests (the scheduler holds one more)"),
	I(db_queue_max, "10000", 1, 10000000, "queries waiting for a connection at most"),
	R(db_statement_timeout_s, db_statement_timeout, "5", 0, 3600,
	  "seconds a statement may go unanswered before its connection is reset (0 = never)"),
	S(docker_host, "",
	  "unix:// engine registered as node 'local' when no node exists (make run sets it)"),
	S(discovery_image, "",
	  "image (present on GPU nodes) in which nvidia-smi discovers a node's GPUs through the "
	  "NVIDIA runtime; empty: GPUs are declared"),
	R(node_check_interval_s, node_check_interval, "5", 1, 3600,
	  "seconds between health checks of each node"),
	R(node_down_after_s, node_down_after, "15", 0, 86400,
	  "seconds a node may fail its checks before it is marked down"),
	I(node_degrade_after, "3", 1, 1000,
	  "consecutive container creates or starts a node's engine fails with an error of its own "
	  "(HTTP 5xx) before the node is marked degraded and gets no more work"),
	S(node_app_bind, "",
	  "address app ports are published on for tcp:// nodes (firewall it to gpucloudd); "
	  "empty: the node's address from its URL"),
	S(data_root, "",
	  "directory shared by gpucloudd and every node at the same path (homes, shared and "
	  "class areas); empty: state_dir/data"),
	I(uid_base, "200000", 1000, 2000000000,
	  "containers of user id N run as uid/gid uid_base + N, which owns their files"),
	R(storage_scan_interval_s, storage_scan_interval, "300", 1, 86400,
	  "seconds between storage usage scans (one area per scan, oldest first)"),
	R(upload_expiry_s, upload_expiry, "86400", 10, 2592000,
	  "seconds an unfinished resumable upload is kept before it is removed"),
	L(upload_part_size, "8388608", 65536, 1LL << 30, "part size of resumable uploads, bytes"),
	L(upload_max_bytes, "1099511627776", 0, 1LL << 50, "largest single file upload, bytes"),
	L(preview_max_bytes, "1048576", 1024, 1LL << 30, "bytes of a file read for a preview"),
	I(sched_interval_ms, "1000", 20, 600000,
	  "milliseconds between scheduler passes (a new request triggers one sooner)"),
	R(preempt_grace_s, preempt_grace, "30", 0, 86400,
	  "seconds preempted scavenger work may run before it is stopped"),
	R(alloc_max_lease_s, alloc_max_lease, "86400", 1, 31536000,
	  "longest lease (seconds) a non-admin may give a raw allocation (POST /allocations)"),
	I(instance_tick_ms, "250", 20, 60000,
	  "milliseconds between instance driver passes (scheduler allocations nudge it sooner)"),
	R(instance_stop_grace_s, instance_stop_grace, "10", 0, 3600,
	  "seconds a stopped instance gets between SIGTERM and SIGKILL"),
	I(instance_pids_limit, "4096", 16, 1000000, "processes an instance container may have"),
	I(reconcile_interval_ms, "3000", 100, 3600000,
	  "milliseconds between listings of each node's containers (reconciliation)"),
	R(reclaim_interval_s, reclaim_interval, "30", 1, 86400,
	  "seconds between idle-instance checks"),
	I(idle_cpu_percent, "5", 0, 10000,
	  "CPU use (percent of one core) at or above which an instance counts as active"),
	I(job_metrics_interval_ms, "2000", 50, 600000,
	  "milliseconds between reads of running jobs' metric lines (new log output reads sooner)"),
	I(job_metrics_max_points, "2000", 16, 1000000,
	  "points a job's metric series keeps at most; older ones are thinned to first, last, "
	  "min and max per bucket"),
	I(job_usage_interval_ms, "10000", 200, 3600000,
	  "milliseconds between CPU and memory samples of running jobs"),
	I(user_image_quota, "5", 0, 100000, "personal images (save as image) a user may keep"),
	I(instance_test_pause_ms, "0", 0, 600000,
	  "tests only: milliseconds the driver waits after creating a container, before "
	  "recording it"),
	I(workers, "2", 1, 64, "worker threads for blocking work (file listings, quota scans)"),
	I(scrypt_ln, "17", 10, 20, "log2 of scrypt N for new password hashes"),
	R(session_idle_timeout_s, session_idle_timeout, "28800", 60, 31536000,
	  "seconds a session may stay unused"),
	R(session_max_age_s, session_max_age, "604800", 300, 31536000,
	  "seconds a session lives at most"),
	I(login_free_failures, "5", 1, 100,
	  "failed logins before backoff starts (per account and address; 10x per address)"),
	R(login_max_delay_s, login_max_delay, "60", 1, 3600, "longest login backoff, seconds"),
	I(login_account_failures, "50", 1, 60,
	  "failed logins an account takes per hour from all addresses together"),
	I(login_reserve_failures, "20", 0, 20,
	  "after those, failed logins per hour still taken from addresses the account logged "
	  "in from, and as many from addresses new to it (ceiling: account + 2 x reserve)"),
	I(password_workers, "2", 1, 64, "threads of their own for password hashing"),
	I(password_queue, "1024", 1, 1000000, "password hashes waiting for a thread at most"),
	I(login_queue, "32", 1, 100000,
	  "logins waiting for a password thread at most; more answer 503"),
	S(trusted_proxies, "",
	  "comma-separated addresses or CIDRs of front proxies whose X-Forwarded-For is "
	  "believed"),
	S(admin_username, "admin", "user seeded as admin when no admin exists"),
	SECRET(admin_password, "",
	       "password for the seeded admin; generated and written to state_dir/admin-password "
	       "when empty"),
	S(apps_domain, "localhost",
	  "apps (Jupyter, TensorBoard, web ports) are served at http(s)://<route>.<apps_domain>/"),
	I(apps_port, "0", 0, 65535,
	  "port in route URLs (a front proxy's); 0 = the port we listen on"),
	R(route_session_ttl_s, route_session_ttl, "43200", 5, 31536000,
	  "seconds a route cookie (app session) lives"),
	R(proxy_connect_timeout_s, proxy_connect_timeout, "5", 1, 600,
	  "seconds to connect to an app in a container"),
	R(proxy_timeout_s, proxy_timeout, "300", 1, 86400,
	  "seconds an app may stay silent while a request or response is under way"),
	R(proxy_recheck_s, proxy_recheck, "5", 1, 3600,
	  "seconds between re-checks of open websockets (session expired, instance stopped)"),
	S(tensorboard_image, "",
	  "catalog image (reference) of TensorBoards: serves $GPUCLOUD_LOGDIR on its app port "
	  "'tensorboard'; an admin's setting (PUT /api/v1/settings/tensorboard_image) wins; "
	  "neither: POST /tensorboards is refused"),
	I(proxy_cache_ms, "1000", 0, 60000,
	  "milliseconds a route and session check is reused before the database is asked again"),
	S(metrics_allow, "",
	  "client addresses (comma-separated IPs, e.g. a Prometheus scraper) that may read "
	  "/metrics without a token; everyone else needs an admin's API token"),
	/* notifications (issue 15, part G): e-mail through an SMTP server */
	S(smtp_url, "",
	  "SMTP server notifications are mailed through (smtp://host:port, or smtps:// for "
	  "TLS from the start); empty: no e-mail"),
	S(smtp_from, "gpucloud <gpucloud@localhost>", "From of notification mails"),
	S(smtp_user, "", "SMTP login user (empty: no login)"),
	SECRET(smtp_password, "", "SMTP login password"),
	S(smtp_tls, "try",
	  "STARTTLS on smtp:// URLs: try (when the server offers it), required, or none"),
	I(mail_poll_ms, "2000", 50, 600000,
	  "milliseconds between looks for notifications waiting to be mailed"),
	I(mail_retry_s, "60", 1, 86400,
	  "seconds before the first retry of a failed mail (doubling after each)"),
	I(mail_max_attempts, "5", 1, 100, "tries of a mail before it is given up"),
	I(notification_keep_days, "180", 1, 36500,
	  "days a notification is kept (older ones are removed, read or not)"),
	S(log_level, "info", "debug, info, warn or error"),
	/* observability (issue 15, part 3): GPU sampling, its use by idle
	 * reclamation, and the gauges of /metrics */
	I(gpu_sample_interval_s, "30", 0, 86400,
	  "seconds between GPU utilisation samples of nodes with measured (discovered) GPUs, by "
	  "nvidia-smi in a short-lived container of discovery_image or from gpu_dcgm_url; 0: no "
	  "sampling"),
	S(gpu_dcgm_url, "",
	  "a DCGM exporter's metrics URL to read GPU utilisation from instead of running "
	  "nvidia-smi; {host} is replaced by the node's host (e.g. http://{host}:9400/metrics)"),
	I(idle_gpu_percent, "10", 1, 100,
	  "GPU utilisation (percent) at or above which an instance's measured GPU counts as "
	  "activity for idle reclamation, in the samples of the last two sampling intervals "
	  "(at least 60 s)"),
	I(metrics_refresh_ms, "5000", 200, 600000,
	  "milliseconds between the reads of the gauges /metrics shows (queues, nodes, "
	  "instances, jobs, GPUs): one query, not one per scrape"),
	/* replicas (issue 15, part 5): leadership among gpucloudd sharing one database */
	I(leader_heartbeat_ms, "1000", 50, 60000,
	  "milliseconds between the leader's checks of the session that holds its lock, and "
	  "between the other replicas' attempts to take the lock"),
	I(leader_takeover_ms, "5000", 200, 3600000,
	  "a leader's lock session idle this long (the leader frozen, or its host gone) is cut "
	  "off by another replica, which takes over; the leader stops acting on its own once "
	  "its last check is older than this less one heartbeat"),
};

#define NSETTINGS (sizeof(table) / sizeof(table[0]))

static const struct setting *find(const char *name)
{
	char norm[64];
	size_t i;

	for (i = 0; name[i] && i + 1 < sizeof(norm); i++)
		norm[i] = name[i] == '-' ? '_' : name[i];
	norm[i] = '\0';
	for (i = 0; i < NSETTINGS; i++)
		if (strcmp(table[i].name, norm) == 0 ||
		    (table[i].alias && strcmp(table[i].alias, norm) == 0))
			return &table[i];
	return NULL;
}

static int apply(const struct setting *s, const char *value, char *err, size_t errlen)
{
	char *p = (char *)&cfg + s->off;
	char *end;
	long long v;

	if (s->type == T_STR) {
		char *copy = strdup(value);
		if (!copy) {
			snprintf(err, errlen, "out of memory");
			return -1;
		}
		free(*(char **)p);
		*(char **)p = copy;
		return 0;
	}
	errno = 0;
	v = strtoll(value, &end, 10);
	if (errno || end == value || *end != '\0') {
		snprintf(err, errlen, "setting '%s': '%s' is not a number", s->name,
		         s->secret ? "***" : value);
		return -1;
	}
	if (v < s->min || v > s->max) {
		snprintf(err, errlen, "setting '%s': %lld is out of range [%lld, %lld]", s->name, v,
		         s->min, s->max);
		return -1;
	}
	if (s->type == T_INT)
		*(int *)p = (int)v;
	else
		*(int64_t *)p = v;
	return 0;
}

int config_set(const char *name, const char *value, char *err, size_t errlen)
{
	const struct setting *s = find(name);

	if (!s) {
		snprintf(err, errlen, "unknown setting '%s' (see --help-config)", name);
		return -1;
	}
	return apply(s, value, err, errlen);
}

static char *trim(char *s)
{
	char *e;

	while (*s == ' ' || *s == '\t')
		s++;
	e = s + strlen(s);
	while (e > s && (e[-1] == ' ' || e[-1] == '\t' || e[-1] == '\n' || e[-1] == '\r'))
		*--e = '\0';
	return s;
}

static int load_file(const char *path)
{
	char line[4096], err[256];
	FILE *f = fopen(path, "r");
	int lineno = 0, rc = 0;

	if (!f) {
		fprintf(stderr, "gpucloudd: cannot open config file '%s': %s\n", path,
		        strerror(errno));
		return -1;
	}
	while (fgets(line, sizeof(line), f)) {
		char *s = trim(line), *eq;
		lineno++;
		if (*s == '\0' || *s == '#')
			continue;
		eq = strchr(s, '=');
		if (!eq) {
			fprintf(stderr, "gpucloudd: %s:%d: expected 'name = value'\n", path,
			        lineno);
			rc = -1;
			break;
		}
		*eq = '\0';
		if (config_set(trim(s), trim(eq + 1), err, sizeof(err)) < 0) {
			fprintf(stderr, "gpucloudd: %s:%d: %s\n", path, lineno, err);
			rc = -1;
			break;
		}
	}
	fclose(f);
	return rc;
}

static void env_name(const char *name, char *out, size_t outlen)
{
	size_t n = (size_t)snprintf(out, outlen, "GPUCLOUD_");
	for (; *name && n + 1 < outlen; name++)
		out[n++] = (char)(*name >= 'a' && *name <= 'z' ? *name - 32 : *name);
	out[n] = '\0';
}

void config_help(FILE *f)
{
	char env[80];

	fprintf(f, "%-24s %-6s %-28s %-32s %s\n", "SETTING", "TYPE", "DEFAULT", "ENVIRONMENT",
	        "MEANING");
	for (size_t i = 0; i < NSETTINGS; i++) {
		const struct setting *s = &table[i];
		env_name(s->name, env, sizeof(env));
		fprintf(f, "%-24s %-6s %-28s %-32s %s%s", s->name,
		        s->type == T_STR ? "string" : "int", *s->def ? s->def : "\"\"", env,
		        s->help, s->secret ? " [secret]" : "");
		if (s->alias)
			fprintf(f, " (formerly %s, still accepted)", s->alias);
		fputc('\n', f);
	}
	fprintf(f, "\nPrecedence: default < --config=FILE (name = value) < "
	           "environment < --name=value flags.\n");
}

int config_load(int argc, char **argv)
{
	char err[256], env[80];
	const char *file = NULL;

	memset(&cfg, 0, sizeof(cfg));
	for (size_t i = 0; i < NSETTINGS; i++)
		if (apply(&table[i], table[i].def, err, sizeof(err)) < 0) {
			fprintf(stderr, "gpucloudd: bad default: %s\n", err);
			return -1;
		}
	for (int i = 1; i < argc; i++) {
		if (strcmp(argv[i], "--help-config") == 0) {
			config_help(stdout);
			return 1;
		}
		if (strncmp(argv[i], "--config=", 9) == 0)
			file = argv[i] + 9;
	}
	if (!file)
		file = getenv("GPUCLOUD_CONFIG");
	if (file && *file && load_file(file) < 0)
		return -1;
	for (size_t i = 0; i < NSETTINGS; i++) {
		/* the old name first, so the new one wins when both are set */
		const char *names[2] = { table[i].alias, table[i].name };
		for (int k = 0; k < 2; k++) {
			const char *v;
			if (!names[k])
				continue;
			env_name(names[k], env, sizeof(env));
			v = getenv(env);
			if (v && apply(&table[i], v, err, sizeof(err)) < 0) {
				fprintf(stderr, "gpucloudd: %s: %s\n", env, err);
				return -1;
			}
		}
	}
	for (int i = 1; i < argc; i++) {
		char name[64];
		const char *a = argv[i], *eq;
		size_t n;
		if (strncmp(a, "--", 2) != 0) {
			fprintf(stderr, "gpucloudd: unexpected argument '%s'\n", a);
			return -1;
		}
		a += 2;
		if (strncmp(a, "config=", 7) == 0)
			continue;
		eq = strchr(a, '=');
		if (!eq) {
			fprintf(stderr, "gpucloudd: flag '--%s' needs a value (--name=value)\n", a);
			return -1;
		}
		n = (size_t)(eq - a);
		if (n >= sizeof(name)) {
			fprintf(stderr, "gpucloudd: unknown flag '--%.*s'\n", (int)n, a);
			return -1;
		}
		memcpy(name, a, n);
		name[n] = '\0';
		if (config_set(name, eq + 1, err, sizeof(err)) < 0) {
			fprintf(stderr, "gpucloudd: %s\n", err);
			return -1;
		}
	}
	/* replicas: a leader must not be cut off between two of its heartbeats */
	if (cfg.leader_takeover_ms < 3 * cfg.leader_heartbeat_ms) {
		fprintf(stderr,
		        "gpucloudd: leader_takeover_ms (%d) must be at least 3 x "
		        "leader_heartbeat_ms (%d)\n",
		        cfg.leader_takeover_ms, cfg.leader_heartbeat_ms);
		return -1;
	}
	return 0;
}

void config_free(void)
{
	for (size_t i = 0; i < NSETTINGS; i++)
		if (table[i].type == T_STR) {
			char **p = (char **)((char *)&cfg + table[i].off);
			free(*p);
			*p = NULL;
		}
}
