/* openloop.c — a fixed-rate (open-loop) HTTP/1.1 GET client in C, for the
 * latency figures of the benchmarks.
 *
 *   openloop HOST PORT PATH RATE SECONDS CONNS [HEADER-LINE...]
 *
 * Requests are scheduled at RATE per second whatever the server does, over
 * at most CONNS keep-alive connections; each one's latency is counted from
 * the moment it was scheduled, so time spent waiting for a free connection
 * counts (no coordinated omission), as pgbench -R counts its own.  The first
 * second opens the connections and is not measured.  Node's HTTP client
 * (load.mjs) costs ~0.9 ms at the median and ~2.3 ms at p99 by itself at
 * 2,000 req/s on this kind of machine; this one costs a few microseconds.
 *
 * Prints one line of JSON: sent, ok, errors, rps, p50_ms, p90_ms, p99_ms,
 * max_ms.  Only answers with a Content-Length are understood (any other
 * answer, or a status other than 200, counts as an error and closes the
 * connection).  Exits 1 when every request failed.
 */
#include <arpa/inet.h>
#include <errno.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <sys/epoll.h>
#include <sys/socket.h>
#include <time.h>
#include <unistd.h>

#define MAX_CONNS 256
#define BUF       65536

struct conn {
	int fd;
	int busy;
	double sched; /* when its request in flight was scheduled */
	size_t have;
	char buf[BUF];
};

static struct sockaddr_in addr;
static char req[8192];
static size_t req_len;

static double now_s(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (double)ts.tv_sec + (double)ts.tv_nsec / 1e9;
}

static int cmp_double(const void *a, const void *b)
{
	double x = *(const double *)a, y = *(const double *)b;

	return x < y ? -1 : x > y;
}

static int conn_open(struct conn *c, int ep)
{
	struct epoll_event ev = { .events = EPOLLIN };
	int one = 1;

	c->fd = socket(AF_INET, SOCK_STREAM, 0);
	if (c->fd < 0 || connect(c->fd, (struct sockaddr *)&addr, sizeof(addr)) < 0)
		return -1;
	setsockopt(c->fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof(one));
	ev.data.ptr = c;
	c->busy = 0;
	c->have = 0;
	return epoll_ctl(ep, EPOLL_CTL_ADD, c->fd, &ev);
}

static int conn_send(struct conn *c, double sched)
{
	c->busy = 1;
	c->sched = sched;
	return write(c->fd, req, req_len) == (ssize_t)req_len ? 0 : -1;
}

/* Length of a complete answer at the start of c->buf: > 0, 0 when more is
 * needed, -1 when it is not a 200 with a Content-Length. */
static long answer_len(const struct conn *c)
{
	const char *end = memmem(c->buf, c->have, "\r\n\r\n", 4), *p;
	long head, body = -1;

	if (!end)
		return c->have == BUF ? -1 : 0;
	head = end - c->buf + 4;
	if (c->have < 12 || strncmp(c->buf + 9, "200", 3) != 0)
		return -1;
	for (p = c->buf; p < end; p++) {
		if (p[0] == '\n' && strncasecmp(p + 1, "content-length:", 15) == 0) {
			body = strtol(p + 16, NULL, 10);
			break;
		}
	}
	if (body < 0 || head + body > BUF)
		return -1;
	return (size_t)(head + body) <= c->have ? head + body : 0;
}

int main(int argc, char **argv)
{
	static struct conn conns[MAX_CONNS];
	double rate, secs, start, warm_end, end, next, *lat, *queue;
	long nconns, cap, nlat = 0, sent = 0, errors = 0, qhead = 0, qtail = 0, i;
	int ep, n;

	if (argc < 7) {
		fprintf(stderr, "usage: %s HOST PORT PATH RATE SECONDS CONNS [HEADER...]\n",
		        argv[0]);
		return 2;
	}
	addr.sin_family = AF_INET;
	addr.sin_port = htons((unsigned short)strtol(argv[2], NULL, 10));
	if (inet_pton(AF_INET, argv[1], &addr.sin_addr) != 1) {
		fprintf(stderr, "openloop: '%s' is not an IPv4 address\n", argv[1]);
		return 2;
	}
	rate = strtod(argv[4], NULL);
	secs = strtod(argv[5], NULL);
	nconns = strtol(argv[6], NULL, 10);
	if (rate <= 0 || secs <= 0 || nconns < 1 || nconns > MAX_CONNS) {
		fprintf(stderr, "openloop: bad rate, duration or connection count\n");
		return 2;
	}
	n = snprintf(req, sizeof(req), "GET %s HTTP/1.1\r\nHost: %s:%s\r\n", argv[3], argv[1],
	             argv[2]);
	for (i = 7; i < argc && n > 0 && (size_t)n < sizeof(req); i++)
		n += snprintf(req + n, sizeof(req) - (size_t)n, "%s\r\n", argv[i]);
	if (n < 0 || (size_t)n + 2 >= sizeof(req)) {
		fprintf(stderr, "openloop: headers too long\n");
		return 2;
	}
	memcpy(req + n, "\r\n", 2);
	req_len = (size_t)n + 2;

	cap = (long)(rate * (secs + 1)) + 16;
	lat = calloc((size_t)cap, sizeof(*lat));
	queue = calloc((size_t)cap, sizeof(*queue));
	ep = epoll_create1(0);
	if (!lat || !queue || ep < 0)
		return 2;
	for (i = 0; i < nconns; i++) {
		if (conn_open(&conns[i], ep) < 0) {
			fprintf(stderr, "openloop: cannot connect: %s\n", strerror(errno));
			return 1;
		}
	}

	start = now_s();
	warm_end = start + 1.0;
	end = warm_end + secs;
	next = start;
	for (;;) {
		struct epoll_event evs[MAX_CONNS];
		double t = now_s();
		int timeout_ms;

		/* everything scheduled by now joins the queue */
		while (next <= t && next < end && qtail < cap) {
			queue[qtail++] = next;
			next = start + (double)(qtail) / rate;
		}
		/* free connections take the oldest */
		for (i = 0; i < nconns && qhead < qtail; i++) {
			if (conns[i].busy || conns[i].fd < 0)
				continue;
			if (conn_send(&conns[i], queue[qhead++]) < 0) {
				errors++;
				conns[i].busy = 0;
			}
			sent++;
		}
		if (next >= end && qhead == qtail) {
			int busy = 0;
			for (i = 0; i < nconns; i++)
				busy |= conns[i].busy;
			if (!busy || t > end + 5.0)
				break;
		}
		timeout_ms = next < end ? (int)((next - t) * 1000.0) : 100;
		if (timeout_ms < 0)
			timeout_ms = 0;
		n = epoll_wait(ep, evs, MAX_CONNS, timeout_ms);
		t = now_s();
		for (int k = 0; k < n; k++) {
			struct conn *c = evs[k].data.ptr;
			ssize_t got = read(c->fd, c->buf + c->have, BUF - c->have);
			long len;

			if (got <= 0) {
				if (got < 0 && errno == EAGAIN)
					continue;
				if (c->busy)
					errors++;
				close(c->fd);
				if (conn_open(c, ep) < 0)
					c->fd = -1;
				continue;
			}
			c->have += (size_t)got;
			while (c->busy && (len = answer_len(c)) != 0) {
				if (len < 0) {
					errors++;
					close(c->fd);
					if (conn_open(c, ep) < 0)
						c->fd = -1;
					break;
				}
				if (c->sched >= warm_end)
					lat[nlat++] = t - c->sched;
				memmove(c->buf, c->buf + len, c->have - (size_t)len);
				c->have -= (size_t)len;
				c->busy = 0;
			}
		}
	}
	if (nlat == 0) {
		fprintf(stderr, "openloop: no answer (%ld errors)\n", errors);
		return 1;
	}
	qsort(lat, (size_t)nlat, sizeof(*lat), cmp_double);
#define PCT(p) (lat[(long)((double)(nlat - 1) * (p))] * 1000.0)
	printf("{\"sent\":%ld,\"ok\":%ld,\"errors\":%ld,\"rps\":%.0f,\"p50_ms\":%.2f,"
	       "\"p90_ms\":%.2f,\"p99_ms\":%.2f,\"max_ms\":%.2f}\n",
	       sent, nlat, errors, (double)nlat / secs, PCT(0.50), PCT(0.90), PCT(0.99),
	       lat[nlat - 1] * 1000.0);
	return 0;
}
