/* fuzz_docker.c — libFuzzer target for the container stream demultiplexer
 * and the frame header parser.
 *
 * The first input byte seeds how the rest is cut into chunks; the rest is
 * fed through demux_feed() (the code the streaming path runs on curl's
 * chunks) whole and cut up.  Checked: the cut never changes what comes out
 * or the state left behind, both agree with a plain reference decoder over
 * docker_frame_header(), pieces are non-empty and point into the input or
 * the held header, an emit that says stop is the last one, and the header
 * parser is consistent on every prefix.
 */
#include "engine/docker.c"

#include <assert.h>
#include <stdint.h>
#include <stdlib.h>

struct out {
	unsigned char *bytes;
	unsigned char *streams;
	size_t n, cap;
	size_t pieces;
	size_t stop_at; /* emit returns -1 at this piece, when > 0 */
	const char *in;
	size_t inlen;
	const struct demux *d;
};

static int record(void *arg, int stream, const char *p, size_t n)
{
	struct out *o = arg;
	int inside_input = p >= o->in && p + n <= o->in + o->inlen;
	int inside_hdr = p >= (const char *)o->d->hdr &&
	                 p + n <= (const char *)o->d->hdr + sizeof(o->d->hdr);

	assert(n > 0);
	assert(stream >= 0 && stream <= 2);
	assert(inside_input || inside_hdr);
	assert(o->stop_at == 0 || o->pieces < o->stop_at);
	assert(o->n + n <= o->cap);
	memcpy(o->bytes + o->n, p, n);
	memset(o->streams + o->n, stream, n);
	o->n += n;
	o->pieces++;
	return o->stop_at && o->pieces == o->stop_at ? -1 : 0;
}

static void out_init(struct out *o, unsigned char *bytes, unsigned char *streams, size_t cap,
                     const char *in, size_t inlen, const struct demux *d)
{
	memset(o, 0, sizeof(*o));
	o->bytes = bytes;
	o->streams = streams;
	o->cap = cap;
	o->in = in;
	o->inlen = inlen;
	o->d = d;
}

/* The same stream decoded in one piece, without demux_feed(). */
static size_t reference(const unsigned char *in, size_t len, unsigned char *bytes,
                        unsigned char *streams)
{
	size_t pos = 0, n = 0, payload, k;
	int stream, r;

	while (pos < len) {
		r = docker_frame_header(in + pos, len - pos, &stream, &payload);
		if (r == -2)
			break;
		if (r == -1) {
			memcpy(bytes + n, in + pos, len - pos);
			memset(streams + n, 0, len - pos);
			return n + len - pos;
		}
		pos += 8;
		k = payload < len - pos ? payload : len - pos;
		memcpy(bytes + n, in + pos, k);
		memset(streams + n, stream, k);
		n += k;
		pos += k;
	}
	return n;
}

static void check_header(const unsigned char *in, size_t len)
{
	int stream = -7, s2, r, prev = -2;
	size_t payload = 7, p2;

	for (size_t n = 0; n <= len && n <= 9; n++) {
		r = docker_frame_header(in, n, &stream, &payload);
		assert(r == 8 || r == -1 || r == -2);
		if (n < 8)
			assert(r != 8);
		/* Once refused, refused for good; a header needs all 8 bytes. */
		if (prev == -1)
			assert(r == -1);
		if (r == 8) {
			assert(stream >= 0 && stream <= 2);
			assert(payload <= 0xffffffffu);
			assert(docker_frame_header(in, n, &s2, &p2) == 8 && s2 == stream &&
			       p2 == payload);
		} else {
			assert(stream == -7 && payload == 7);
		}
		prev = r;
	}
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	const char *in;
	size_t len, i, k;
	unsigned seed;
	struct demux whole, cut, stop;
	struct out a, b, c;
	unsigned char *buf;
	int r;

	if (size < 1)
		return 0;
	seed = data[0];
	in = (const char *)data + 1;
	len = size - 1;
	check_header((const unsigned char *)in, len);

	buf = malloc(6 * (len + 1));
	assert(buf);
	memset(&whole, 0, sizeof(whole));
	out_init(&a, buf, buf + (len + 1), len + 1, in, len, &whole);
	assert(demux_feed(&whole, in, len, record, &a) == 0);
	assert(a.n <= len);
	assert(whole.hlen < 8);

	/* Cut into chunks of 1..16 bytes, or at a single point. */
	memset(&cut, 0, sizeof(cut));
	out_init(&b, buf + 2 * (len + 1), buf + 3 * (len + 1), len + 1, in, len, &cut);
	if (seed & 0x80) {
		k = len ? (seed & 0x7f) % (len + 1) : 0;
		assert(demux_feed(&cut, in, k, record, &b) == 0);
		assert(demux_feed(&cut, in + k, len - k, record, &b) == 0);
	} else {
		unsigned x = seed * 2654435761u + 1;

		for (i = 0; i < len; i += k) {
			x = x * 1103515245u + 12345u;
			k = 1 + (x >> 16) % 16;
			if (k > len - i)
				k = len - i;
			assert(demux_feed(&cut, in + i, k, record, &b) == 0);
		}
	}
	assert(a.n == b.n);
	assert(memcmp(a.bytes, b.bytes, a.n) == 0);
	assert(memcmp(a.streams, b.streams, a.n) == 0);
	assert(whole.hlen == cut.hlen && whole.left == cut.left && whole.raw == cut.raw);
	if (whole.hlen)
		assert(memcmp(whole.hdr, cut.hdr, whole.hlen) == 0);

	/* An independent decoding agrees. */
	k = reference((const unsigned char *)in, len, b.bytes, b.streams);
	assert(k == a.n);
	assert(memcmp(a.bytes, b.bytes, k) == 0);
	assert(memcmp(a.streams, b.streams, k) == 0);

	/* Told to stop at piece n: nothing after it. */
	if (a.pieces > 0) {
		memset(&stop, 0, sizeof(stop));
		out_init(&c, buf + 4 * (len + 1), buf + 5 * (len + 1), len + 1, in, len, &stop);
		c.stop_at = 1 + seed % a.pieces;
		r = demux_feed(&stop, in, len, record, &c);
		assert(r == -1);
		assert(c.pieces == c.stop_at);
		assert(memcmp(c.bytes, a.bytes, c.n) == 0);
	}
	free(buf);
	return 0;
}
