/* static.c — the web frontend's files, served from cfg.web_root.
 *
 * Owns a small in-memory cache of files (the frontend is a few hundred KiB)
 * keyed by path and revalidated by mtime and size on every request, each
 * with a strong ETag and, for compressible types above 1 KiB, a gzip copy
 * made once.  Paths are decoded once; anything with "..", a dot-file, a
 * backslash or a NUL is refused before the filesystem is touched.
 */
#include "net/static.h"

#include <errno.h>
#include <fcntl.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <sys/stat.h>
#include <unistd.h>
#include <zlib.h>

#include <http_parser.h>

#include "base/config.h"
#include "base/crypto.h"
#include "base/log.h"

#define MAX_FILE    (8 << 20)
#define CACHE_SLOTS 256

struct entry {
	char *path; /* relative, decoded */
	char *data;
	size_t len;
	char *gz;
	size_t gzlen;
	char etag[48];
	char gz_etag[52]; /* the gzip copy is another representation: its own tag */
	time_t mtime;
	long mtime_ns;
	const char *ctype;
};

static struct entry cache[CACHE_SLOTS];

static const struct {
	const char *ext;
	const char *type;
	int compress;
} types[] = {
	{ ".html", "text/html; charset=utf-8", 1 },
	{ ".js", "text/javascript; charset=utf-8", 1 },
	{ ".mjs", "text/javascript; charset=utf-8", 1 },
	{ ".css", "text/css; charset=utf-8", 1 },
	{ ".json", "application/json", 1 },
	{ ".svg", "image/svg+xml", 1 },
	{ ".png", "image/png", 0 },
	{ ".jpg", "image/jpeg", 0 },
	{ ".ico", "image/x-icon", 0 },
	{ ".woff2", "font/woff2", 0 },
	{ ".txt", "text/plain; charset=utf-8", 1 },
	{ ".map", "application/json", 1 },
	{ ".yaml", "application/yaml", 1 },
};

static const char *content_type(const char *path, int *compress)
{
	const char *dot = strrchr(path, '.');

	*compress = 0;
	for (size_t i = 0; dot && i < sizeof(types) / sizeof(types[0]); i++)
		if (strcasecmp(dot, types[i].ext) == 0) {
			*compress = types[i].compress;
			return types[i].type;
		}
	return "application/octet-stream";
}

int static_path_ok(const char *p)
{
	const char *seg = p;

	if (!*p || *p == '/')
		return 0;
	for (const char *c = p;; c++) {
		if (*c == '/' || *c == '\0') {
			size_t n = (size_t)(c - seg);
			if (n == 0 || seg[0] == '.')
				return 0; /* empty segment, "..", "." and dot-files */
			if (*c == '\0')
				break;
			seg = c + 1;
		} else if (*c == '\\' || (unsigned char)*c < 0x20) {
			return 0;
		}
	}
	return 1;
}

static unsigned slot_of(const char *path)
{
	unsigned h = 5381;

	for (; *path; path++)
		h = h * 33 + (unsigned char)*path;
	return h % CACHE_SLOTS;
}

static int gzip(const char *in, size_t len, char **out, size_t *outlen)
{
	z_stream z;
	uLong bound;
	char *buf;

	memset(&z, 0, sizeof(z));
	if (deflateInit2(&z, 9, Z_DEFLATED, 15 + 16, 8, Z_DEFAULT_STRATEGY) != Z_OK)
		return -1;
	bound = deflateBound(&z, (uLong)len) + 32;
	buf = malloc(bound);
	if (!buf) {
		deflateEnd(&z);
		return -1;
	}
	z.next_in = (Bytef *)(uintptr_t)in;
	z.avail_in = (uInt)len;
	z.next_out = (Bytef *)buf;
	z.avail_out = (uInt)bound;
	if (deflate(&z, Z_FINISH) != Z_STREAM_END) {
		deflateEnd(&z);
		free(buf);
		return -1;
	}
	*outlen = z.total_out;
	*out = buf;
	deflateEnd(&z);
	return 0;
}

static void entry_clear(struct entry *e)
{
	free(e->path);
	free(e->data);
	free(e->gz);
	memset(e, 0, sizeof(*e));
}

/* Loads (or revalidates) rel into the cache.  Returns the entry, or NULL
 * with errno set (ENOENT for missing, EISDIR for directories). */
static struct entry *load(const char *rel)
{
	struct entry *e = &cache[slot_of(rel)];
	char full[2048], hex[65];
	struct stat st;
	int fd, compress;
	ssize_t got;

	if ((size_t)snprintf(full, sizeof(full), "%s/%s", cfg.web_root, rel) >= sizeof(full)) {
		errno = ENAMETOOLONG;
		return NULL;
	}
	/* a cached file is revalidated with one lstat (no symlink is followed,
	 * as O_NOFOLLOW below): unchanged, it is served without opening it */
	if (e->path && strcmp(e->path, rel) == 0 && lstat(full, &st) == 0 && S_ISREG(st.st_mode) &&
	    e->mtime == st.st_mtim.tv_sec && e->mtime_ns == st.st_mtim.tv_nsec &&
	    e->len == (size_t)st.st_size)
		return e;
	fd = open(full, O_RDONLY | O_CLOEXEC | O_NOFOLLOW);
	if (fd < 0)
		return NULL;
	if (fstat(fd, &st) < 0 || !S_ISREG(st.st_mode) || st.st_size > MAX_FILE) {
		if (S_ISDIR(st.st_mode))
			errno = EISDIR;
		else
			errno = ENOENT;
		close(fd);
		return NULL;
	}
	if (e->path && strcmp(e->path, rel) == 0 && e->mtime == st.st_mtim.tv_sec &&
	    e->mtime_ns == st.st_mtim.tv_nsec && e->len == (size_t)st.st_size) {
		close(fd);
		return e;
	}
	entry_clear(e);
	e->path = strdup(rel);
	e->data = malloc((size_t)st.st_size + 1);
	if (!e->path || !e->data) {
		close(fd);
		entry_clear(e);
		errno = ENOMEM;
		return NULL;
	}
	for (e->len = 0; e->len < (size_t)st.st_size; e->len += (size_t)got) {
		got = read(fd, e->data + e->len, (size_t)st.st_size - e->len);
		if (got <= 0)
			break;
	}
	close(fd);
	e->mtime = st.st_mtim.tv_sec;
	e->mtime_ns = st.st_mtim.tv_nsec;
	crypto_sha256_hex(e->data, e->len, hex);
	snprintf(e->etag, sizeof(e->etag), "\"%.32s\"", hex);
	snprintf(e->gz_etag, sizeof(e->gz_etag), "\"%.32s-gz\"", hex);
	e->ctype = content_type(rel, &compress);
	if (compress && e->len > 1024 && gzip(e->data, e->len, &e->gz, &e->gzlen) == 0 &&
	    e->gzlen >= e->len * 9 / 10) {
		/* not worth it */
		free(e->gz);
		e->gz = NULL;
	}
	return e;
}

static int etag_matches(const char *inm, const char *etag)
{
	/* a list of (possibly weak, W/"x") tags; ours are quoted fixed-length
	 * hex (plus -gz), so a quoted-substring match is exact */
	return strcmp(inm, "*") == 0 || strstr(inm, etag) != NULL;
}

/* 1 when Accept-Encoding lists gzip (or *) without q=0. */
static int accepts_gzip(const char *ae)
{
	const char *p = ae;

	while (p && *p) {
		const char *end = strchr(p, ',');
		size_t len = end ? (size_t)(end - p) : strlen(p);
		const char *q;
		while (len && *p == ' ') {
			p++;
			len--;
		}
		if ((len >= 4 && strncasecmp(p, "gzip", 4) == 0 &&
		     (len == 4 || p[4] == ';' || p[4] == ' ')) ||
		    (len >= 1 && p[0] == '*' && (len == 1 || p[1] == ';' || p[1] == ' '))) {
			q = memchr(p, '=', len);
			if (!q)
				return 1;
			return strtod(q + 1, NULL) > 0.0;
		}
		p = end ? end + 1 : NULL;
	}
	return 0;
}

void static_serve(struct http_req *r)
{
	char rel[1024];
	long n;
	struct entry *e;
	const char *inm;
	int gz;

	n = router_decode(r->path + 1, strlen(r->path + 1), rel, sizeof(rel), 0);
	if (n < 0) {
		http_reply_error(r, RC_INVALID, NULL, "malformed path");
		return;
	}
	if (n == 0 || rel[n - 1] == '/') {
		if ((size_t)n + sizeof("index.html") > sizeof(rel)) {
			http_reply_error(r, RC_NOTFOUND, NULL, "no such file");
			return;
		}
		memcpy(rel + n, "index.html", sizeof("index.html"));
	}
	if (!static_path_ok(rel)) {
		http_reply_error(r, RC_NOTFOUND, NULL, "no such file");
		return;
	}
	e = load(rel);
	if (!e) {
		http_reply_error(r, RC_NOTFOUND, NULL, "no such file '/%s'", rel);
		return;
	}
	gz = e->gz && accepts_gzip(http_header(r, "Accept-Encoding"));
	http_add_header(r, "ETag", gz ? e->gz_etag : e->etag);
	http_add_header(r, "Cache-Control", "no-cache");
	http_add_header(r, "X-Content-Type-Options", "nosniff");
	http_add_header(r, "Referrer-Policy", "same-origin");
	if (e->gz)
		http_add_header(r, "Vary", "Accept-Encoding");
	if (strncmp(e->ctype, "text/html", 9) == 0) {
		http_add_header(r, "Content-Security-Policy",
		                "default-src 'self'; img-src 'self' data:; style-src 'self'; "
		                "script-src 'self'; connect-src 'self'; frame-ancestors 'none'; "
		                "base-uri 'none'; form-action 'self'; object-src 'none'");
		http_add_header(r, "X-Frame-Options", "DENY");
	}
	inm = http_header(r, "If-None-Match");
	if (inm && etag_matches(inm, gz ? e->gz_etag : e->etag)) {
		http_reply(r, 304, NULL, NULL, 0);
		return;
	}
	if (gz)
		http_add_header(r, "Content-Encoding", "gzip");
	http_reply(r, 200, e->ctype, gz ? e->gz : e->data, gz ? e->gzlen : e->len);
}

void static_free(void)
{
	for (int i = 0; i < CACHE_SLOTS; i++)
		entry_clear(&cache[i]);
}
