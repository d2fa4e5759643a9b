/* client.c — the CLI's HTTP client and saved login.  Owns one libcurl easy
 * handle (connections and the login's cookie are kept between requests),
 * the credentials file and the mapping of replies to exit codes.  The token
 * goes only into the Authorization header: never into a URL, never on
 * stdout or stderr.
 */
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <sys/stat.h>
#include <unistd.h>

#include "cli/client.h"

void client_reply_release(struct client_reply *rep)
{
	free(rep->body);
	json_decref(rep->json);
	memset(rep, 0, sizeof(*rep));
}

int client_config_path(const char *name, char *buf, size_t n)
{
	const char *x = getenv("XDG_CONFIG_HOME"), *home = getenv("HOME");
	int k;

	if (x && *x == '/')
		k = snprintf(buf, n, "%s/gpucloud%s%s", x, *name ? "/" : "", name);
	else if (home && *home)
		k = snprintf(buf, n, "%s/.config/gpucloud%s%s", home, *name ? "/" : "", name);
	else
		return -1;
	return k > 0 && (size_t)k < n ? 0 : -1;
}

int client_set_server(struct client *c, const char *url)
{
	CURLU *u = curl_url();
	char *scheme = NULL, *host = NULL, *port = NULL;
	size_t n;
	int rc = -1;

	if (!u || curl_url_set(u, CURLUPART_URL, url, 0) != CURLUE_OK ||
	    curl_url_get(u, CURLUPART_SCHEME, &scheme, 0) != CURLUE_OK ||
	    curl_url_get(u, CURLUPART_HOST, &host, 0) != CURLUE_OK)
		goto out;
	if (strcmp(scheme, "http") && strcmp(scheme, "https"))
		goto out;
	curl_url_get(u, CURLUPART_PORT, &port, 0);
	n = strlen(url);
	while (n > 0 && url[n - 1] == '/')
		n--;
	if (n >= sizeof(c->server))
		goto out;
	memcpy(c->server, url, n);
	c->server[n] = '\0';
	snprintf(c->origin, sizeof(c->origin), "%s://%s%s%s", scheme, host, port ? ":" : "",
	         port ? port : "");
	rc = 0;
out:
	curl_free(scheme);
	curl_free(host);
	curl_free(port);
	curl_url_cleanup(u);
	return rc;
}

static char *slurp(const char *path, size_t max)
{
	FILE *f = fopen(path, "r");
	char *buf;
	size_t n;

	if (!f)
		return NULL;
	buf = malloc(max + 1);
	if (!buf) {
		fclose(f);
		return NULL;
	}
	n = fread(buf, 1, max, f);
	fclose(f);
	buf[n] = '\0';
	return buf;
}

int client_load(struct client *c, const char *server_flag)
{
	char path[4096], *text;
	const char *env;
	json_t *j = NULL;

	if (client_config_path("credentials.json", path, sizeof(path)) == 0 &&
	    (text = slurp(path, 65536)) != NULL) {
		j = json_loads(text, 0, NULL);
		free(text);
	}
	if (json_is_object(j)) {
		const char *s = json_string_value(json_object_get(j, "server"));
		const char *t = json_string_value(json_object_get(j, "token"));
		const char *u = json_string_value(json_object_get(j, "username"));
		if (s)
			client_set_server(c, s);
		if (t)
			snprintf(c->token, sizeof(c->token), "%s", t);
		if (u)
			snprintf(c->username, sizeof(c->username), "%s", u);
		c->token_id = json_integer_value(json_object_get(j, "token_id"));
	}
	json_decref(j);
	if ((env = getenv("GPUCLOUD_SERVER")) != NULL && *env && client_set_server(c, env) < 0) {
		fprintf(stderr, "gpucloud: GPUCLOUD_SERVER '%s' is not an http(s) URL\n", env);
		return -1;
	}
	if ((env = getenv("GPUCLOUD_TOKEN")) != NULL && *env) {
		snprintf(c->token, sizeof(c->token), "%s", env);
		c->token_id = 0;
	}
	if (server_flag && client_set_server(c, server_flag) < 0) {
		fprintf(stderr, "gpucloud: --server '%s' is not an http(s) URL\n", server_flag);
		return -1;
	}
	if (!c->server[0])
		return -2; /* the caller says what to do */
	return 0;
}

int client_connect(struct client *c)
{
	int rc = client_load(c, c->server_flag);

	if (rc == -1)
		return EXIT_USAGE;
	if (rc == -2 || !c->token[0]) {
		fprintf(stderr, "gpucloud: not logged in: run gpucloud login %s\n",
		        c->server[0] ? c->server : "URL");
		if (c->json) {
			json_t *o =
			        json_pack("{s:{s:s, s:s}, s:i}", "error", "code", "not_logged_in",
			                  "message", "not logged in", "exit_code", EXIT_AUTH);
			client_print_json(o);
			json_decref(o);
		}
		return EXIT_AUTH;
	}
	return EXIT_OK;
}

static int mkdirs(const char *dir)
{
	char p[4096];
	size_t n = strlen(dir);

	if (n >= sizeof(p))
		return -1;
	memcpy(p, dir, n + 1);
	for (char *s = p + 1; *s; s++)
		if (*s == '/') {
			*s = '\0';
			if (mkdir(p, 0700) < 0 && errno != EEXIST)
				return -1;
			*s = '/';
		}
	return mkdir(p, 0700) < 0 && errno != EEXIST ? -1 : 0;
}

int client_save(const struct client *c)
{
	char dir[4096], path[4096], tmp[4200];
	json_t *j;
	char *text;
	int fd, ok;

	if (client_config_path("", dir, sizeof(dir)) < 0 ||
	    client_config_path("credentials.json", path, sizeof(path)) < 0) {
		fprintf(stderr, "gpucloud: set HOME or XDG_CONFIG_HOME to save the login\n");
		return -1;
	}
	if (mkdirs(dir) < 0) {
		fprintf(stderr, "gpucloud: cannot make '%s': %s\n", dir, strerror(errno));
		return -1;
	}
	j = json_pack("{s:s, s:s, s:I, s:s}", "server", c->server, "token", c->token, "token_id",
	              (json_int_t)c->token_id, "username", c->username);
	text = j ? json_dumps(j, JSON_INDENT(2)) : NULL;
	json_decref(j);
	if (!text)
		return -1;
	snprintf(tmp, sizeof(tmp), "%s.%ld.tmp", path, (long)getpid());
	fd = open(tmp, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC | O_NOFOLLOW, 0600);
	ok = fd >= 0 && fchmod(fd, 0600) == 0 &&
	     write(fd, text, strlen(text)) == (ssize_t)strlen(text) && write(fd, "\n", 1) == 1 &&
	     fsync(fd) == 0;
	if (fd >= 0 && close(fd) < 0)
		ok = 0;
	explicit_bzero(text, strlen(text));
	free(text);
	if (!ok || rename(tmp, path) < 0) {
		fprintf(stderr, "gpucloud: cannot write '%s': %s\n", path, strerror(errno));
		unlink(tmp);
		return -1;
	}
	return 0;
}

int client_forget(void)
{
	char path[4096];

	if (client_config_path("credentials.json", path, sizeof(path)) < 0)
		return 0;
	return unlink(path) < 0 && errno != ENOENT ? -1 : 0;
}

/* ---- requests --------------------------------------------------------- */

struct xfer {
	struct client *c;
	const struct client_req *r;
	struct client_reply *rep;
	int streaming; /* decided at the first byte */
	int decided;
};

static int body_append(struct client_reply *rep, const char *p, size_t n)
{
	char *b;

	if (rep->len + n > (64u << 20))
		return -1; /* no reply we keep in memory is that large */
	b = realloc(rep->body, rep->len + n + 1);
	if (!b)
		return -1;
	memcpy(b + rep->len, p, n);
	rep->body = b;
	rep->len += n;
	b[rep->len] = '\0';
	return 0;
}

static size_t on_body(char *p, size_t size, size_t nmemb, void *arg)
{
	struct xfer *x = arg;
	size_t n = size * nmemb;

	if (!x->decided) {
		long st = 0;
		curl_easy_getinfo(x->c->h, CURLINFO_RESPONSE_CODE, &st);
		x->streaming = x->r->sink && st >= 200 && st < 300;
		x->decided = 1;
	}
	if (x->streaming)
		return x->r->sink(p, n, x->r->sink_arg);
	return body_append(x->rep, p, n) < 0 ? 0 : n;
}

static size_t on_header(char *p, size_t size, size_t nmemb, void *arg)
{
	struct xfer *x = arg;
	size_t n = size * nmemb, k, v;
	char *dst = NULL;
	size_t cap = 0;

	if (n > 5 && strncmp(p, "HTTP/", 5) == 0) { /* a new reply (after 100 Continue) */
		x->rep->etag[0] = x->rep->content_type[0] = '\0';
		return n;
	}
	if (n > 5 && strncasecmp(p, "ETag:", 5) == 0)
		dst = x->rep->etag, cap = sizeof(x->rep->etag), k = 5;
	else if (n > 13 && strncasecmp(p, "Content-Type:", 13) == 0)
		dst = x->rep->content_type, cap = sizeof(x->rep->content_type), k = 13;
	else
		return n;
	while (k < n && (p[k] == ' ' || p[k] == '\t'))
		k++;
	v = n;
	while (v > k && (p[v - 1] == '\r' || p[v - 1] == '\n' || p[v - 1] == ' '))
		v--;
	snprintf(dst, cap, "%.*s", (int)(v - k), p + k);
	return n;
}

static size_t on_read(char *p, size_t size, size_t nmemb, void *arg)
{
	struct client_req *r = arg;
	size_t want = size * nmemb;
	ssize_t got;

	if ((curl_off_t)want > r->upload_len)
		want = (size_t)r->upload_len;
	if (want == 0)
		return 0;
	got = pread(r->upload_fd, p, want, r->upload_off);
	if (got <= 0)
		return CURL_READFUNC_ABORT;
	r->upload_off += got;
	r->upload_len -= got;
	return (size_t)got;
}

static int on_progress(void *arg, curl_off_t dltotal, curl_off_t dlnow, curl_off_t ultotal,
                       curl_off_t ulnow)
{
	struct xfer *x = arg;

	if (x->r->upload_len >= 0 && x->r->upload_fd >= 0)
		x->r->progress(x->r->progress_arg, ulnow, ultotal);
	else
		x->r->progress(x->r->progress_arg, dlnow, dltotal);
	return 0;
}

int client_send(struct client *c, const struct client_req *r, struct client_reply *rep)
{
	struct curl_slist *hdrs = NULL;
	struct client_req up = *r;
	struct xfer x = { c, r, rep, 0, 0 };
	char url[8192], line[1024];
	char *payload = NULL;
	CURLcode cc;
	int n;

	memset(rep, 0, sizeof(*rep));
	c->errbuf[0] = '\0';
	n = snprintf(url, sizeof(url), "%s%s", c->server, r->path);
	if (n < 0 || (size_t)n >= sizeof(url)) {
		snprintf(c->errbuf, sizeof(c->errbuf), "the URL is too long");
		return -1;
	}
	/* a handle per request; the connections and the login's cookie are
	 * kept in the share between them */
	if (!c->share) {
		c->share = curl_share_init();
		if (c->share) {
			curl_share_setopt(c->share, CURLSHOPT_SHARE, CURL_LOCK_DATA_COOKIE);
			curl_share_setopt(c->share, CURLSHOPT_SHARE, CURL_LOCK_DATA_CONNECT);
		}
	}
	c->h = curl_easy_init();
	if (!c->h || !c->share) {
		snprintf(c->errbuf, sizeof(c->errbuf), "cannot start libcurl");
		return -1;
	}
	curl_easy_setopt(c->h, CURLOPT_SHARE, c->share);
	if (r->session)
		curl_easy_setopt(c->h, CURLOPT_COOKIEFILE, ""); /* the login's session cookie */
	curl_easy_setopt(c->h, CURLOPT_URL, url);
	curl_easy_setopt(c->h, CURLOPT_CUSTOMREQUEST, r->method);
	curl_easy_setopt(c->h, CURLOPT_ERRORBUFFER, c->errbuf);
	curl_easy_setopt(c->h, CURLOPT_USERAGENT, "gpucloud-cli/1");
	curl_easy_setopt(c->h, CURLOPT_NOSIGNAL, 1L);
	curl_easy_setopt(c->h, CURLOPT_CONNECTTIMEOUT, 20L);
	curl_easy_setopt(c->h, CURLOPT_PROTOCOLS_STR, "http,https");
	if (getenv("GPUCLOUD_CACERT") && *getenv("GPUCLOUD_CACERT")) /* a campus CA */
		curl_easy_setopt(c->h, CURLOPT_CAINFO, getenv("GPUCLOUD_CACERT"));
	curl_easy_setopt(c->h, CURLOPT_WRITEFUNCTION, on_body);
	curl_easy_setopt(c->h, CURLOPT_WRITEDATA, &x);
	curl_easy_setopt(c->h, CURLOPT_HEADERFUNCTION, on_header);
	curl_easy_setopt(c->h, CURLOPT_HEADERDATA, &x);
	/* a stalled connection is an error, a slow stream is not */
	curl_easy_setopt(c->h, CURLOPT_LOW_SPEED_LIMIT, 1L);
	curl_easy_setopt(c->h, CURLOPT_LOW_SPEED_TIME, r->sink ? 0L : 120L);
	if (c->limit_rate > 0) {
		curl_easy_setopt(c->h, CURLOPT_MAX_SEND_SPEED_LARGE, c->limit_rate);
		curl_easy_setopt(c->h, CURLOPT_MAX_RECV_SPEED_LARGE, c->limit_rate);
	}
	hdrs = curl_slist_append(hdrs, "Expect:");
	hdrs = curl_slist_append(hdrs, "Accept: application/json, text/plain, */*");
	if (c->token[0] && !r->session) {
		snprintf(line, sizeof(line), "Authorization: Bearer %s", c->token);
		hdrs = curl_slist_append(hdrs, line);
		explicit_bzero(line, sizeof(line));
	}
	if (r->session) {
		snprintf(line, sizeof(line), "Origin: %s", c->origin);
		hdrs = curl_slist_append(hdrs, line);
		if (c->csrf[0]) {
			snprintf(line, sizeof(line), "X-CSRF-Token: %s", c->csrf);
			hdrs = curl_slist_append(hdrs, line);
		}
	}
	if (r->range) {
		snprintf(line, sizeof(line), "Range: %s", r->range);
		hdrs = curl_slist_append(hdrs, line);
	}
	if (r->idem_key) {
		snprintf(line, sizeof(line), "Idempotency-Key: %s", r->idem_key);
		hdrs = curl_slist_append(hdrs, line);
	}
	if (r->last_event) {
		snprintf(line, sizeof(line), "Last-Event-ID: %s", r->last_event);
		hdrs = curl_slist_append(hdrs, line);
	}
	if (r->body) {
		payload = json_dumps(r->body, JSON_COMPACT | JSON_REAL_PRECISION(15));
		hdrs = curl_slist_append(hdrs, "Content-Type: application/json");
		curl_easy_setopt(c->h, CURLOPT_POSTFIELDS, payload ? payload : "");
	} else if (r->upload_fd >= 0 && r->upload_len >= 0) {
		hdrs = curl_slist_append(hdrs, "Content-Type: application/octet-stream");
		curl_easy_setopt(c->h, CURLOPT_UPLOAD, 1L);
		curl_easy_setopt(c->h, CURLOPT_CUSTOMREQUEST, r->method);
		curl_easy_setopt(c->h, CURLOPT_INFILESIZE_LARGE, r->upload_len);
		curl_easy_setopt(c->h, CURLOPT_READFUNCTION, on_read);
		curl_easy_setopt(c->h, CURLOPT_READDATA, &up);
	} else if (strcmp(r->method, "POST") == 0) {
		curl_easy_setopt(c->h, CURLOPT_POSTFIELDS, "");
	}
	if (strcmp(r->method, "HEAD") == 0)
		curl_easy_setopt(c->h, CURLOPT_NOBODY, 1L);
	if (r->progress) {
		curl_easy_setopt(c->h, CURLOPT_NOPROGRESS, 0L);
		curl_easy_setopt(c->h, CURLOPT_XFERINFOFUNCTION, on_progress);
		curl_easy_setopt(c->h, CURLOPT_XFERINFODATA, &x);
	}
	curl_easy_setopt(c->h, CURLOPT_HTTPHEADER, hdrs);
	cc = curl_easy_perform(c->h);
	curl_easy_getinfo(c->h, CURLINFO_RESPONSE_CODE, &rep->status);
	curl_easy_cleanup(c->h);
	c->h = NULL;
	for (struct curl_slist *h = hdrs; h; h = h->next)
		explicit_bzero(h->data, strlen(h->data));
	curl_slist_free_all(hdrs);
	free(payload);
	if (rep->body && strncmp(rep->content_type, "application/json", 16) == 0)
		rep->json = json_loadb(rep->body, rep->len, 0, NULL);
	if (cc != CURLE_OK && !(cc == CURLE_WRITE_ERROR && rep->status)) {
		if (!c->errbuf[0])
			snprintf(c->errbuf, sizeof(c->errbuf), "%s", curl_easy_strerror(cc));
		return -1;
	}
	return 0;
}

int client_exit_code(long status)
{
	if (status == 401)
		return EXIT_AUTH;
	if (status == 404)
		return EXIT_NOTFOUND;
	if (status >= 400 && status < 500)
		return EXIT_REFUSED;
	return EXIT_SERVER;
}

void client_print_json(json_t *v)
{
	char *s = json_dumps(v, JSON_COMPACT | JSON_ENCODE_ANY | JSON_REAL_PRECISION(15));

	if (s) {
		fputs(s, stdout);
		fputc('\n', stdout);
		free(s);
	}
	fflush(stdout);
}

int client_fail(struct client *c, const struct client_reply *rep, const char *what)
{
	json_t *err = rep && rep->json ? json_object_get(rep->json, "error") : NULL;
	const char *msg = json_string_value(json_object_get(err, "message"));
	const char *hint = json_string_value(json_object_get(err, "hint"));
	const char *code = json_string_value(json_object_get(err, "code"));
	int ex = rep ? client_exit_code(rep->status) : EXIT_SERVER;
	char text[1024];

	if (!rep)
		snprintf(text, sizeof(text), "cannot reach %s: %s", c->server, c->errbuf);
	else if (msg)
		snprintf(text, sizeof(text), "%s", msg);
	else
		snprintf(text, sizeof(text), "the server answered HTTP %ld", rep->status);
	fprintf(stderr, "gpucloud: %s: %s\n", what, text);
	if (hint && *hint)
		fprintf(stderr, "hint: %s\n", hint);
	else if (ex == EXIT_AUTH)
		fprintf(stderr, "hint: log in again with gpucloud login\n");
	if (c->json) {
		json_t *o = json_pack("{s:{s:s, s:s, s:s?}, s:i, s:I}", "error", "code",
		                      code ? code : (rep ? "http_error" : "network"), "message",
		                      text, "hint", hint, "exit_code", ex, "status",
		                      (json_int_t)(rep ? rep->status : 0));
		client_print_json(o);
		json_decref(o);
	}
	return ex;
}

json_t *client_call(struct client *c, const char *method, const char *path, json_t *body,
                    const char *what, int *code)
{
	struct client_req r = {
		.method = method, .path = path, .body = body, .upload_fd = -1, .upload_len = -1
	};
	struct client_reply rep = { 0 };
	json_t *out;

	if (client_send(c, &r, &rep) < 0) {
		*code = client_fail(c, NULL, what);
		client_reply_release(&rep);
		return NULL;
	}
	if (rep.status < 200 || rep.status >= 300) {
		*code = client_fail(c, &rep, what);
		client_reply_release(&rep);
		return NULL;
	}
	out = rep.json ? json_incref(rep.json) : json_object();
	client_reply_release(&rep);
	*code = EXIT_OK;
	return out;
}

char *client_escape(struct client *c, const char *s)
{
	CURL *h = curl_easy_init();
	char *e = h ? curl_easy_escape(h, s, 0) : NULL;

	(void)c;
	curl_easy_cleanup(h);
	return e;
}

void client_release(struct client *c)
{
	curl_share_cleanup(c->share);
	c->share = NULL;
	explicit_bzero(c->token, sizeof(c->token));
	explicit_bzero(c->csrf, sizeof(c->csrf));
}
