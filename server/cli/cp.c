/* cp.c — `gpucloud cp`: one file between this machine and a storage area.
 *
 * Up: a small file is one PUT; a larger one goes through the resumable
 * uploads API (POST /uploads, PUT each missing part, POST complete, its
 * SHA-256 checked by the server), the upload's id kept in the config
 * folder under uploads/ so the same command run again after an
 * interruption sends only the parts that did not arrive.
 * Down: the bytes go to LOCAL.gcpart, renamed into place when complete; a
 * rerun asks for the rest with a Range request, and starts over when the
 * file's ETag changed in between.
 * A progress bar on stderr only when it is a terminal.
 */
#include <errno.h>
#include <fcntl.h>
#include <getopt.h>
#include <libgen.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include <openssl/evp.h>

#include "cli/cp.h"
#include "cli/gpucloud.h"
#include "cli/jobfile.h"

struct remote {
	char area[64];   /* home, shared, class:3, job:12 */
	char path[4096]; /* inside the area, no leading '/' */
	char url[16384]; /* /api/v1/files/<area>/<escaped path> */
};

/* "home:p", "shared:p", "class:N:p", "job:N:p"; 0 when arg is one. */
static int parse_remote(const char *arg, struct remote *rm)
{
	const char *colon = strchr(arg, ':'), *p;
	size_t n;

	if (!colon)
		return -1;
	n = (size_t)(colon - arg);
	if ((n == 4 && !strncmp(arg, "home", 4)) || (n == 6 && !strncmp(arg, "shared", 6))) {
		snprintf(rm->area, sizeof(rm->area), "%.*s", (int)n, arg);
		p = colon + 1;
	} else if ((n == 5 && !strncmp(arg, "class", 5)) || (n == 3 && !strncmp(arg, "job", 3))) {
		const char *c2 = strchr(colon + 1, ':');
		size_t k = c2 ? (size_t)(c2 - colon - 1) : 0;
		if (!c2 || k == 0 || k > 18 || strspn(colon + 1, "0123456789") != k)
			return -1;
		snprintf(rm->area, sizeof(rm->area), "%.*s:%.*s", (int)n, arg, (int)k, colon + 1);
		p = c2 + 1;
	} else {
		return -1;
	}
	while (*p == '/')
		p++;
	if (strlen(p) >= sizeof(rm->path))
		return -1;
	snprintf(rm->path, sizeof(rm->path), "%s", p);
	return 0;
}

static int make_url(struct client *c, struct remote *rm, const char *query)
{
	char *seg, *save = NULL, tmp[4096];
	size_t n;

	n = (size_t)snprintf(rm->url, sizeof(rm->url), "/api/v1/files/%s/", rm->area);
	snprintf(tmp, sizeof(tmp), "%s", rm->path);
	for (seg = strtok_r(tmp, "/", &save); seg; seg = strtok_r(NULL, "/", &save)) {
		char *e = client_escape(c, seg);
		if (!e)
			return -1;
		n += (size_t)snprintf(rm->url + n, sizeof(rm->url) - n, "%s%s",
		                      rm->url[n - 1] == '/' ? "" : "/", e);
		curl_free(e);
		if (n >= sizeof(rm->url))
			return -1;
	}
	if (query)
		snprintf(rm->url + n, sizeof(rm->url) - n, "?%s", query);
	return 0;
}

/* ---- progress --------------------------------------------------------- */

struct progress {
	int on;
	curl_off_t base, total; /* bytes done before this request, the whole */
	curl_off_t from;        /* bytes done before this run (for the rate) */
	double start, last;
};

static double now_s(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (double)ts.tv_sec + (double)ts.tv_nsec / 1e9;
}

static void bar_draw(struct progress *p, curl_off_t done, int final)
{
	double t = now_s(), mib = 1048576.0, rate;
	int pct = p->total > 0 ? (int)(done * 100 / p->total) : 0, w = 30, fill;
	char bar[40];

	if (!p->on || (!final && t - p->last < 0.1))
		return;
	p->last = t;
	fill = pct * w / 100;
	for (int i = 0; i < w; i++)
		bar[i] = i < fill ? '#' : '.';
	bar[w] = '\0';
	rate = t > p->start ? (double)(done - p->from) / (t - p->start) / mib : 0;
	fprintf(stderr, "\r[%s] %3d%% %8.1f/%.1f MiB %6.1f MiB/s", bar, pct, (double)done / mib,
	        (double)p->total / mib, rate > 0 ? rate : 0);
	if (final)
		fputc('\n', stderr);
}

static void on_progress(void *arg, curl_off_t now, curl_off_t total)
{
	struct progress *p = arg;

	(void)total;
	bar_draw(p, p->base + now, 0);
}

static const char *sv(json_t *v)
{
	return json_is_string(v) ? json_string_value(v) : "";
}

/* ---- state files ------------------------------------------------------ */

static int sha256_hex(const void *data, size_t n, char out[65])
{
	unsigned char md[32];
	unsigned int len = 0;

	if (!EVP_Digest(data, n, md, &len, EVP_sha256(), NULL))
		return -1;
	for (int i = 0; i < 32; i++)
		snprintf(out + i * 2, 3, "%02x", md[i]);
	return 0;
}

static int file_sha256(int fd, off_t size, char out[65])
{
	EVP_MD_CTX *ctx = EVP_MD_CTX_new();
	unsigned char md[32], *buf = malloc(1 << 20);
	unsigned int len = 0;
	off_t off = 0;
	int rc = -1;

	if (!ctx || !buf || !EVP_DigestInit_ex(ctx, EVP_sha256(), NULL))
		goto out;
	while (off < size) {
		ssize_t n = pread(fd, buf, 1 << 20, off);
		if (n <= 0)
			goto out;
		EVP_DigestUpdate(ctx, buf, (size_t)n);
		off += n;
	}
	if (!EVP_DigestFinal_ex(ctx, md, &len))
		goto out;
	for (int i = 0; i < 32; i++)
		snprintf(out + i * 2, 3, "%02x", md[i]);
	rc = 0;
out:
	EVP_MD_CTX_free(ctx);
	free(buf);
	return rc;
}

/* $CONFIG/<kind>/<sha256 of key>.json */
static int state_path(const char *kind, const char *key, char *buf, size_t n)
{
	char hex[65], name[128];

	if (sha256_hex(key, strlen(key), hex) < 0)
		return -1;
	snprintf(name, sizeof(name), "%s/%s.json", kind, hex);
	return client_config_path(name, buf, n);
}

static json_t *state_load(const char *path)
{
	return json_load_file(path, 0, NULL);
}

static void state_save(const char *path, json_t *v)
{
	char dir[4096], *d;

	snprintf(dir, sizeof(dir), "%s", path);
	d = dirname(dir);
	/* the config folder first, then kind/ */
	{
		char parent[4096], *pp;
		snprintf(parent, sizeof(parent), "%s", d);
		pp = dirname(parent);
		mkdir(pp, 0700);
	}
	mkdir(d, 0700);
	json_dump_file(v, path, JSON_COMPACT);
	chmod(path, 0600);
}

/* ---- up --------------------------------------------------------------- */

static int put_small(struct client *c, int fd, off_t size, struct remote *rm, int overwrite,
                     struct progress *pg, json_t **entry)
{
	struct client_req r = {
		.method = "PUT", .upload_fd = fd, .upload_off = 0, .upload_len = size
	};
	struct client_reply rep = { 0 };
	int code;

	if (make_url(c, rm, overwrite ? "overwrite=1" : NULL) < 0)
		return usage_error("cp", "the remote path is too long");
	r.path = rm->url;
	if (pg->on) {
		r.progress = on_progress;
		r.progress_arg = pg;
	}
	if (client_send(c, &r, &rep) < 0) {
		client_reply_release(&rep);
		return client_fail(c, NULL, "upload");
	}
	if (rep.status != 201 && rep.status != 200) {
		code = client_fail(c, &rep, "upload");
		client_reply_release(&rep);
		return code;
	}
	*entry = rep.json ? json_incref(rep.json) : json_object();
	client_reply_release(&rep);
	return EXIT_OK;
}

static int put_resumable(struct client *c, int fd, const struct stat *st, const char *local,
                         struct remote *rm, int overwrite, struct progress *pg, json_t **entry,
                         json_t *info)
{
	char key[12288], spath[4096], real[4096], sha[65], path[128];
	json_t *state, *up = NULL, *rec;
	long long id = 0, part_size, parts;
	char *have = NULL;
	size_t i;
	int code = EXIT_OK, resumed = 0, sent = 0;

	if (!realpath(local, real))
		snprintf(real, sizeof(real), "%s", local);
	snprintf(key, sizeof(key), "%s\n%s\n%s\n%s\n%lld\n%lld.%09ld\n%d", c->server, rm->area,
	         rm->path, real, (long long)st->st_size, (long long)st->st_mtim.tv_sec,
	         st->st_mtim.tv_nsec, overwrite);
	if (state_path("uploads", key, spath, sizeof(spath)) < 0)
		spath[0] = '\0';
	state = spath[0] ? state_load(spath) : NULL;
	id = json_integer_value(json_object_get(state, "id"));
	json_decref(state);
	if (id > 0) { /* an upload of this very file began before: what arrived? */
		struct client_req r = {
			.method = "GET", .path = path, .upload_fd = -1, .upload_len = -1
		};
		struct client_reply rep = { 0 };
		snprintf(path, sizeof(path), "/api/v1/uploads/%lld", id);
		if (client_send(c, &r, &rep) < 0) {
			client_reply_release(&rep);
			return client_fail(c, NULL, "resume the upload");
		}
		if (rep.status == 200 && json_is_object(rep.json) &&
		    !strcmp(sv(json_object_get(rep.json, "state")), "open") &&
		    json_integer_value(json_object_get(rep.json, "size")) == st->st_size) {
			up = json_incref(rep.json);
			resumed = 1;
		} else if (rep.status != 404 && rep.status != 200) {
			code = client_fail(c, &rep, "resume the upload");
			client_reply_release(&rep);
			return code;
		}
		client_reply_release(&rep);
	}
	if (!up) {
		json_t *body;
		if (file_sha256(fd, st->st_size, sha) < 0) {
			fprintf(stderr, "gpucloud cp: cannot read '%s': %s\n", local,
			        strerror(errno));
			return EXIT_LOCAL;
		}
		body = json_pack("{s:s, s:s, s:I, s:b, s:s}", "area", rm->area, "path", rm->path,
		                 "size", (json_int_t)st->st_size, "overwrite", overwrite, "sha256",
		                 sha);
		if (!body)
			return usage_error("cp", "the remote path must be UTF-8 text");
		up = client_call(c, "POST", "/api/v1/uploads", body, "start the upload", &code);
		json_decref(body);
		if (!up)
			return code;
		id = json_integer_value(json_object_get(up, "id"));
		if (spath[0]) {
			json_t *s = json_pack("{s:I}", "id", (json_int_t)id);
			state_save(spath, s);
			json_decref(s);
		}
	}
	part_size = json_integer_value(json_object_get(up, "part_size"));
	parts = json_integer_value(json_object_get(up, "parts"));
	if (part_size < 1 || parts < 1 || parts > (1LL << 24)) {
		json_decref(up);
		fprintf(stderr, "gpucloud cp: the server described the upload oddly\n");
		return EXIT_SERVER;
	}
	have = calloc((size_t)parts, 1);
	if (!have) {
		json_decref(up);
		return EXIT_LOCAL;
	}
	json_array_foreach(json_object_get(up, "received"), i, rec)
	{
		long long k = json_integer_value(rec);
		if (k >= 0 && k < parts)
			have[k] = 1;
	}
	pg->base = 0;
	for (long long k = 0; k < parts; k++)
		if (have[k])
			pg->base += k == parts - 1 ? st->st_size - k * part_size : part_size;
	pg->from = pg->base;
	pg->start = now_s();
	for (long long k = 0; k < parts; k++) {
		struct client_req r = { .method = "PUT", .path = path, .upload_fd = fd };
		struct client_reply rep = { 0 };
		if (have[k])
			continue;
		r.upload_off = (off_t)(k * part_size);
		r.upload_len = k == parts - 1 ? st->st_size - k * part_size : part_size;
		if (pg->on) {
			r.progress = on_progress;
			r.progress_arg = pg;
		}
		snprintf(path, sizeof(path), "/api/v1/uploads/%lld/parts/%lld", id, k);
		if (client_send(c, &r, &rep) < 0) {
			client_reply_release(&rep);
			code = client_fail(c, NULL, "upload");
			fprintf(stderr, "hint: run the same command again to send the rest\n");
			goto out;
		}
		if (rep.status != 200) {
			code = client_fail(c, &rep, "upload a part");
			client_reply_release(&rep);
			goto out;
		}
		client_reply_release(&rep);
		pg->base += r.upload_len;
		sent++;
	}
	snprintf(path, sizeof(path), "/api/v1/uploads/%lld/complete", id);
	*entry = client_call(c, "POST", path, NULL, "finish the upload", &code);
	if (*entry && spath[0])
		unlink(spath);
	json_object_set_new(info, "upload_id", json_integer(id));
	json_object_set_new(info, "parts", json_integer(parts));
	json_object_set_new(info, "parts_sent", json_integer(sent));
	json_object_set_new(info, "resumed", json_boolean(resumed));
out:
	free(have);
	json_decref(up);
	return code;
}

static int upload(struct client *c, const char *local, struct remote *rm, int overwrite)
{
	struct stat st;
	struct progress pg = { 0 };
	json_t *entry = NULL, *info = json_object();
	int fd, code;

	fd = open(local, O_RDONLY | O_CLOEXEC);
	if (fd < 0 || fstat(fd, &st) < 0) {
		fprintf(stderr, "gpucloud cp: cannot read '%s': %s\n", local, strerror(errno));
		if (fd >= 0)
			close(fd);
		json_decref(info);
		return EXIT_LOCAL;
	}
	if (!S_ISREG(st.st_mode)) {
		close(fd);
		json_decref(info);
		return usage_error("cp", "'%s' is not a regular file (one file at a time)", local);
	}
	if (!rm->path[0] || rm->path[strlen(rm->path) - 1] == '/') { /* into a folder */
		char tmp[4096], *b;
		size_t n = strlen(rm->path);
		snprintf(tmp, sizeof(tmp), "%s", local);
		b = basename(tmp);
		if (n + strlen(b) >= sizeof(rm->path)) {
			close(fd);
			json_decref(info);
			return usage_error("cp", "the remote path is too long");
		}
		memcpy(rm->path + n, b, strlen(b) + 1);
	}
	pg.on = c->tty && !c->json;
	pg.total = st.st_size;
	pg.start = now_s();
	if (st.st_size > CP_RESUMABLE_OVER)
		code = put_resumable(c, fd, &st, local, rm, overwrite, &pg, &entry, info);
	else
		code = put_small(c, fd, st.st_size, rm, overwrite, &pg, &entry);
	close(fd);
	if (code == EXIT_OK) {
		bar_draw(&pg, st.st_size, 1);
		json_object_set_new(info, "direction", json_string("up"));
		json_object_set_new(info, "area", json_string(rm->area));
		json_object_set_new(info, "path", json_string(rm->path));
		json_object_set_new(info, "size", json_integer(st.st_size));
		json_object_set(info, "entry", entry);
		if (c->json)
			client_print_json(info);
		else
			printf("%s -> %s:%s (%lld bytes)\n", local, rm->area, rm->path,
			       (long long)st.st_size);
	} else if (pg.on) {
		fputc('\n', stderr);
	}
	json_decref(entry);
	json_decref(info);
	return code;
}

/* ---- down ------------------------------------------------------------- */

struct sink {
	struct client *c;
	int fd;
	off_t off;        /* where the next byte goes */
	const char *etag; /* the ETag the .gcpart's bytes came with, or "" */
	const char *spath;
	const struct client_reply *rep;
	int first, restart, werr;
};

static size_t down_sink(const char *p, size_t n, void *arg)
{
	struct sink *s = arg;
	size_t all = n;

	if (s->first) {
		long st = 0;
		s->first = 0;
		curl_easy_getinfo(s->c->h, CURLINFO_RESPONSE_CODE, &st);
		if (st == 206 && strcmp(s->rep->etag, s->etag) != 0) {
			s->restart = 1; /* the file changed since the first bytes came */
			return 0;
		}
		if (st == 200 && s->off > 0) { /* the whole file after all */
			if (ftruncate(s->fd, 0) < 0) {
				s->werr = errno;
				return 0;
			}
			s->off = 0;
		}
		if (s->spath[0] && s->rep->etag[0]) { /* a rerun resumes these bytes */
			json_t *o = json_pack("{s:s}", "etag", s->rep->etag);
			state_save(s->spath, o);
			json_decref(o);
		}
	}
	while (n > 0) {
		ssize_t w = pwrite(s->fd, p, n, s->off);
		if (w <= 0) {
			s->werr = errno ? errno : EIO;
			return 0;
		}
		s->off += w;
		p += w;
		n -= (size_t)w;
	}
	return all;
}

static int download(struct client *c, struct remote *rm, const char *local_arg)
{
	char local[4096], part[4200], key[16384], spath[4096], range[64], saved[160] = "";
	struct client_req r = { .method = "GET", .upload_fd = -1, .upload_len = -1 };
	struct client_reply rep = { 0 };
	struct progress pg = { 0 };
	struct sink s = { 0 };
	struct stat st;
	json_t *stat_, *state, *info;
	long long size;
	int code, fd;

	if (make_url(c, rm, "stat=1") < 0)
		return usage_error("cp", "the remote path is too long");
	stat_ = client_call(c, "GET", rm->url, NULL, "find the file", &code);
	if (!stat_)
		return code;
	if (strcmp(sv(json_object_get(stat_, "type")), "file") != 0) {
		json_decref(stat_);
		return usage_error("cp", "%s:%s is a folder (one file at a time)", rm->area,
		                   rm->path);
	}
	size = json_integer_value(json_object_get(stat_, "size"));
	json_decref(stat_);
	/* into a local folder: keep the name */
	if (stat(local_arg, &st) == 0 && S_ISDIR(st.st_mode)) {
		const char *b = strrchr(rm->path, '/');
		int n = snprintf(local, sizeof(local), "%s/%s", local_arg, b ? b + 1 : rm->path);
		if (n < 0 || (size_t)n >= sizeof(local))
			return usage_error("cp", "the local path is too long");
	} else {
		snprintf(local, sizeof(local), "%s", local_arg);
	}
	snprintf(part, sizeof(part), "%s.gcpart", local);
	{
		char real[4096], dir[4096], *d;
		snprintf(dir, sizeof(dir), "%s", local);
		d = dirname(dir);
		if (!realpath(d, real))
			snprintf(real, sizeof(real), "%s", d);
		int n = snprintf(key, sizeof(key), "%s\n%s\n%s\n%s/%s", c->server, rm->area,
		                 rm->path, real, local);
		if (n < 0 || (size_t)n >= sizeof(key))
			return usage_error("cp", "the local path is too long");
	}
	if (state_path("downloads", key, spath, sizeof(spath)) < 0)
		spath[0] = '\0';
	state = spath[0] ? state_load(spath) : NULL;
	snprintf(saved, sizeof(saved), "%s", sv(json_object_get(state, "etag")));
	json_decref(state);
	fd = open(part, O_WRONLY | O_CREAT | O_CLOEXEC, 0644);
	if (fd < 0 || fstat(fd, &st) < 0) {
		fprintf(stderr, "gpucloud cp: cannot write '%s': %s\n", part, strerror(errno));
		if (fd >= 0)
			close(fd);
		return EXIT_LOCAL;
	}
	s.c = c;
	s.fd = fd;
	s.first = 1;
	s.etag = saved;
	s.spath = spath;
	s.rep = &rep;
	s.off = saved[0] && st.st_size > 0 && st.st_size < size ? st.st_size : 0;
	if (s.off == 0 && ftruncate(fd, 0) < 0) {
		close(fd);
		return EXIT_LOCAL;
	}
	if (make_url(c, rm, NULL) < 0) {
		close(fd);
		return EXIT_LOCAL;
	}
	r.path = rm->url;
	r.sink = down_sink;
	r.sink_arg = &s;
	pg.on = c->tty && !c->json;
	pg.total = size;
	pg.base = pg.from = s.off;
	pg.start = now_s();
	if (pg.on) {
		r.progress = on_progress;
		r.progress_arg = &pg;
	}
	if (s.off > 0) {
		snprintf(range, sizeof(range), "bytes=%lld-", (long long)s.off);
		r.range = range;
	}
	for (int attempt = 0; attempt < 2; attempt++) {
		if (client_send(c, &r, &rep) < 0 && !s.werr) {
			code = client_fail(c, NULL, "download");
			client_reply_release(&rep);
			close(fd);
			if (pg.on)
				fputc('\n', stderr);
			return code;
		}
		if (s.werr) {
			fprintf(stderr, "gpucloud cp: cannot write '%s': %s\n", part,
			        strerror(s.werr));
			client_reply_release(&rep);
			close(fd);
			return EXIT_LOCAL;
		}
		/* a partial reply of another version, or nothing left to send */
		if (s.restart || rep.status == 416) {
			client_reply_release(&rep);
			s.off = 0;
			s.first = 1;
			s.restart = 0;
			if (ftruncate(fd, 0) < 0)
				break;
			r.range = NULL;
			continue;
		}
		break;
	}
	if (rep.status != 200 && rep.status != 206) {
		code = client_fail(c, &rep, "download");
		client_reply_release(&rep);
		close(fd);
		return code;
	}
	if (fsync(fd) < 0 || close(fd) < 0 || s.off != size || rename(part, local) < 0) {
		fprintf(stderr, "gpucloud cp: cannot finish '%s': %s\n", local,
		        s.off != size ? "the download was cut short (run it again)"
		                      : strerror(errno));
		client_reply_release(&rep);
		return s.off != size ? EXIT_SERVER : EXIT_LOCAL;
	}
	if (spath[0])
		unlink(spath);
	bar_draw(&pg, size, 1);
	info = json_pack("{s:s, s:s, s:s, s:s, s:I, s:b}", "direction", "down", "area", rm->area,
	                 "path", rm->path, "local", local, "size", (json_int_t)size, "resumed",
	                 r.range != NULL);
	if (c->json)
		client_print_json(info);
	else
		printf("%s:%s -> %s (%lld bytes)\n", rm->area, rm->path, local, size);
	json_decref(info);
	client_reply_release(&rep);
	return EXIT_OK;
}

int cp_main(struct client *c, int argc, char **argv)
{
	static const struct option opts[] = {
		{ "overwrite", no_argument, NULL, 'o' },
		{ "limit-rate", required_argument, NULL, 'L' },
		COMMON_OPTS,
		{ NULL, 0, NULL, 0 },
	};
	struct remote src, dst;
	int opt, code, overwrite = 0, src_remote, dst_remote;

	while ((opt = getopt_long(argc, argv, "o", opts, NULL)) != -1) {
		int k = gpucloud_common_opt(c, opt, "cp");
		if (k < 0)
			return EXIT_OK;
		if (k)
			continue;
		switch (opt) {
		case 'o': overwrite = 1; break;
		case 'L': {
			long long mib = jobfile_mib(optarg);
			char *end;
			long long b = strtoll(optarg, &end, 10);
			if (*end == 'K' || *end == 'k')
				c->limit_rate = b * 1024;
			else if (*end == '\0' && b > 0)
				c->limit_rate = b;
			else if (mib > 0)
				c->limit_rate = mib << 20;
			else
				return usage_error("cp",
				                   "--limit-rate takes bytes a second: 500K, 8M");
			break;
		}
		default: return usage_error("cp", "unknown option");
		}
	}
	if (argc - optind != 2)
		return usage_error("cp", "give a source and a destination");
	src_remote = parse_remote(argv[optind], &src) == 0;
	dst_remote = parse_remote(argv[optind + 1], &dst) == 0;
	if (src_remote == dst_remote)
		return usage_error("cp", "one side must be local and the other home:PATH "
		                         "(or shared:, class:ID:, job:ID:)");
	if ((code = client_connect(c)) != EXIT_OK)
		return code;
	if (dst_remote)
		return upload(c, argv[optind], &dst, overwrite);
	if (!src.path[0])
		return usage_error("cp", "name the file to download");
	return download(c, &src, argv[optind + 1]);
}
