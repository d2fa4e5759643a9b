/* terminal.c — browser terminals into running instances: a websocket on
 * the API origin bridged to `docker exec` with a TTY.
 *
 * Owns: the websocket handshake of GET /api/v1/instances/{id}/terminal
 * (Origin must be the API's own: a cross-site page cannot open a shell with
 * the user's cookie), the exec (create through the engine client, then a raw
 * hijacked connection of our own for POST /exec/{id}/start with
 * "Upgrade: tcp": libcurl does not hand over upgraded streams), the frame
 * loop (ws.c parses; input, resize, ping/pong, close), backpressure both
 * ways, and a periodic re-check that closes terminals whose instance stopped
 * or whose session or API token ended.
 * Does not own: instances, nodes' engines (nodes_engine), sessions.
 */
#include "apps/terminal.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <sys/socket.h>
#include <sys/un.h>

#include <event2/buffer.h>
#include <event2/bufferevent.h>
#include <event2/bufferevent_ssl.h>
#include <event2/util.h>
#include <http_parser.h>
#include <jansson.h>
#include <openssl/ssl.h>

#include "auth/auth.h"
#include "base/config.h"
#include "db/db.h"
#include "engine/docker.h"
#include "base/log.h"
#include "engine/nodes.h"
#include "net/ws.h"

#define MAX_FRAME (1 << 20)
#define OUT_HIGH  (256 * 1024)
#define OUT_LOW   (64 * 1024)
#define HEAD_MAX  8192
#define EXEC_CMD  "if command -v bash >/dev/null 2>&1; then exec bash -l; else exec sh -l; fi"

struct term {
	unsigned long long serial;
	struct http_req *r; /* until the upgrade */
	long long instance_id, node_id, session_id, token_id, user_id;
	char container[96];
	char exec_id[96];
	char key[32]; /* Sec-WebSocket-Key */
	char url[512];
	SSL_CTX *ssl;
	struct bufferevent *eb; /* the engine's hijacked exec stream */
	struct bufferevent *cb; /* the browser, after the upgrade */
	int upgraded;           /* the engine answered 101 */
	int msg_opcode;         /* first opcode of the fragmented message in progress */
	struct evbuffer *ctl;   /* a control message being assembled */
	int closing;            /* flush the browser's output, then free */
	struct term *prev, *next;
};

static struct event_base *ev_base;
static struct event *recheck_timer;
static struct term *terms;
static unsigned long long next_serial;

static void term_unlink(struct term *t)
{
	if (t->prev)
		t->prev->next = t->next;
	else if (terms == t)
		terms = t->next;
	if (t->next)
		t->next->prev = t->prev;
	t->prev = t->next = NULL;
}

static void term_free(struct term *t)
{
	if (!t)
		return;
	term_unlink(t);
	if (t->eb)
		bufferevent_free(t->eb);
	if (t->cb)
		bufferevent_free(t->cb);
	if (t->ctl)
		evbuffer_free(t->ctl);
	if (t->ssl)
		SSL_CTX_free(t->ssl);
	free(t);
}

static struct term *term_find(unsigned long long serial)
{
	for (struct term *t = terms; t; t = t->next)
		if (t->serial == serial)
			return t;
	return NULL;
}

/* Before the upgrade: the one reply (frees r), then t. */
static void fail(struct term *t, enum rc rc, const char *hint, const char *msg)
{
	struct http_req *r = t->r;

	t->r = NULL;
	term_free(t);
	http_reply_error(r, rc, hint, "%s", msg);
}

/* ---- frames to the browser ---- */

static void send_frame(struct term *t, int opcode, const void *data, size_t len)
{
	uint8_t h[14];
	size_t hl = ws_header(h, opcode, 1, len);
	struct evbuffer *out = bufferevent_get_output(t->cb);

	evbuffer_add(out, h, hl);
	if (len)
		evbuffer_add(out, data, len);
}

/* Sends a close frame and closes once it is written. */
static void close_with(struct term *t, int code, const char *reason)
{
	uint8_t p[128];
	size_t n = strlen(reason);

	if (t->closing || !t->cb) {
		term_free(t);
		return;
	}
	if (n > sizeof(p) - 2)
		n = sizeof(p) - 2;
	p[0] = (uint8_t)(code >> 8);
	p[1] = (uint8_t)code;
	memcpy(p + 2, reason, n);
	send_frame(t, WS_CLOSE, p, n + 2);
	t->closing = 1;
	if (t->eb) {
		bufferevent_free(t->eb);
		t->eb = NULL;
	}
	bufferevent_disable(t->cb, EV_READ);
	bufferevent_setwatermark(t->cb, EV_WRITE, 0, 0);
}

/* ---- the bridge ---- */

static void resize_done(struct docker_call *call, enum rc rc, int status, const char *body,
                        size_t len, const char *err, void *arg)
{
	(void)call;
	(void)body;
	(void)len;
	(void)arg;
	if (rc != RC_OK || status >= 300)
		log_msg(LOG_DEBUG, "terminal", NULL, "resize failed: %d %s", status, err);
}

static void control(struct term *t)
{
	size_t n = evbuffer_get_length(t->ctl);
	json_t *j = json_loadb((const char *)evbuffer_pullup(t->ctl, -1), n, 0, NULL);
	json_int_t cols, rows;
	struct docker_engine *e = nodes_engine(t->node_id);
	char path[256];

	evbuffer_drain(t->ctl, n);
	if (!j)
		return;
	cols = json_integer_value(json_object_get(j, "cols"));
	rows = json_integer_value(json_object_get(j, "rows"));
	json_decref(j);
	if (cols < 1 || cols > 1000 || rows < 1 || rows > 1000 || !e)
		return;
	snprintf(path, sizeof(path), "/exec/%s/resize?h=%lld&w=%lld", t->exec_id, (long long)rows,
	         (long long)cols);
	docker_request(e, "POST", path, NULL, NULL, 0, NULL, 5000, resize_done, NULL);
}

/* Parses and acts on every whole frame the browser sent. */
static void client_frames(struct term *t)
{
	struct evbuffer *in = bufferevent_get_input(t->cb);

	while (!t->closing && t->eb) {
		size_t avail = evbuffer_get_length(in);
		uint8_t hb[14], *payload;
		struct ws_frame f;
		int hl, op;

		evbuffer_copyout(in, hb, avail < sizeof(hb) ? avail : sizeof(hb));
		hl = ws_parse_header(hb, avail < sizeof(hb) ? avail : sizeof(hb), 1, MAX_FRAME, &f);
		if (hl == -2)
			return;
		if (hl < 0) {
			close_with(t, 1002, "protocol error");
			return;
		}
		if (avail < (size_t)hl + f.len)
			return; /* the rest of the frame is on its way (bounded by MAX_FRAME) */
		evbuffer_drain(in, (size_t)hl);
		payload = malloc(f.len ? f.len : 1);
		if (!payload) {
			close_with(t, 1011, "out of memory");
			return;
		}
		evbuffer_remove(in, payload, f.len);
		ws_unmask(payload, f.len, f.mask, 0);
		op = f.opcode;
		if (op == WS_CONT) {
			op = t->msg_opcode;
			if (!op) {
				free(payload);
				close_with(t, 1002, "continuation without a message");
				return;
			}
		} else if (op == WS_TEXT || op == WS_BINARY) {
			if (t->msg_opcode) {
				free(payload);
				close_with(t, 1002, "new message inside a fragmented one");
				return;
			}
			t->msg_opcode = op;
		}
		switch (op) {
		case WS_TEXT: /* keyboard input, passed on as typed (UTF-8) */
			evbuffer_add(bufferevent_get_output(t->eb), payload, f.len);
			break;
		case WS_BINARY:
			if (evbuffer_get_length(t->ctl) + f.len > 4096) {
				free(payload);
				close_with(t, 1009, "control message too long");
				return;
			}
			evbuffer_add(t->ctl, payload, f.len);
			if (f.fin)
				control(t);
			break;
		case WS_PING: send_frame(t, WS_PONG, payload, f.len); break;
		case WS_CLOSE:
			free(payload);
			close_with(t, 1000, "bye");
			return;
		default: break; /* pong */
		}
		if (f.fin && (f.opcode == WS_CONT || f.opcode == WS_TEXT || f.opcode == WS_BINARY))
			t->msg_opcode = 0;
		free(payload);
		if (evbuffer_get_length(bufferevent_get_output(t->eb)) > OUT_HIGH) {
			bufferevent_disable(t->cb, EV_READ); /* resumed when the engine drains */
			return;
		}
	}
}

static void tc_read(struct bufferevent *bev, void *arg)
{
	(void)bev;
	client_frames(arg);
}

static void tc_write(struct bufferevent *bev, void *arg)
{
	struct term *t = arg;

	if (t->closing) {
		if (evbuffer_get_length(bufferevent_get_output(bev)) == 0)
			term_free(t);
		return;
	}
	if (t->eb)
		bufferevent_enable(t->eb, EV_READ);
}

static void tc_event(struct bufferevent *bev, short what, void *arg)
{
	(void)bev;
	(void)what;
	term_free(arg); /* the browser left: the shell gets a hangup */
}

static void te_read(struct bufferevent *bev, void *arg)
{
	struct term *t = arg;
	struct evbuffer *in = bufferevent_get_input(bev);

	while (evbuffer_get_length(in) && !t->closing) {
		unsigned char buf[16384];
		int n = evbuffer_remove(in, buf, sizeof(buf));
		if (n <= 0)
			break;
		send_frame(t, WS_BINARY, buf, (size_t)n);
	}
	if (!t->closing && evbuffer_get_length(bufferevent_get_output(t->cb)) > OUT_HIGH)
		bufferevent_disable(bev, EV_READ); /* resumed when the browser drains */
}

static void te_write(struct bufferevent *bev, void *arg)
{
	struct term *t = arg;

	(void)bev;
	if (t->cb && !t->closing)
		bufferevent_enable(t->cb, EV_READ);
	if (t->cb && !t->closing && evbuffer_get_length(bufferevent_get_input(t->cb)))
		client_frames(t);
}

static void te_event(struct bufferevent *bev, short what, void *arg)
{
	struct term *t = arg;

	(void)bev;
	(void)what;
	te_read(t->eb, t);
	close_with(t, 1000, "the shell exited");
}

/* ---- the engine's exec stream ---- */

static void upgraded(struct term *t)
{
	struct http_req *r = t->r;
	char accept[29];
	struct evbuffer *out;

	if (ws_accept(t->key, accept) < 0) {
		fail(t, RC_INVALID, NULL, "malformed Sec-WebSocket-Key");
		return;
	}
	t->r = NULL;
	t->cb = http_upgrade_take(r); /* r is finished here */
	if (!t->cb) {
		term_free(t);
		return;
	}
	out = bufferevent_get_output(t->cb);
	evbuffer_add_printf(out,
	                    "HTTP/1.1 101 Switching Protocols\r\nUpgrade: websocket\r\n"
	                    "Connection: Upgrade\r\nSec-WebSocket-Accept: %s\r\n\r\n",
	                    accept);
	t->ctl = evbuffer_new();
	if (!t->ctl) {
		term_free(t);
		return;
	}
	t->next = terms;
	if (terms)
		terms->prev = t;
	terms = t;
	bufferevent_setcb(t->cb, tc_read, tc_write, tc_event, t);
	bufferevent_setcb(t->eb, te_read, te_write, te_event, t);
	bufferevent_setwatermark(t->cb, EV_WRITE, OUT_LOW, 0);
	bufferevent_setwatermark(t->eb, EV_WRITE, OUT_LOW, 0);
	bufferevent_set_timeouts(t->eb, NULL, NULL);
	bufferevent_enable(t->cb, EV_READ | EV_WRITE);
	bufferevent_enable(t->eb, EV_READ | EV_WRITE);
	log_msg(LOG_INFO, "terminal", NULL, "terminal open on instance %lld (exec %.12s)",
	        t->instance_id, t->exec_id);
	if (evbuffer_get_length(bufferevent_get_input(t->eb)))
		te_read(t->eb, t);
	if (evbuffer_get_length(bufferevent_get_input(t->cb)))
		client_frames(t);
}

static void start_read(struct bufferevent *bev, void *arg)
{
	struct term *t = arg;
	struct evbuffer *in = bufferevent_get_input(bev);
	struct evbuffer_ptr end = evbuffer_search(in, "\r\n\r\n", 4, NULL);
	char line[64] = "";
	int status = 0;

	if (!http_req_alive(t->r)) {
		fail(t, RC_UNAVAILABLE, NULL, "client gone");
		return;
	}
	if (end.pos < 0) {
		if (evbuffer_get_length(in) > HEAD_MAX)
			fail(t, RC_DOCKER, NULL, "the engine's answer to exec start is too long");
		return;
	}
	evbuffer_copyout(in, line,
	                 sizeof(line) - 1 < (size_t)end.pos ? sizeof(line) - 1 : (size_t)end.pos);
	if (sscanf(line, "HTTP/1.%*d %d", &status) != 1 || status != 101) {
		log_msg(LOG_WARN, "terminal", t->r->reqid, "exec start answered: %.60s", line);
		fail(t, RC_DOCKER, "is the instance still running?",
		     "the engine refused the shell");
		return;
	}
	evbuffer_drain(in, (size_t)end.pos + 4);
	t->upgraded = 1;
	upgraded(t);
}

static void start_event(struct bufferevent *bev, short what, void *arg)
{
	struct term *t = arg;

	(void)bev;
	if (what & BEV_EVENT_CONNECTED)
		return;
	fail(t, RC_UNAVAILABLE, "retry in a few seconds", "cannot reach the node's engine");
}

static SSL_CTX *engine_tls(long long node_id)
{
	char ca[1200], cert[1200], key[1200];
	SSL_CTX *ctx = SSL_CTX_new(TLS_client_method());

	if (!ctx)
		return NULL;
	snprintf(ca, sizeof(ca), "%s/nodes/%lld/ca.pem", cfg.state_dir, node_id);
	snprintf(cert, sizeof(cert), "%s/nodes/%lld/cert.pem", cfg.state_dir, node_id);
	snprintf(key, sizeof(key), "%s/nodes/%lld/key.pem", cfg.state_dir, node_id);
	if (SSL_CTX_load_verify_locations(ctx, ca, NULL) != 1 ||
	    SSL_CTX_use_certificate_chain_file(ctx, cert) != 1 ||
	    SSL_CTX_use_PrivateKey_file(ctx, key, SSL_FILETYPE_PEM) != 1) {
		SSL_CTX_free(ctx);
		return NULL;
	}
	SSL_CTX_set_verify(ctx, SSL_VERIFY_PEER, NULL);
	return ctx;
}

/* Opens our own connection to the engine and asks it to start the exec,
 * hijacked (the stream is ours after its 101). */
static void exec_start(struct term *t)
{
	char body[] = "{\"Detach\":false,\"Tty\":true}";
	struct timeval tv = { 10, 0 };

	if (strncmp(t->url, "unix://", 7) == 0) {
		struct sockaddr_un sa;
		memset(&sa, 0, sizeof(sa));
		sa.sun_family = AF_UNIX;
		if (strlen(t->url + 7) >= sizeof(sa.sun_path)) {
			fail(t, RC_DOCKER, NULL, "the engine's socket path is too long");
			return;
		}
		snprintf(sa.sun_path, sizeof(sa.sun_path), "%s", t->url + 7);
		t->eb = bufferevent_socket_new(ev_base, -1, BEV_OPT_CLOSE_ON_FREE);
		if (!t->eb ||
		    bufferevent_socket_connect(t->eb, (struct sockaddr *)&sa, sizeof(sa)) < 0) {
			fail(t, RC_UNAVAILABLE, NULL, "cannot reach the node's engine");
			return;
		}
	} else if (strncmp(t->url, "tcp://", 6) == 0) {
		struct sockaddr_storage ss;
		int sslen = sizeof(ss);
		SSL *ssl;
		char hostport[256];
		snprintf(hostport, sizeof(hostport), "%s", t->url + 6);
		hostport[strcspn(hostport, "/")] = '\0';
		t->ssl = engine_tls(t->node_id);
		if (!t->ssl ||
		    evutil_parse_sockaddr_port(hostport, (struct sockaddr *)&ss, &sslen) < 0 ||
		    !(ssl = SSL_new(t->ssl))) {
			fail(t, RC_DOCKER, NULL, "cannot set up TLS to the node's engine");
			return;
		}
		t->eb = bufferevent_openssl_socket_new(ev_base, -1, ssl, BUFFEREVENT_SSL_CONNECTING,
		                                       BEV_OPT_CLOSE_ON_FREE);
		if (!t->eb) {
			SSL_free(ssl);
			fail(t, RC_NOMEM, NULL, "out of memory");
			return;
		}
		bufferevent_openssl_set_allow_dirty_shutdown(t->eb, 1);
		if (bufferevent_socket_connect(t->eb, (struct sockaddr *)&ss, sslen) < 0) {
			fail(t, RC_UNAVAILABLE, NULL, "cannot reach the node's engine");
			return;
		}
	} else {
		fail(t, RC_DOCKER, NULL, "unsupported engine URL");
		return;
	}
	bufferevent_setcb(t->eb, start_read, NULL, start_event, t);
	bufferevent_set_timeouts(t->eb, &tv, &tv);
	evbuffer_add_printf(bufferevent_get_output(t->eb),
	                    "POST /" DOCKER_API_VERSION "/exec/%s/start HTTP/1.1\r\n"
	                    "Host: docker\r\nContent-Type: application/json\r\n"
	                    "Connection: Upgrade\r\nUpgrade: tcp\r\nContent-Length: %zu\r\n\r\n%s",
	                    t->exec_id, strlen(body), body);
	bufferevent_enable(t->eb, EV_READ | EV_WRITE);
}

static void exec_created(struct docker_call *call, enum rc rc, int status, const char *body,
                         size_t len, const char *err, void *arg)
{
	struct term *t = arg;
	json_t *j;
	const char *id;

	(void)call;
	if (!http_req_alive(t->r)) {
		fail(t, RC_UNAVAILABLE, NULL, "client gone");
		return;
	}
	if (rc != RC_OK) {
		log_msg(LOG_WARN, "terminal", t->r->reqid, "exec create: %s", err);
		fail(t, RC_UNAVAILABLE, "retry in a few seconds", "cannot reach the node's engine");
		return;
	}
	if (status == 409) {
		fail(t, RC_CONFLICT, "start the instance first", "the instance is not running");
		return;
	}
	j = status == 201 ? json_loadb(body, len, 0, NULL) : NULL;
	id = j ? json_string_value(json_object_get(j, "Id")) : NULL;
	if (!id || strlen(id) >= sizeof(t->exec_id) ||
	    strspn(id, "0123456789abcdef") != strlen(id)) {
		json_decref(j);
		fail(t, RC_DOCKER, NULL, "the engine did not start a shell");
		return;
	}
	snprintf(t->exec_id, sizeof(t->exec_id), "%s", id);
	json_decref(j);
	exec_start(t);
}

static void instance_read(PGresult *res, enum rc rc, void *arg)
{
	struct term *t = arg;
	struct http_req *r = t->r;
	struct docker_engine *e;
	char path[256];
	json_t *spec;
	char *body;

	if (rc != RC_OK) {
		t->r = NULL;
		term_free(t);
		http_reply_db_error(r, rc, "cannot read the instance");
		return;
	}
	if (PQntuples(res) != 1 ||
	    (strtoll(db_val(res, 0, 0), NULL, 10) != r->auth->user_id &&
	     r->auth->role != ROLE_ADMIN && strcmp(db_val(res, 0, 5), "t"))) {
		fail(t, RC_NOTFOUND, NULL, "no such instance");
		return;
	}
	if (strcmp(db_val(res, 0, 1), "running") != 0 || !db_val(res, 0, 2) || !db_val(res, 0, 3)) {
		fail(t, RC_CONFLICT, "start the instance first", "the instance is not running");
		return;
	}
	if (strtoll(db_val(res, 0, 0), NULL, 10) != r->auth->user_id &&
	    r->auth->role != ROLE_ADMIN) {
		/* class staff opening a student's terminal (gc_class_reach) */
		char iid[24];
		snprintf(iid, sizeof(iid), "%lld", t->instance_id);
		auth_audit(r, r->auth, "class.open_terminal", iid,
		           json_pack("{s:s, s:s?}", "student", db_val(res, 0, 6), "class",
		                     db_val(res, 0, 7)));
	}
	snprintf(t->container, sizeof(t->container), "%s", db_val(res, 0, 2));
	t->node_id = strtoll(db_val(res, 0, 3), NULL, 10);
	snprintf(t->url, sizeof(t->url), "%s", db_val(res, 0, 4));
	e = nodes_engine(t->node_id);
	if (!e) {
		fail(t, RC_UNAVAILABLE, "retry in a few seconds",
		     "the node's engine is not known yet");
		return;
	}
	spec = json_pack("{s:b, s:b, s:b, s:b, s:[s], s:[s, s, s]}", "AttachStdin", 1,
	                 "AttachStdout", 1, "AttachStderr", 1, "Tty", 1, "Env",
	                 "TERM=xterm-256color", "Cmd", "sh", "-c", EXEC_CMD);
	body = spec ? json_dumps(spec, JSON_COMPACT) : NULL;
	json_decref(spec);
	if (!body) {
		fail(t, RC_NOMEM, NULL, "out of memory");
		return;
	}
	snprintf(path, sizeof(path), "/containers/%s/exec", t->container);
	if (!docker_request(e, "POST", path, "application/json", body, strlen(body), NULL, 10000,
	                    exec_created, t))
		fail(t, RC_UNAVAILABLE, NULL, "cannot reach the node's engine");
	free(body);
}

/* The Origin of a websocket opened with the session cookie must be the
 * API's own (browsers send it; other sites cannot forge it). */
static int origin_ok(const struct http_req *r)
{
	const char *origin = http_header(r, "Origin");
	char expect[512];

	if (!origin)
		return r->auth->token_id != 0; /* scripts with a token send none */
	if (http_own_origin(r->tls, http_header(r, "Host"), expect, sizeof(expect)) < 0)
		return 0;
	return strcmp(origin, expect) == 0;
}

static int connection_upgrade(const struct http_req *r)
{
	for (int i = 0; i < r->nhdr; i++) {
		const char *v = r->hdr[i].value;
		if (strcasecmp(r->hdr[i].name, "Connection") != 0)
			continue;
		while (v && *v) {
			size_t len;
			while (*v == ' ' || *v == ',')
				v++;
			len = strcspn(v, ", ");
			if (len == 7 && strncasecmp(v, "upgrade", 7) == 0)
				return 1;
			v += len;
		}
	}
	return 0;
}

static void open_terminal(struct http_req *r)
{
	const char *up = http_header(r, "Upgrade");
	const char *ver = http_header(r, "Sec-WebSocket-Version");
	const char *key = http_header(r, "Sec-WebSocket-Key");
	long long id;
	char ids[24], accept[29];
	char uid[24];
	const char *params[2] = { ids, uid };
	struct term *t;

	if (http_param_id(r, "id", &id) < 0)
		return;
	if (!up || strcasecmp(up, "websocket") != 0 || !connection_upgrade(r)) {
		http_add_header(r, "Upgrade", "websocket");
		http_reply_error(r, RC_INVALID, "open it with a websocket (Upgrade: websocket)",
		                 "the terminal is a websocket");
		return;
	}
	if (!ver || strcmp(ver, "13") != 0 || !key || ws_accept(key, accept) < 0) {
		http_add_header(r, "Sec-WebSocket-Version", "13");
		http_reply_error(r, RC_INVALID, NULL,
		                 "websocket version 13 with a valid Sec-WebSocket-Key is required");
		return;
	}
	if (!origin_ok(r)) {
		http_reply_error(r, RC_FORBIDDEN, NULL, "request origin does not match this site");
		return;
	}
	/* a shell changes everything a token can reach: read is not enough,
	 * whatever the HTTP method says */
	if (r->auth->token_id && !(r->auth->scopes & SCOPE_WRITE)) {
		http_reply_error(r, RC_FORBIDDEN, "create a token with the 'write' scope",
		                 "this token lacks the 'write' scope a terminal needs");
		return;
	}
	t = calloc(1, sizeof(*t));
	if (!t) {
		http_reply_error(r, RC_NOMEM, NULL, "out of memory");
		return;
	}
	t->serial = ++next_serial;
	t->r = r;
	t->instance_id = id;
	t->user_id = r->auth->user_id;
	t->session_id = r->auth->session_id;
	t->token_id = r->auth->token_id;
	snprintf(t->key, sizeof(t->key), "%s", key);
	snprintf(ids, sizeof(ids), "%lld", id);
	snprintf(uid, sizeof(uid), "%lld", (long long)r->auth->user_id);
	/* the owner, an admin, or the staff of the class it runs in as far as
	 * the class lets them open its students' apps (0032) */
	db_query("SELECT i.user_id, i.state, i.container_id, i.node_id, n.url,"
	         " gc_class_reach($2::bigint, i.id, 'open'), ow.username, i.class_id"
	         " FROM instances i JOIN users ow ON ow.id = i.user_id"
	         " LEFT JOIN nodes n ON n.id = i.node_id WHERE i.id = $1",
	         2, params, instance_read, t);
}

/* ---- re-checks ---- */

static void recheck_done(PGresult *res, enum rc rc, void *arg)
{
	unsigned long long *serial = arg;
	struct term *t = term_find(*serial);

	free(serial);
	if (!t || rc != RC_OK)
		return; /* gone already, or the database is away: keep it */
	if (PQntuples(res) == 1 && strcmp(db_val(res, 0, 0), "t") == 0)
		return;
	log_msg(LOG_INFO, "terminal", NULL, "closing the terminal of instance %lld",
	        t->instance_id);
	close_with(t, 1008, "the instance stopped or the session ended");
}

static void on_recheck(evutil_socket_t fd, short what, void *arg)
{
	(void)fd;
	(void)what;
	(void)arg;
	for (struct term *t = terms; t; t = t->next) {
		char iid[24], sid[24], uid[24], tid[24];
		const char *params[4] = { iid, t->session_id ? sid : NULL, uid,
			                  t->token_id ? tid : NULL };
		unsigned long long *serial;
		if (t->closing)
			continue;
		serial = malloc(sizeof(*serial));
		if (!serial)
			return;
		*serial = t->serial;
		snprintf(iid, sizeof(iid), "%lld", t->instance_id);
		snprintf(sid, sizeof(sid), "%lld", t->session_id);
		snprintf(uid, sizeof(uid), "%lld", t->user_id);
		snprintf(tid, sizeof(tid), "%lld", t->token_id);
		/* the session, or the token, that opened it must still be live */
		db_query(
		        "SELECT i.state = 'running' AND EXISTS (SELECT 1 FROM users u WHERE u.id "
		        "= $3"
		        "  AND NOT u.disabled AND (u.id = i.user_id OR u.role = 'admin'"
		        "  OR gc_class_reach(u.id, i.id, 'open')))"
		        " AND ($2::bigint IS NULL OR EXISTS (SELECT 1 FROM sessions s WHERE s.id "
		        "= $2"
		        "  AND s.revoked_at IS NULL AND s.expires_at > now()))"
		        " AND ($4::bigint IS NULL OR EXISTS (SELECT 1 FROM api_tokens k WHERE k.id "
		        "= $4"
		        "  AND k.revoked_at IS NULL AND k.expires_at > now()))"
		        " FROM instances i WHERE i.id = $1",
		        4, params, recheck_done, serial);
	}
}

int terminal_init(struct event_base *base)
{
	struct timeval tv = { cfg.proxy_recheck, 0 };

	ev_base = base;
	recheck_timer = event_new(base, -1, EV_PERSIST, on_recheck, NULL);
	return recheck_timer && event_add(recheck_timer, &tv) == 0 ? 0 : -1;
}

void terminal_shutdown(void)
{
	while (terms)
		term_free(terms);
	if (recheck_timer) {
		event_free(recheck_timer);
		recheck_timer = NULL;
	}
}

const struct route api_terminal_routes[] = {
	{ HTTP_GET, "/api/v1/instances/{id}/terminal", open_terminal, ROLES_ALL, 0, 0, NULL },
	{ 0, NULL, NULL, 0, 0, 0, NULL },
};
