/* main.c — gpucloudd: argv and configuration, start-up (migrations, the
 * first admin), wiring of the modules onto one event loop, and orderly
 * shutdown on SIGTERM/SIGINT.
 */
#include <errno.h>
#include <malloc.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include <event2/event.h>
#include <http_parser.h>

#include "api/api.h"
#include "auth/auth.h"
#include "base/config.h"
#include "base/cron.h"
#include "base/crypto.h"
#include "base/events.h"
#include "db/db.h"
#include "db/leader.h"
#include "engine/docker.h"
#include "net/http.h"
#include "engine/images.h"
#include "work/instances.h"
#include "work/jobs.h"
#include "work/jobmetrics.h"
#include "work/reclaim.h"
#include "work/reconcile.h"
#include "base/log.h"
#include "api/metrics.h"
#include "engine/nodes.h"
#include "engine/gpusample.h"
#include "storage/quota.h"
#include "storage/storage.h"
#include "apps/proxy.h"
#include "apps/terminal.h"
#include "sched/scheduler.h"
#include "net/static.h"
#include "base/worker.h"

#define VERSION "0.1.0"

static struct event_base *base;
static struct http_server *server;
static int stopping;

static void print_route(const struct route *rt, void *arg)
{
	static const char *const roles[] = { "student", "researcher", "teacher", "admin" };
	char who[64] = "";
	size_t n = 0;

	(void)arg;
	if (rt->roles == ROLES_PUBLIC)
		snprintf(who, sizeof(who), "public");
	else if (rt->roles == ROLES_ALL)
		snprintf(who, sizeof(who), "any");
	else
		for (int i = 0; i < 4; i++)
			if (rt->roles & (1u << i))
				n += (size_t)snprintf(who + n, sizeof(who) - n, "%s%s",
				                      n ? "," : "", roles[i]);
	printf("%s %s %s\n", http_method_str((enum http_method)rt->method), rt->pattern, who);
}

static void drained(void *arg)
{
	(void)arg;
	log_msg(LOG_INFO, "main", NULL, "all connections closed");
	event_base_loopexit(base, NULL);
}

static void on_signal(evutil_socket_t sig, short what, void *arg)
{
	(void)what;
	(void)arg;
	if (stopping) {
		log_msg(LOG_WARN, "main", NULL, "second signal: exiting now");
		event_base_loopbreak(base);
		return;
	}
	stopping = 1;
	log_msg(LOG_INFO, "main", NULL, "signal %d: shutting down (in-flight requests get %d s)",
	        (int)sig, cfg.shutdown_timeout);
	http_server_shutdown(server, drained, NULL);
}

static void raise_fd_limit(void)
{
	struct rlimit rl;

	if (getrlimit(RLIMIT_NOFILE, &rl) == 0 && rl.rlim_cur < rl.rlim_max) {
		rl.rlim_cur = rl.rlim_max;
		setrlimit(RLIMIT_NOFILE, &rl);
	}
}

/* Proxied bodies, uploads and downloads pass through evbuffer chains of
 * 64-256 KiB, allocated and freed by the thousand a second.  glibc's
 * defaults serve those from fresh mmap()s (or trim the heap under them), so
 * every chunk paid page faults and zeroing: about a fifth of the CPU of a
 * proxied 1 MiB response.  Fixed thresholds keep such chunks on the heap;
 * freed memory is still returned beyond 32 MiB. */
static void tune_malloc(void)
{
	mallopt(M_MMAP_THRESHOLD, 1 << 20);
	mallopt(M_TRIM_THRESHOLD, 32 << 20);
}

static int write_port_file(int port)
{
	char tmp[1100];
	FILE *f;

	if (!cfg.port_file || !*cfg.port_file)
		return 0;
	snprintf(tmp, sizeof(tmp), "%s.tmp", cfg.port_file);
	f = fopen(tmp, "w");
	if (!f)
		return -1;
	fprintf(f, "%d\n", port);
	if (fclose(f) != 0)
		return -1;
	return rename(tmp, cfg.port_file);
}

/* PostgreSQL may still be starting (make run starts it just before us). */
static int migrate_with_retry(void)
{
	for (int i = 0; i < 30; i++) {
		if (db_migrate(cfg.db_url, cfg.migrations_dir) == 0)
			return 0;
		if (i == 0)
			log_msg(LOG_WARN, "main", NULL, "database not ready; retrying for 30 s");
		sleep(1);
	}
	return -1;
}

int main(int argc, char **argv)
{
	struct http_server_opts opts = {
		.auth = auth_request,
		.auth_free = auth_info_free,
		.fallback = static_serve,
		.observe = metrics_observe,
		.vhost = &proxy_vhost,
	};
	struct event *sigterm = NULL, *sigint = NULL;
	int lvl, rc;

	for (int i = 1; i < argc; i++) {
		if (strcmp(argv[i], "--print-routes") == 0) {
			api_register_all();
			router_each(print_route, NULL);
			return 0;
		}
		if (strcmp(argv[i], "--version") == 0) {
			printf("gpucloudd %s\n", VERSION);
			return 0;
		}
		if (strcmp(argv[i], "--help") == 0 || strcmp(argv[i], "-h") == 0) {
			printf("usage: gpucloudd [--config=FILE] [--NAME=VALUE ...]\n"
			       "       gpucloudd --help-config | --print-routes | --version\n");
			return 0;
		}
	}
	rc = config_load(argc, argv);
	if (rc != 0)
		return rc > 0 ? 0 : 2;
	lvl = log_level_parse(cfg.log_level);
	if (lvl < 0) {
		fprintf(stderr, "gpucloudd: log_level must be debug, info, warn or error\n");
		return 2;
	}
	log_set_level((enum log_level)lvl);
	signal(SIGPIPE, SIG_IGN);
	raise_fd_limit();
	tune_malloc();
	if (mkdir(cfg.state_dir, 0700) < 0 && errno != EEXIST) {
		log_msg(LOG_ERROR, "main", NULL, "cannot create state_dir '%s': %s", cfg.state_dir,
		        strerror(errno));
		return 1;
	}
	if (migrate_with_retry() < 0) {
		log_msg(LOG_ERROR, "main", NULL, "database migrations failed; not starting");
		return 1;
	}
	if (api_users_seed_admin(cfg.db_url) < 0 || api_settings_seed(cfg.db_url) < 0 ||
	    nodes_seed_local(cfg.db_url, cfg.docker_host) < 0)
		return 1;
	{
		char keypath[1100];
		snprintf(keypath, sizeof(keypath), "%s/master.key", cfg.state_dir);
		if (crypto_master_key_load(keypath) < 0) {
			log_msg(LOG_ERROR, "main", NULL,
			        "cannot read or create the master key '%s': %s", keypath,
			        strerror(errno));
			return 1;
		}
	}

	base = event_base_new();
	if (!base || cron_init(base) < 0 || worker_init(base, cfg.workers, 4096) < 0 ||
	    /* one more than configured: the leader pins one for its lock */
	    db_init(base, cfg.db_url, cfg.db_pool_size + 1, cfg.db_queue_max) < 0 ||
	    leader_init(base, cfg.db_url) < 0 || docker_init(base) < 0 || nodes_init(base) < 0 ||
	    sched_init() < 0 || instances_init(base) < 0 || jobs_init(base) < 0 ||
	    reconcile_init() < 0 || reclaim_init() < 0 || gpusample_init() < 0 ||
	    metrics_init() < 0 || jobmetrics_init() < 0 || storage_init() < 0 ||
	    quota_init(base) < 0 || images_init(base) < 0) {
		log_msg(LOG_ERROR, "main", NULL,
		        "cannot start the event loop, workers, database pool or engine client");
		return 1;
	}
	db_set_statement_timeout(cfg.db_statement_timeout * 1000);
	api_register_all();
	server = http_server_new(base, &opts);
	if (!server || proxy_init(base, http_server_port(server)) < 0 || terminal_init(base) < 0)
		return 1;
	if (write_port_file(http_server_port(server)) < 0)
		log_msg(LOG_WARN, "main", NULL, "cannot write port_file '%s'", cfg.port_file);
	sigterm = evsignal_new(base, SIGTERM, on_signal, NULL);
	sigint = evsignal_new(base, SIGINT, on_signal, NULL);
	evsignal_add(sigterm, NULL);
	evsignal_add(sigint, NULL);
	log_msg(LOG_INFO, "main", NULL, "gpucloudd %s listening on %s://%s:%d/", VERSION,
	        cfg.tls_cert && *cfg.tls_cert ? "https" : "http", cfg.listen,
	        http_server_port(server));

	event_base_dispatch(base);

	/* Requests whose clients left may still wait on the database, an
	 * engine or a worker: complete them while the server they point to
	 * exists. */
	proxy_shutdown();
	terminal_shutdown();
	quota_shutdown();
	images_shutdown();
	jobs_shutdown();
	instances_shutdown();
	sched_shutdown();
	leader_shutdown();
	cron_shutdown();
	events_reset();
	nodes_shutdown();
	docker_shutdown();
	event_base_loop(base, EVLOOP_NONBLOCK);
	db_shutdown();
	event_base_loop(base, EVLOOP_NONBLOCK);
	worker_shutdown();
	event_base_loop(base, EVLOOP_NONBLOCK);
	http_server_free(server);
	auth_cache_clear();
	event_free(sigterm);
	event_free(sigint);
	event_base_free(base);
	static_free();
	log_msg(LOG_INFO, "main", NULL, "stopped");
	config_free();
	return 0;
}
