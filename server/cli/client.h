/* client.h — the CLI's side of the REST API: the saved login, one HTTP
 * request over libcurl (JSON in and out, or a body streamed to and from a
 * file), the server's errors printed as the user should read them, and the
 * exit codes a script can test.
 */
#ifndef GPUCLOUD_CLI_CLIENT_H
#define GPUCLOUD_CLI_CLIENT_H

#include <stddef.h>
#include <sys/types.h>

#include <curl/curl.h>
#include <jansson.h>

/* Exit codes (the man page and README list them). */
enum exit_code {
	EXIT_OK = 0,
	EXIT_USAGE = 1,    /* a bad command line or job file */
	EXIT_REFUSED = 2,  /* the server refused the request (4xx) */
	EXIT_SERVER = 3,   /* a server (5xx) or network error */
	EXIT_NOTFOUND = 4, /* no such job, instance, file ... (404) */
	EXIT_AUTH = 5,     /* not logged in, or the token expired or was revoked (401) */
	EXIT_LOCAL = 6,    /* a local file could not be read or written */
};

struct client {
	char server[512]; /* base URL, no trailing slash */
	char origin[512]; /* scheme://host[:port], for session mutations */
	char token[160];  /* never printed, never in a URL */
	long long token_id;
	char username[128];
	char csrf[160];          /* a login session's CSRF token (login only) */
	int json;                /* --json: machine output on stdout */
	int tty;                 /* stderr is a terminal: progress bars */
	const char *server_flag; /* --server */
	curl_off_t limit_rate;
	CURL *h;       /* the request in flight (its callbacks ask it the status) */
	CURLSH *share; /* connections and cookies between requests */
	char errbuf[CURL_ERROR_SIZE];
};

/* One request.  Unset fields are off. */
struct client_req {
	const char *method;
	const char *path; /* from "/api/v1/...", already escaped */
	json_t *body;     /* sent as JSON (borrowed) */
	int session;      /* a cookie session: send X-CSRF-Token and Origin */
	int upload_fd;    /* with upload_len >= 0: the body is [upload_off, +upload_len) of it */
	off_t upload_off;
	curl_off_t upload_len;
	const char *range;      /* "bytes=N-" */
	const char *last_event; /* Last-Event-ID */
	const char *idem_key;   /* Idempotency-Key: a retried submit makes one job */
	/* a 2xx body goes here as it arrives instead of into memory; return
	 * n to go on, anything else to stop */
	size_t (*sink)(const char *p, size_t n, void *arg);
	void *sink_arg;
	/* progress: bytes of this request so far */
	void (*progress)(void *arg, curl_off_t now, curl_off_t total);
	void *progress_arg;
};

struct client_reply {
	long status;
	char *body; /* a non-streamed body, NUL-terminated */
	size_t len;
	json_t *json; /* body parsed, when it is JSON */
	char etag[160];
	char content_type[128];
};

void client_reply_release(struct client_reply *rep);

/* Where the saved login lives: $XDG_CONFIG_HOME/gpucloud or
 * ~/.config/gpucloud, plus name ("" for the folder).  -1 when neither is set. */
int client_config_path(const char *name, char *buf, size_t n);

/* Loads the saved login (GPUCLOUD_SERVER / GPUCLOUD_TOKEN override it);
 * server_flag, when set, overrides the server.  Returns 0, -1 for a bad
 * server URL (message printed), -2 when no server is known (nothing printed). */
int client_load(struct client *c, const char *server_flag);
/* client_load with --server, then a token must be there: EXIT_OK, or the
 * exit code (message printed). */
int client_connect(struct client *c);

/* Saves server, token and token id in the credentials file (0600, its
 * folder 0700).  Returns 0 or -1 (message printed). */
int client_save(const struct client *c);
/* Removes the credentials file; 0 when it is gone. */
int client_forget(void);

/* Sets c->server (trailing slashes dropped) and c->origin from a URL;
 * -1 when it is not an http(s) URL. */
int client_set_server(struct client *c, const char *url);

/* Sends r; 0 when a reply came (any status), -1 on a network error (in
 * c->errbuf).  rep is filled either way; release it. */
int client_send(struct client *c, const struct client_req *r, struct client_reply *rep);

/* GET/POST/DELETE path with an optional JSON body; the reply's JSON is
 * returned (a new reference) on 2xx.  Otherwise the error is printed
 * (`what` names the action) and NULL returned with *code set to the exit
 * code.  A 204 returns an empty object. */
json_t *client_call(struct client *c, const char *method, const char *path, json_t *body,
                    const char *what, int *code);

/* Prints the error a non-2xx reply (or a network failure when rep is NULL)
 * stands for: the server's message and hint on stderr, and with --json the
 * error object on stdout.  Returns its exit code. */
int client_fail(struct client *c, const struct client_reply *rep, const char *what);

/* The exit code of an HTTP status. */
int client_exit_code(long status);

/* A path segment escaped for a URL (caller frees with curl_free). */
char *client_escape(struct client *c, const char *s);

/* Frees what the client holds and wipes the token from memory. */
void client_release(struct client *c);

/* Prints a JSON value on stdout (--json output), one line. */
void client_print_json(json_t *v);

#endif
