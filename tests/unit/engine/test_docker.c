/* test_docker.c — the Docker Engine API client against the real engines of
 * the test world.
 *
 * Needs the world's environment (source var/world/env after
 * `deploy/world.sh up`): GPUCLOUD_WORLD_DOCKER1/2 (unix sockets),
 * GPUCLOUD_WORLD_DOCKER1/2_TLS with GPUCLOUD_WORLD_TLS_CA/_CERT/_KEY (mutual
 * TLS), GPUCLOUD_WORLD_IMAGE and the registry credentials.  Without them the
 * suite fails rather than skips.  Containers it makes are named
 * gctest-docker-* and removed again; leftovers of an earlier run are removed
 * first.  Uses the openssl command to make a throwaway CA and certificate.
 */
#include "engine/docker.c"

#include "harness.h"

#include <event2/event.h>
#include <fcntl.h>
#include <jansson.h>
#include <openssl/evp.h>
#include <spawn.h>
#include <sys/wait.h>

extern char **environ;

static struct event_base *tb;
static const char *url1, *url2, *tls1, *tls2, *tca, *tcert, *tkey;
static const char *image, *registry, *reg_user, *reg_key;
static struct docker_engine *e1, *e2;
static int done; /* completions since start */

static long long now_ms(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (long long)ts.tv_sec * 1000 + ts.tv_nsec / 1000000;
}

/* Runs the loop until *n reaches want or ms pass; 1 when reached. */
static int wait_for(const int *n, int want, int ms)
{
	long long end = now_ms() + ms;
	struct timeval tv = { 0, 10000 };

	while (*n < want && now_ms() < end) {
		event_base_loopexit(tb, &tv);
		event_base_dispatch(tb);
	}
	return *n >= want;
}

static void spin(int ms)
{
	int never = 0;

	wait_for(&never, 1, ms);
}

struct rec {
	int calls;
	enum rc rc;
	int status;
	char *body;
	size_t len;
	char err[1024];
	long long at;
	/* streams */
	int ndata;
	char out[3][4096];
	size_t outlen[3];
	int stop_after;   /* on_data returns -1 at this piece (when > 0) */
	int cancel_after; /* on_data cancels its own call at this piece */
	int free_engine;  /* on_data frees this engine at piece 1 */
	struct docker_engine *eng;
	int spawn_ping; /* on_data starts a request at piece 1 */
	struct rec *child;
	struct docker_call *call;
};

static void rec_reset(struct rec *r)
{
	free(r->body);
	memset(r, 0, sizeof(*r));
}

static void rec_cb(struct docker_call *call, enum rc rc, int status, const char *body, size_t len,
                   const char *err, void *arg)
{
	struct rec *r = arg;

	(void)call;
	r->calls++;
	r->rc = rc;
	r->status = status;
	free(r->body);
	r->body = malloc(len + 1);
	if (r->body) {
		memcpy(r->body, body, len + 1);
		r->len = len;
	}
	snprintf(r->err, sizeof(r->err), "%s", err);
	r->at = now_ms();
	done++;
}

static int rec_data(struct docker_call *call, int stream, const char *data, size_t len, void *arg)
{
	struct rec *r = arg;
	size_t room;

	r->ndata++;
	if (stream < 0 || stream > 2)
		stream = 0;
	room = sizeof(r->out[stream]) - 1 - r->outlen[stream];
	if (len < room)
		room = len;
	memcpy(r->out[stream] + r->outlen[stream], data, room);
	r->outlen[stream] += room;
	r->out[stream][r->outlen[stream]] = '\0';
	if (r->spawn_ping && r->ndata == 1 && r->child)
		r->child->call = docker_request(r->eng, "GET", "/_ping", NULL, NULL, 0, NULL, 5000,
		                                rec_cb, r->child);
	if (r->free_engine && r->ndata == 1) {
		docker_engine_free(r->eng);
		r->eng = NULL;
	}
	if (r->cancel_after && r->ndata == r->cancel_after)
		docker_cancel(call);
	if (r->stop_after && r->ndata >= r->stop_after)
		return -1;
	return 0;
}

/* One request, waited for; 1 when it completed at all. */
static int call_sync(struct docker_engine *e, const char *method, const char *path,
                     const char *body, const char *const *headers, int timeout_ms, struct rec *r)
{
	rec_reset(r);
	if (!docker_request(e, method, path, body ? "application/json" : NULL, body,
	                    body ? strlen(body) : 0, headers, timeout_ms, rec_cb, r))
		return 0;
	return wait_for(&r->calls, 1, timeout_ms > 0 ? timeout_ms + 5000 : 60000);
}

static const char *str(const json_t *v)
{
	return json_is_string(v) ? json_string_value(v) : "";
}

static json_t *parse(const struct rec *r)
{
	json_error_t je;
	json_t *j = r->body ? json_loadb(r->body, r->len, 0, &je) : NULL;

	if (!j)
		fprintf(stderr, "not JSON: %.200s\n", r->body ? r->body : "(null)");
	return j;
}

/* ---- pure parts ---- */

TEST(test_frame_header)
{
	const unsigned char out5[] = { 1, 0, 0, 0, 0, 0, 0, 5, 'h' };
	const unsigned char err_big[] = { 2, 0, 0, 0, 1, 2, 3, 4 };
	const unsigned char in0[] = { 0, 0, 0, 0, 0, 0, 0, 0 };
	const unsigned char max[] = { 1, 0, 0, 0, 0xff, 0xff, 0xff, 0xff };
	const unsigned char bad_stream[] = { 3, 0, 0, 0, 0, 0, 0, 1 };
	const unsigned char bad_pad[] = { 1, 0, 1, 0, 0, 0, 0, 1 };
	const unsigned char json[] = "{\"message\":\"x\"}";
	int stream = -9;
	size_t payload = 77;

	CHECK(docker_frame_header(out5, sizeof(out5), &stream, &payload) == 8);
	CHECK(stream == 1 && payload == 5);
	CHECK(docker_frame_header(err_big, 8, &stream, &payload) == 8);
	CHECK(stream == 2 && payload == 0x01020304);
	CHECK(docker_frame_header(in0, 8, &stream, &payload) == 8);
	CHECK(stream == 0 && payload == 0);
	CHECK(docker_frame_header(max, 8, &stream, &payload) == 8);
	CHECK(payload == 0xffffffffu);
	/* Short but plausible: more is needed, outputs untouched. */
	stream = -9;
	payload = 77;
	for (size_t n = 0; n < 8; n++)
		CHECK(docker_frame_header(out5, n, &stream, &payload) == -2);
	CHECK(stream == -9 && payload == 77);
	/* Not a frame, as soon as the bytes show it. */
	CHECK(docker_frame_header(bad_stream, 8, &stream, &payload) == -1);
	CHECK(docker_frame_header(bad_stream, 1, &stream, &payload) == -1);
	CHECK(docker_frame_header(bad_pad, 8, &stream, &payload) == -1);
	CHECK(docker_frame_header(bad_pad, 3, &stream, &payload) == -1);
	CHECK(docker_frame_header(bad_pad, 2, &stream, &payload) == -2);
	CHECK(docker_frame_header(json, sizeof(json) - 1, &stream, &payload) == -1);
	CHECK(stream == -9 && payload == 77);
}

struct sink {
	char s[3][256];
	size_t n[3];
	int pieces;
	int stop_at; /* return -1 at this piece */
	int bad;
};

static int sink_emit(void *arg, int stream, const char *p, size_t n)
{
	struct sink *k = arg;

	k->pieces++;
	if (stream < 0 || stream > 2 || n == 0 || k->n[stream] + n >= sizeof(k->s[0])) {
		k->bad = 1;
		return -1;
	}
	memcpy(k->s[stream] + k->n[stream], p, n);
	k->n[stream] += n;
	return k->stop_at && k->pieces >= k->stop_at ? -1 : 0;
}

static size_t frame(unsigned char *b, int stream, const char *payload)
{
	size_t n = strlen(payload);

	b[0] = (unsigned char)stream;
	b[1] = b[2] = b[3] = 0;
	b[4] = (unsigned char)(n >> 24);
	b[5] = (unsigned char)(n >> 16);
	b[6] = (unsigned char)(n >> 8);
	b[7] = (unsigned char)n;
	memcpy(b + 8, payload, n);
	return 8 + n;
}

TEST(test_demux)
{
	unsigned char in[256];
	size_t len = 0, chunk, i, cut;
	struct demux d;
	struct sink k;

	len += frame(in + len, 1, "hello ");
	len += frame(in + len, 2, "oops\n");
	len += frame(in + len, 1, "");
	len += frame(in + len, 1, "world\n");
	len += frame(in + len, 0, "typed");

	/* Every chunk size, every single cut: the same streams come out. */
	for (chunk = 1; chunk <= len; chunk++) {
		memset(&d, 0, sizeof(d));
		memset(&k, 0, sizeof(k));
		for (i = 0; i < len; i += chunk)
			CHECK(demux_feed(&d, (const char *)in + i,
			                 i + chunk > len ? len - i : chunk, sink_emit, &k) == 0);
		CHECK(!k.bad);
		CHECK_STR(k.s[1], "hello world\n");
		CHECK_STR(k.s[2], "oops\n");
		CHECK_STR(k.s[0], "typed");
		CHECK(d.hlen == 0 && d.left == 0 && !d.raw);
	}
	for (cut = 0; cut <= len; cut++) {
		memset(&d, 0, sizeof(d));
		memset(&k, 0, sizeof(k));
		CHECK(demux_feed(&d, (const char *)in, cut, sink_emit, &k) == 0);
		CHECK(demux_feed(&d, (const char *)in + cut, len - cut, sink_emit, &k) == 0);
		CHECK_STR(k.s[1], "hello world\n");
		CHECK_STR(k.s[2], "oops\n");
	}

	/* A truncated stream leaves its state behind, nothing invented. */
	memset(&d, 0, sizeof(d));
	memset(&k, 0, sizeof(k));
	CHECK(demux_feed(&d, (const char *)in, 11, sink_emit, &k) == 0);
	CHECK_STR(k.s[1], "hel");
	CHECK(d.left == 3);

	/* Asked to stop: -1 and nothing more. */
	memset(&d, 0, sizeof(d));
	memset(&k, 0, sizeof(k));
	k.stop_at = 2;
	CHECK(demux_feed(&d, (const char *)in, len, sink_emit, &k) == -1);
	CHECK(k.pieces == 2);
	CHECK_STR(k.s[1], "hello ");
	CHECK_STR(k.s[2], "oops\n");

	/* Not framed (an error body, a TTY): passed on raw as stream 0. */
	memset(&d, 0, sizeof(d));
	memset(&k, 0, sizeof(k));
	CHECK(demux_feed(&d, "{\"message\":", 11, sink_emit, &k) == 0);
	CHECK(demux_feed(&d, "\"no\"}", 5, sink_emit, &k) == 0);
	CHECK_STR(k.s[0], "{\"message\":\"no\"}");
	CHECK(d.raw);
	/* ... even when the first bytes looked like a header. */
	memset(&d, 0, sizeof(d));
	memset(&k, 0, sizeof(k));
	CHECK(demux_feed(&d, "\x01\x00", 2, sink_emit, &k) == 0);
	CHECK(k.pieces == 0);
	CHECK(demux_feed(&d, "zz top", 6, sink_emit, &k) == 0);
	CHECK(k.n[0] == 8 && memcmp(k.s[0], "\x01\x00zz top", 8) == 0);
}

/* Marks: the first piece of each frame (and only it) carries
 * DOCKER_FRAME_START, however the frames are cut; unmarked without marks. */
struct marks {
	char seen[64]; /* per piece: 'S' marked, '.' not */
	int n;
	char text[128];
	size_t len;
};

static int marks_emit(void *arg, int stream, const char *p, size_t n)
{
	struct marks *m = arg;

	if (m->n < 63)
		m->seen[m->n++] = (stream & DOCKER_FRAME_START) ? 'S' : '.';
	if (stream & DOCKER_FRAME_START && m->len < sizeof(m->text) - 1)
		m->text[m->len++] = '|';
	memcpy(m->text + m->len, p, n < sizeof(m->text) - 1 - m->len ? n : 0);
	m->len += n < sizeof(m->text) - 1 - m->len ? n : 0;
	return 0;
}

TEST(test_demux_marks)
{
	unsigned char in[128];
	size_t len = 0, chunk, i;
	struct demux d;
	struct marks m;

	len += frame(in + len, 1, "2026-01-01T00:00:00.1Z a\n");
	len += frame(in + len, 2, "2026-01-01T00:00:00.2Z b\n");
	len += frame(in + len, 1, "");
	len += frame(in + len, 1, "2026-01-01T00:00:00.3Z c");
	for (chunk = 1; chunk <= len; chunk++) {
		memset(&d, 0, sizeof(d));
		memset(&m, 0, sizeof(m));
		d.marks = 1;
		for (i = 0; i < len; i += chunk)
			CHECK(demux_feed(&d, (const char *)in + i,
			                 i + chunk > len ? len - i : chunk, marks_emit, &m) == 0);
		m.text[m.len] = '\0';
		CHECK_STR(m.text, "|2026-01-01T00:00:00.1Z a\n|2026-01-01T00:00:00.2Z b\n"
		                  "|2026-01-01T00:00:00.3Z c");
		CHECK(m.seen[0] == 'S');
	}
	memset(&d, 0, sizeof(d));
	memset(&m, 0, sizeof(m));
	CHECK(demux_feed(&d, (const char *)in, len, marks_emit, &m) == 0);
	CHECK(strchr(m.seen, 'S') == NULL);
}

TEST(test_engine_new)
{
	char err[512];
	struct docker_engine *e;

	CHECK(!docker_engine_new("", NULL, NULL, NULL, err, sizeof(err)) && *err);
	CHECK(!docker_engine_new("http://127.0.0.1:2375", NULL, NULL, NULL, err, sizeof(err)));
	CHECK(strstr(err, "http://127.0.0.1:2375") != NULL);
	CHECK(!docker_engine_new("unix://relative.sock", NULL, NULL, NULL, err, sizeof(err)));
	CHECK(strstr(err, "absolute") != NULL);
	/* Plain TCP is refused, before anything is contacted. */
	CHECK(!docker_engine_new("tcp://127.0.0.1:2375", NULL, NULL, NULL, err, sizeof(err)));
	CHECK(strstr(err, "TLS") != NULL);
	fprintf(stderr, "  plain tcp: %s\n", err);
	CHECK(!docker_engine_new("tcp://127.0.0.1:2376", tca, "/nonexistent/cert.pem", tkey, err,
	                         sizeof(err)));
	CHECK(strstr(err, "/nonexistent/cert.pem") != NULL);
	CHECK(!docker_engine_new("tcp://", tca, tcert, tkey, err, sizeof(err)));
	CHECK(!docker_engine_new("tcp://a b:1", tca, tcert, tkey, err, sizeof(err)));
	CHECK(!docker_engine_new("tcp://host:1/path", tca, tcert, tkey, err, sizeof(err)));

	e = docker_engine_new("unix:///run/x.sock", "ignored", NULL, NULL, err, sizeof(err));
	CHECK(e && !*err);
	if (e) {
		CHECK_STR(e->sock, "/run/x.sock");
		CHECK_STR(e->base, "http://localhost/v1.41");
	}
	docker_engine_free(e);
	e = docker_engine_new("tcp://node7.example", tca, tcert, tkey, err, sizeof(err));
	CHECK(e != NULL);
	if (e)
		CHECK_STR(e->base, "https://node7.example:2376/v1.41");
	docker_engine_free(e);
	e = docker_engine_new("tcp://[::1]:2400/", tca, tcert, tkey, err, sizeof(err));
	CHECK(e != NULL);
	if (e)
		CHECK_STR(e->base, "https://[::1]:2400/v1.41");
	docker_engine_free(e);
	docker_engine_free(NULL);

	/* Requests that cannot be made are refused at once, cb never runs. */
	CHECK(!docker_request(e1, "GET", "info", NULL, NULL, 0, NULL, 0, rec_cb, NULL));
	CHECK(!docker_request(e1, "GET", "/info HTTP/1.1\r\nX: y", NULL, NULL, 0, NULL, 0, rec_cb,
	                      NULL));
	CHECK(!docker_request(e1, "get", "/info", NULL, NULL, 0, NULL, 0, rec_cb, NULL));
	CHECK(!docker_request(NULL, "GET", "/info", NULL, NULL, 0, NULL, 0, rec_cb, NULL));
	CHECK(!docker_stream(e1, "GET", "/info", NULL, NULL, 0, NULL, 0, 0, NULL, rec_cb, NULL));
	{
		const char *smuggle[] = { "X-Registry-Auth: a\r\nX-Evil: 1", NULL };

		CHECK(!docker_request(e1, "GET", "/info", NULL, NULL, 0, smuggle, 0, rec_cb, NULL));
	}
	CHECK(docker_calls_in_flight() == 0);
}

/* ---- against the engines ---- */

TEST(test_info)
{
	struct docker_engine *es[2] = { e1, e2 };
	struct rec r = { 0 };
	json_t *j;

	for (int i = 0; i < 2; i++) {
		rec_reset(&r);
		CHECK(docker_request(es[i], "GET", "/info", NULL, NULL, 0, NULL, 10000, rec_cb,
		                     &r));
		/* Never synchronous, even when the answer is at hand. */
		CHECK(r.calls == 0);
		CHECK(docker_calls_in_flight() == 1);
		CHECK(wait_for(&r.calls, 1, 15000));
		CHECK(r.calls == 1 && r.rc == RC_OK && r.status == 200);
		CHECK_STR(r.err, "");
		CHECK(r.body && r.len == strlen(r.body));
		j = parse(&r);
		CHECK(j != NULL);
		CHECK(json_integer_value(json_object_get(j, "NCPU")) > 0);
		CHECK(json_integer_value(json_object_get(j, "MemTotal")) > 0);
		CHECK(json_string_value(json_object_get(j, "ServerVersion")) != NULL);
		json_decref(j);
	}
	CHECK(docker_calls_in_flight() == 0);
	rec_reset(&r);
}

TEST(test_version)
{
	struct rec r = { 0 };
	json_t *j;

	CHECK(call_sync(e2, "GET", "/version", NULL, NULL, 10000, &r));
	CHECK(r.rc == RC_OK && r.status == 200);
	j = parse(&r);
	CHECK(json_string_value(json_object_get(j, "ApiVersion")) != NULL);
	CHECK(json_string_value(json_object_get(j, "Version")) != NULL);
	json_decref(j);
	CHECK(call_sync(e1, "GET", "/_ping", NULL, NULL, 10000, &r));
	CHECK(r.rc == RC_OK && r.status == 200);
	CHECK_STR(r.body, "OK");
	rec_reset(&r);
}

TEST(test_tls)
{
	const char *urls[2] = { tls1, tls2 };
	struct docker_engine *e;
	struct rec r = { 0 };
	char err[512];
	json_t *j;

	for (int i = 0; i < 2; i++) {
		e = docker_engine_new(urls[i], tca, tcert, tkey, err, sizeof(err));
		CHECK(e != NULL);
		if (!e) {
			fprintf(stderr, "%s\n", err);
			continue;
		}
		CHECK(call_sync(e, "GET", "/info", NULL, NULL, 10000, &r));
		CHECK(r.rc == RC_OK && r.status == 200);
		j = parse(&r);
		CHECK(json_integer_value(json_object_get(j, "NCPU")) > 0);
		json_decref(j);
		/* Again, on the connection kept from the first. */
		CHECK(call_sync(e, "GET", "/_ping", NULL, NULL, 10000, &r));
		CHECK(r.rc == RC_OK && r.status == 200);
		CHECK_STR(r.body, "OK");
		docker_engine_free(e);
	}
	rec_reset(&r);
}

/* Runs argv to completion, its output to /dev/null; 1 when it exited 0. */
static int run(char *const argv[])
{
	posix_spawn_file_actions_t fa;
	int st = -1, ok;
	pid_t pid;

	posix_spawn_file_actions_init(&fa);
	posix_spawn_file_actions_addopen(&fa, 1, "/dev/null", O_WRONLY, 0);
	posix_spawn_file_actions_addopen(&fa, 2, "/dev/null", O_WRONLY, 0);
	ok = posix_spawnp(&pid, argv[0], &fa, NULL, argv, environ) == 0 &&
	     waitpid(pid, &st, 0) == pid && WIFEXITED(st) && WEXITSTATUS(st) == 0;
	posix_spawn_file_actions_destroy(&fa);
	if (!ok)
		fprintf(stderr, "command failed: %s %s\n", argv[0], argv[1]);
	return ok;
}

static const char *const pki_files[] = { "ca-key.pem", "ca.pem",   "key.pem",
	                                 "csr.pem",    "cert.pem", "ca.srl" };

/* A CA nobody trusts and a client certificate it signed, in dir. */
static int make_intruder(const char *dir)
{
	char cakey[300], ca[300], key[300], csr[300], cert[300];
	char *const req_ca[] = { "openssl",
		                 "req",
		                 "-x509",
		                 "-newkey",
		                 "ec",
		                 "-pkeyopt",
		                 "ec_paramgen_curve:prime256v1",
		                 "-nodes",
		                 "-keyout",
		                 cakey,
		                 "-out",
		                 ca,
		                 "-days",
		                 "1",
		                 "-subj",
		                 "/CN=throwaway CA",
		                 NULL };
	char *const req_cl[] = { "openssl",      "req",      "-newkey",
		                 "ec",           "-pkeyopt", "ec_paramgen_curve:prime256v1",
		                 "-nodes",       "-keyout",  key,
		                 "-out",         csr,        "-subj",
		                 "/CN=intruder", NULL };
	char *const sign[] = { "openssl", "x509", "-req",   "-in", csr,
		               "-CA",     ca,     "-CAkey", cakey, "-CAcreateserial",
		               "-days",   "1",    "-out",   cert,  NULL };

	snprintf(cakey, sizeof(cakey), "%s/ca-key.pem", dir);
	snprintf(ca, sizeof(ca), "%s/ca.pem", dir);
	snprintf(key, sizeof(key), "%s/key.pem", dir);
	snprintf(csr, sizeof(csr), "%s/csr.pem", dir);
	snprintf(cert, sizeof(cert), "%s/cert.pem", dir);
	return run(req_ca) && run(req_cl) && run(sign);
}

static void expect_refused(struct docker_engine *e, const char *what)
{
	struct rec r = { 0 };

	CHECK(e != NULL);
	if (!e)
		return;
	CHECK(call_sync(e, "GET", "/_ping", NULL, NULL, 10000, &r));
	CHECK(r.rc == RC_UNAVAILABLE);
	CHECK(r.status == 0);
	CHECK(r.err[0] != '\0');
	CHECK(r.len == 0 && r.body && r.body[0] == '\0');
	fprintf(stderr, "  %s: %s\n", what, r.err);
	rec_reset(&r);
}

TEST(test_tls_refused)
{
	char dir[] = "/tmp/gctest-docker-pki-XXXXXX";
	char cert[300], key[300], ca[300], err[512], path[300];
	struct docker_engine *e;

	/* No client certificate at all (the API cannot be asked for that: the
	 * engine is built, then stripped). */
	e = docker_engine_new(tls1, tca, tcert, tkey, err, sizeof(err));
	if (e) {
		free(e->cert);
		free(e->key);
		e->cert = e->key = NULL;
	}
	expect_refused(e, "no client certificate");
	docker_engine_free(e);

	CHECK(mkdtemp(dir) != NULL);
	if (!make_intruder(dir)) {
		CHECK(!"could not make the throwaway certificates");
		goto out;
	}
	snprintf(cert, sizeof(cert), "%s/cert.pem", dir);
	snprintf(key, sizeof(key), "%s/key.pem", dir);
	snprintf(ca, sizeof(ca), "%s/ca.pem", dir);
	/* A client certificate from a CA the engine does not know. */
	e = docker_engine_new(tls1, tca, cert, key, err, sizeof(err));
	expect_refused(e, "foreign client certificate");
	docker_engine_free(e);
	/* An engine whose certificate our CA did not sign. */
	e = docker_engine_new(tls2, ca, tcert, tkey, err, sizeof(err));
	expect_refused(e, "engine certificate not from our CA");
	docker_engine_free(e);
out:
	for (size_t i = 0; i < sizeof(pki_files) / sizeof(pki_files[0]); i++) {
		snprintf(path, sizeof(path), "%s/%s", dir, pki_files[i]);
		unlink(path);
	}
	rmdir(dir);
}

TEST(test_unreachable)
{
	struct docker_engine *e;
	struct rec r = { 0 };
	char err[512];
	long long t0;

	e = docker_engine_new("unix:///nonexistent/gctest-docker.sock", NULL, NULL, NULL, err,
	                      sizeof(err));
	CHECK(e != NULL);
	t0 = now_ms();
	CHECK(docker_request(e, "GET", "/info", NULL, NULL, 0, NULL, 0, rec_cb, &r));
	CHECK(r.calls == 0);
	CHECK(wait_for(&r.calls, 1, 5000));
	CHECK(r.rc == RC_UNAVAILABLE && r.status == 0);
	CHECK(strstr(r.err, "/nonexistent/gctest-docker.sock") != NULL);
	CHECK(strstr(r.err, "No such file or directory") != NULL);
	CHECK(now_ms() - t0 < 1000);
	fprintf(stderr, "  missing socket: %s\n", r.err);
	docker_engine_free(e);

	/* Nothing listens on port 1. */
	e = docker_engine_new("tcp://127.0.0.1:1", tca, tcert, tkey, err, sizeof(err));
	t0 = now_ms();
	CHECK(call_sync(e, "GET", "/info", NULL, NULL, 5000, &r));
	CHECK(r.rc == RC_UNAVAILABLE && r.err[0]);
	CHECK(now_ms() - t0 < 1000);
	docker_engine_free(e);
	rec_reset(&r);
}

TEST(test_statuses)
{
	struct rec r = { 0 };
	json_t *j;

	CHECK(call_sync(e1, "GET", "/no/such/thing", NULL, NULL, 10000, &r));
	CHECK(r.rc == RC_OK && r.status == 404);
	CHECK_STR(r.err, "");
	CHECK(call_sync(e1, "GET", "/containers/gctest-docker-none/json", NULL, NULL, 10000, &r));
	CHECK(r.rc == RC_OK && r.status == 404);
	j = parse(&r);
	CHECK(strstr(str(json_object_get(j, "message")), "No such container"));
	json_decref(j);
	/* A body reaches the engine with its content type: it is parsed... */
	CHECK(call_sync(e1, "POST", "/containers/create?name=gctest-docker-bad",
	                "{\"Image\":\"gctest-docker/none:1\"}", NULL, 10000, &r));
	CHECK(r.rc == RC_OK && r.status == 404);
	CHECK(r.body && strstr(r.body, "No such image"));
	/* ... and the type is the one given. */
	rec_reset(&r);
	CHECK(docker_request(e1, "POST", "/containers/create?name=gctest-docker-bad", "text/plain",
	                     "{}", 2, NULL, 10000, rec_cb, &r));
	CHECK(wait_for(&r.calls, 1, 15000));
	CHECK(r.rc == RC_OK && r.status == 400);
	CHECK(r.body && strstr(r.body, "text/plain"));
	rec_reset(&r);
}

TEST(test_too_large)
{
	struct rec r = { 0 };
	size_t saved = body_max;

	body_max = 512; /* /info is a few KiB */
	CHECK(call_sync(e1, "GET", "/info", NULL, NULL, 10000, &r));
	body_max = saved;
	CHECK(r.rc == RC_DOCKER && r.len == 0);
	CHECK(strstr(r.err, "larger than 512 bytes") != NULL);
	CHECK(call_sync(e1, "GET", "/info", NULL, NULL, 10000, &r));
	CHECK(r.rc == RC_OK && r.len > 512);
	rec_reset(&r);
}

TEST(test_timeout)
{
	struct rec r = { 0 };
	long long t0 = now_ms(), took;

	/* /events answers at once and then never ends. */
	CHECK(docker_request(e1, "GET", "/events", NULL, NULL, 0, NULL, 500, rec_cb, &r));
	CHECK(wait_for(&r.calls, 1, 5000));
	took = now_ms() - t0;
	CHECK(r.rc == RC_TIMEOUT);
	CHECK(r.status == 200);
	CHECK(r.err[0] != '\0');
	CHECK(took >= 450 && took < 2500);
	fprintf(stderr, "  timeout after %lld ms: %s\n", took, r.err);
	rec_reset(&r);
}

TEST(test_concurrent)
{
	enum { N = 50 };
	struct rec r[N];
	int i, ok = 0;
	long long t0 = now_ms();

	memset(r, 0, sizeof(r));
	done = 0;
	for (i = 0; i < N; i++)
		CHECK(docker_request(i % 2 ? e2 : e1, "GET", i % 3 ? "/version" : "/info", NULL,
		                     NULL, 0, NULL, 30000, rec_cb, &r[i]) != NULL);
	CHECK(docker_calls_in_flight() == N);
	CHECK(wait_for(&done, N, 40000));
	for (i = 0; i < N; i++) {
		CHECK(r[i].calls == 1);
		ok += r[i].rc == RC_OK && r[i].status == 200 && r[i].len > 0;
		rec_reset(&r[i]);
	}
	CHECK(ok == N);
	CHECK(docker_calls_in_flight() == 0);
	fprintf(stderr, "  %d concurrent requests in %lld ms\n", N, now_ms() - t0);
}

TEST(test_engine_free)
{
	struct docker_engine *e;
	struct rec r[3];
	struct rec late = { 0 };
	char err[512];
	int i;

	memset(r, 0, sizeof(r));
	e = docker_engine_new(url2, NULL, NULL, NULL, err, sizeof(err));
	CHECK(e != NULL);
	done = 0;
	for (i = 0; i < 3; i++)
		CHECK(docker_request(e, "GET", "/events", NULL, NULL, 0, NULL, 0, rec_cb, &r[i]));
	spin(300); /* connected, answered, streaming */
	CHECK(done == 0);
	/* One more that has not even begun. */
	CHECK(docker_request(e, "GET", "/_ping", NULL, NULL, 0, NULL, 0, rec_cb, &late));
	docker_engine_free(e);
	CHECK(done == 0); /* deferred */
	CHECK(wait_for(&done, 4, 2000));
	for (i = 0; i < 3; i++) {
		CHECK(r[i].calls == 1 && r[i].rc == RC_UNAVAILABLE && r[i].err[0]);
		rec_reset(&r[i]);
	}
	CHECK(late.calls == 1 && late.rc == RC_UNAVAILABLE);
	fprintf(stderr, "  engine freed: %s\n", late.err);
	rec_reset(&late);
	spin(50);
	CHECK(done == 4);
	CHECK(docker_calls_in_flight() == 0);
}

/* ---- images and containers ---- */

static char *registry_auth(const char *password)
{
	json_t *j = json_pack("{s:s, s:s, s:s}", "username", reg_user, "password", password,
	                      "serveraddress", registry);
	char *s = j ? json_dumps(j, JSON_COMPACT) : NULL;
	size_t n = s ? strlen(s) : 0;
	static const char name[] = "X-Registry-Auth: ";
	char *out = s ? malloc(sizeof(name) + 4 * (n / 3 + 1)) : NULL;
	int k;

	json_decref(j);
	if (!out) {
		free(s);
		return NULL;
	}
	memcpy(out, name, sizeof(name) - 1);
	k = EVP_EncodeBlock((unsigned char *)out + sizeof(name) - 1, (unsigned char *)s, (int)n);
	out[sizeof(name) - 1 + k] = '\0';
	/* The engine wants the URL-safe alphabet. */
	for (char *p = out + sizeof(name) - 1; *p; p++)
		*p = *p == '+' ? '-' : *p == '/' ? '_' : *p;
	free(s);
	return out;
}

/* "POST /images/create?fromImage=REPO&tag=TAG" for image. */
static void pull_path(char *buf, size_t len)
{
	const char *slash = strrchr(image, '/');
	const char *colon = strrchr(slash ? slash : image, ':');

	if (!colon)
		snprintf(buf, len, "/images/create?fromImage=%s&tag=latest", image);
	else
		snprintf(buf, len, "/images/create?fromImage=%.*s&tag=%s", (int)(colon - image),
		         image, colon + 1);
}

TEST(test_pull)
{
	struct docker_engine *es[2] = { e1, e2 };
	char path[512];
	char *good = registry_auth(reg_key), *bad = registry_auth("wrong-key");
	const char *hgood[] = { good, NULL }, *hbad[] = { bad, NULL };
	struct rec r = { 0 };

	pull_path(path, sizeof(path));
	for (int i = 0; i < 2; i++) {
		/* Wrong key: refused, as an error status or inside the stream. */
		rec_reset(&r);
		CHECK(docker_stream(es[i], "POST", path, NULL, NULL, 0, hbad, 60000, 0, rec_data,
		                    rec_cb, &r));
		CHECK(wait_for(&r.calls, 1, 65000));
		CHECK(r.rc == RC_OK);
		if (r.status == 200) {
			CHECK(strstr(r.out[0], "unauthorized") != NULL);
		} else {
			CHECK(r.status >= 400);
			CHECK(r.ndata == 0);
			CHECK(r.body && strstr(r.body, "unauthorized"));
		}
		/* The right key: progress lines as raw stream data. */
		rec_reset(&r);
		CHECK(docker_stream(es[i], "POST", path, NULL, NULL, 0, hgood, 120000, 0, rec_data,
		                    rec_cb, &r));
		CHECK(wait_for(&r.calls, 1, 125000));
		CHECK(r.rc == RC_OK && r.status == 200);
		CHECK(r.ndata >= 1 && r.len == 0);
		CHECK(strstr(r.out[0], "Downloaded newer image") ||
		      strstr(r.out[0], "Image is up to date"));
		if (r.rc != RC_OK || r.status != 200)
			fprintf(stderr, "pull: %d %s %s\n", r.status, r.err, r.out[0]);
	}
	rec_reset(&r);
	free(good);
	free(bad);
}

/* Creates and starts a container running cmd; its id goes to id. */
static int run_container(struct docker_engine *e, const char *name, const char *cmd, char *id,
                         size_t idlen)
{
	char path[256];
	struct rec r = { 0 };
	json_t *spec, *j;
	char *body;
	int ok = 0;

	spec = json_pack("{s:s, s:[s,s,s], s:b, s:{s:s}, s:{s:s}}", "Image", image, "Cmd", "sh",
	                 "-c", cmd, "Tty", 0, "Labels", "gpucloud.test", "docker", "HostConfig",
	                 "NetworkMode", "none");
	body = json_dumps(spec, JSON_COMPACT);
	json_decref(spec);
	snprintf(path, sizeof(path), "/containers/create?name=%s", name);
	if (call_sync(e, "POST", path, body, NULL, 30000, &r) && r.status == 201) {
		j = parse(&r);
		snprintf(id, idlen, "%s", str(json_object_get(j, "Id")));
		json_decref(j);
		snprintf(path, sizeof(path), "/containers/%s/start", id);
		ok = *id && call_sync(e, "POST", path, NULL, NULL, 30000, &r) && r.status == 204;
	}
	if (!ok)
		fprintf(stderr, "run_container %s: %d %s %s\n", name, r.status, r.err,
		        r.body ? r.body : "");
	free(body);
	rec_reset(&r);
	return ok;
}

static void remove_container(struct docker_engine *e, const char *id)
{
	char path[256];
	struct rec r = { 0 };

	snprintf(path, sizeof(path), "/containers/%s?force=1&v=1", id);
	CHECK(call_sync(e, "DELETE", path, NULL, NULL, 30000, &r));
	CHECK(r.rc == RC_OK && (r.status == 204 || r.status == 404));
	rec_reset(&r);
}

/* Removes what an earlier, interrupted run of this suite left behind. */
static void sweep(struct docker_engine *e)
{
	struct rec r = { 0 };
	json_t *list, *c;
	size_t i;

	if (!call_sync(
	            e, "GET",
	            "/containers/json?all=1&filters=%7B%22name%22%3A%5B%22gctest-docker-%22%5D%7D",
	            NULL, NULL, 30000, &r) ||
	    r.status != 200)
		return;
	list = parse(&r);
	json_array_foreach(list, i, c)
	{
		const char *id = json_string_value(json_object_get(c, "Id"));

		if (id)
			remove_container(e, id);
	}
	json_decref(list);
	rec_reset(&r);
}

TEST(test_logs)
{
	char name[64], id[128] = "", path[256];
	struct rec r = { 0 };
	json_t *j;
	int stream;
	size_t payload;

	snprintf(name, sizeof(name), "gctest-docker-%d-logs", (int)getpid());
	if (!run_container(e1, name, "echo out; echo err >&2", id, sizeof(id))) {
		CHECK(!"could not run the container");
		return;
	}
	snprintf(path, sizeof(path), "/containers/%s/wait", id);
	CHECK(call_sync(e1, "POST", path, NULL, NULL, 30000, &r));
	CHECK(r.rc == RC_OK && r.status == 200);
	j = parse(&r);
	CHECK(json_integer_value(json_object_get(j, "StatusCode")) == 0);
	CHECK(json_object_get(j, "StatusCode") != NULL);
	json_decref(j);

	/* Demultiplexed. */
	rec_reset(&r);
	snprintf(path, sizeof(path), "/containers/%s/logs?stdout=1&stderr=1", id);
	CHECK(docker_stream(e1, "GET", path, NULL, NULL, 0, NULL, 30000, 1, rec_data, rec_cb, &r));
	CHECK(wait_for(&r.calls, 1, 35000));
	CHECK(r.rc == RC_OK && r.status == 200 && r.len == 0);
	CHECK_STR(r.out[1], "out\n");
	CHECK_STR(r.out[2], "err\n");
	CHECK_STR(r.out[0], "");

	/* Whole: the frames are there for anyone who wants them. */
	CHECK(call_sync(e1, "GET", path, NULL, NULL, 30000, &r));
	CHECK(r.rc == RC_OK && r.status == 200 && r.len == 2 * (8 + 4));
	CHECK(docker_frame_header((unsigned char *)r.body, r.len, &stream, &payload) == 8);
	CHECK(payload == 4 && (stream == 1 || stream == 2));

	/* An error answer to a stream goes to cb, not to on_data. */
	rec_reset(&r);
	CHECK(docker_stream(e1, "GET", "/containers/gctest-docker-none/logs?stdout=1", NULL, NULL,
	                    0, NULL, 30000, 1, rec_data, rec_cb, &r));
	CHECK(wait_for(&r.calls, 1, 35000));
	CHECK(r.rc == RC_OK && r.status == 404 && r.ndata == 0);
	CHECK(r.body && strstr(r.body, "No such container"));

	remove_container(e1, id);
	rec_reset(&r);
}

TEST(test_cancel)
{
	char name[64], id[128] = "", path[256];
	struct rec r = { 0 }, child = { 0 };
	struct docker_call *call;
	struct docker_engine *e;
	char err[512];
	int base_calls = docker_calls_in_flight();

	snprintf(name, sizeof(name), "gctest-docker-%d-ticker", (int)getpid());
	if (!run_container(e2, name, "while true; do echo tick; echo tock >&2; sleep 0.05; done",
	                   id, sizeof(id))) {
		CHECK(!"could not run the container");
		return;
	}
	snprintf(path, sizeof(path), "/containers/%s/logs?stdout=1&stderr=1&follow=1", id);

	/* From outside, mid-stream: no callback, ever. */
	done = 0;
	call = docker_stream(e2, "GET", path, NULL, NULL, 0, NULL, 0, 1, rec_data, rec_cb, &r);
	CHECK(call != NULL);
	CHECK(wait_for(&r.ndata, 3, 10000));
	docker_cancel(call);
	r.ndata = 0;
	spin(300);
	CHECK(r.calls == 0 && r.ndata == 0 && done == 0);
	CHECK(docker_calls_in_flight() == base_calls);

	/* on_data says stop: cb once, RC_OK with the status. */
	rec_reset(&r);
	r.stop_after = 2;
	CHECK(docker_stream(e2, "GET", path, NULL, NULL, 0, NULL, 0, 1, rec_data, rec_cb, &r));
	CHECK(wait_for(&r.calls, 1, 10000));
	spin(200);
	CHECK(r.calls == 1 && r.rc == RC_OK && r.status == 200 && r.ndata == 2);
	CHECK(strstr(r.out[1], "tick") || strstr(r.out[2], "tock"));

	/* on_data cancels its own call: no cb, no more data. */
	rec_reset(&r);
	r.cancel_after = 2;
	done = 0;
	CHECK(docker_stream(e2, "GET", path, NULL, NULL, 0, NULL, 0, 1, rec_data, rec_cb, &r));
	CHECK(wait_for(&r.ndata, 2, 10000));
	spin(300);
	CHECK(r.calls == 0 && r.ndata == 2 && done == 0);
	CHECK(docker_calls_in_flight() == base_calls);

	/* on_data starts a request and then stops: both complete. */
	rec_reset(&r);
	r.spawn_ping = 1;
	r.eng = e2;
	r.child = &child;
	r.stop_after = 1;
	CHECK(docker_stream(e2, "GET", path, NULL, NULL, 0, NULL, 0, 1, rec_data, rec_cb, &r));
	CHECK(wait_for(&child.calls, 1, 10000));
	CHECK(wait_for(&r.calls, 1, 10000));
	CHECK(child.call != NULL);
	CHECK(child.rc == RC_OK && child.status == 200);
	CHECK_STR(child.body, "OK");
	CHECK(r.calls == 1 && r.rc == RC_OK);

	/* on_data frees its own engine: cb once, UNAVAILABLE, later. */
	rec_reset(&r);
	e = docker_engine_new(url2, NULL, NULL, NULL, err, sizeof(err));
	r.free_engine = 1;
	r.eng = e;
	CHECK(docker_stream(e, "GET", path, NULL, NULL, 0, NULL, 0, 1, rec_data, rec_cb, &r));
	CHECK(wait_for(&r.calls, 1, 10000));
	spin(200);
	CHECK(r.calls == 1 && r.rc == RC_UNAVAILABLE && r.ndata == 1);
	CHECK(r.eng == NULL);
	CHECK(docker_calls_in_flight() == base_calls);

	remove_container(e2, id);
	rec_reset(&r);
	rec_reset(&child);
}

/* Last: the client goes away with calls in flight, and comes back. */
TEST(test_shutdown)
{
	struct rec r[3], after = { 0 };
	int i;

	memset(r, 0, sizeof(r));
	done = 0;
	for (i = 0; i < 3; i++)
		CHECK(docker_request(i ? e1 : e2, "GET", i == 2 ? "/_ping" : "/events", NULL, NULL,
		                     0, NULL, 0, rec_cb, &r[i]));
	spin(200);
	CHECK(done == 1); /* the ping */
	CHECK(docker_request(e1, "GET", "/_ping", NULL, NULL, 0, NULL, 0, rec_cb, &after));
	docker_shutdown();
	CHECK(done == 1);
	CHECK(!docker_request(e1, "GET", "/_ping", NULL, NULL, 0, NULL, 0, rec_cb, &after));
	CHECK(wait_for(&done, 4, 2000));
	CHECK(r[0].rc == RC_UNAVAILABLE && r[1].rc == RC_UNAVAILABLE);
	CHECK(after.calls == 1 && after.rc == RC_UNAVAILABLE);
	CHECK(docker_calls_in_flight() == 0);
	docker_shutdown(); /* twice is harmless */

	CHECK(docker_init(tb) == 0);
	CHECK(docker_init(tb) == -1);
	CHECK(call_sync(e1, "GET", "/_ping", NULL, NULL, 5000, &after));
	CHECK(after.rc == RC_OK && after.status == 200);
	for (i = 0; i < 3; i++)
		rec_reset(&r[i]);
	rec_reset(&after);
}

static const char *need(const char *name)
{
	const char *v = getenv(name);

	if (!v || !*v) {
		fprintf(stderr,
		        "test_docker: %s is not set; source var/world/env after "
		        "`deploy/world.sh up`\n",
		        name);
		return NULL;
	}
	return v;
}

int main(void)
{
	char err[512];

	if (!(url1 = need("GPUCLOUD_WORLD_DOCKER1")) || !(url2 = need("GPUCLOUD_WORLD_DOCKER2")) ||
	    !(tls1 = need("GPUCLOUD_WORLD_DOCKER1_TLS")) ||
	    !(tls2 = need("GPUCLOUD_WORLD_DOCKER2_TLS")) ||
	    !(tca = need("GPUCLOUD_WORLD_TLS_CA")) || !(tcert = need("GPUCLOUD_WORLD_TLS_CERT")) ||
	    !(tkey = need("GPUCLOUD_WORLD_TLS_KEY")) || !(image = need("GPUCLOUD_WORLD_IMAGE")) ||
	    !(registry = need("GPUCLOUD_WORLD_REGISTRY")) ||
	    !(reg_user = need("GPUCLOUD_WORLD_REGISTRY_USER")) ||
	    !(reg_key = need("GPUCLOUD_WORLD_REGISTRY_KEY")))
		return 1;
	tb = event_base_new();
	if (!tb || docker_init(tb) != 0) {
		fprintf(stderr, "test_docker: cannot start the client\n");
		return 1;
	}
	e1 = docker_engine_new(url1, NULL, NULL, NULL, err, sizeof(err));
	e2 = e1 ? docker_engine_new(url2, NULL, NULL, NULL, err, sizeof(err)) : NULL;
	if (!e2) {
		fprintf(stderr, "test_docker: %s\n", err);
		return 1;
	}
	sweep(e1);
	sweep(e2);
	RUN(test_frame_header);
	RUN(test_demux);
	RUN(test_demux_marks);
	RUN(test_engine_new);
	RUN(test_info);
	RUN(test_version);
	RUN(test_tls);
	RUN(test_tls_refused);
	RUN(test_unreachable);
	RUN(test_statuses);
	RUN(test_too_large);
	RUN(test_timeout);
	RUN(test_concurrent);
	RUN(test_engine_free);
	RUN(test_pull);
	RUN(test_logs);
	RUN(test_cancel);
	RUN(test_shutdown);
	docker_engine_free(e1);
	docker_engine_free(e2);
	docker_shutdown();
	event_base_dispatch(tb);
	event_base_free(tb);
	return harness_done("test_docker");
}
