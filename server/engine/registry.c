/* registry.c — the Registry HTTP API v2 client (see registry.h).
 *
 * Owns: the calls to registries themselves (on docker.c's curl multi, via
 * docker_http()), the authentication dance (401 + WWW-Authenticate ->
 * Basic, or a Bearer token from the realm), the parsing of challenges,
 * references and tags.  Does not own: the registries' rows (the API writes
 * them) nor pulls (images.c, through the engines).
 */
#include "engine/registry.h"

#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

#include <jansson.h>
#include <openssl/evp.h>

#include "base/crypto.h"
#include "base/log.h"
#include "db/db.h"
#include "engine/docker.h"
#include "engine/images.h"

#define CALL_TIMEOUT_MS 15000

/* ---- pure parts ---- */

static int tchar(char ch)
{
	return (ch >= 'a' && ch <= 'z') || (ch >= 'A' && ch <= 'Z') || (ch >= '0' && ch <= '9') ||
	       (ch && strchr("!#$%&'*+-.^_`|~/:", ch));
}

static size_t skip_ws(const char *b, size_t len, size_t i)
{
	while (i < len && (b[i] == ' ' || b[i] == '\t'))
		i++;
	return i;
}

/* Copies a quoted string or a token at b[i..) into out (NULL: skipped);
 * returns the index after it, or (size_t)-1 when broken or too long. */
static size_t value(const char *b, size_t len, size_t i, char *out, size_t outlen)
{
	size_t o = 0;

	if (i < len && b[i] == '"') {
		for (i++; i < len && b[i] != '"'; i++) {
			if (b[i] == '\\' && i + 1 < len)
				i++;
			if ((unsigned char)b[i] < 0x20 && b[i] != '\t')
				return (size_t)-1;
			if (out) {
				if (o + 1 >= outlen)
					return (size_t)-1;
				out[o++] = b[i];
			}
		}
		if (i >= len)
			return (size_t)-1; /* unterminated */
		i++;
	} else {
		for (; i < len && (tchar(b[i]) || b[i] == '='); i++)
			if (out) {
				if (o + 1 >= outlen)
					return (size_t)-1;
				out[o++] = b[i];
			}
	}
	if (out)
		out[o] = '\0';
	return i;
}

long registry_challenge_parse(const char *b, size_t len, struct registry_challenge *c)
{
	size_t i = 0, s, n;
	enum registry_scheme scheme;

	memset(c, 0, sizeof(*c));
	while (i < len) {
		while (i < len && (b[i] == ' ' || b[i] == '\t' || b[i] == ','))
			i++;
		if (i >= len)
			break;
		for (s = i; i < len && tchar(b[i]); i++)
			;
		if (i == s)
			return -1;
		n = i - s;
		scheme = n == 5 && strncasecmp(b + s, "basic", 5) == 0    ? REGISTRY_AUTH_BASIC
		         : n == 6 && strncasecmp(b + s, "bearer", 6) == 0 ? REGISTRY_AUTH_BEARER
		                                                          : REGISTRY_AUTH_NONE;
		/* its parameters: name=value, separated by commas */
		for (;;) {
			size_t ns, nn, after;
			char *dst = NULL;
			size_t dlen = 0;

			i = skip_ws(b, len, i);
			if (i >= len)
				break;
			if (b[i] == ',') {
				i++;
				continue;
			}
			for (ns = i; i < len && tchar(b[i]); i++)
				;
			nn = i - ns;
			after = skip_ws(b, len, i);
			if (nn == 0)
				return -1;
			if (after >= len || b[after] != '=') {
				/* a token without '=': the next challenge's scheme */
				i = ns;
				break;
			}
			i = skip_ws(b, len, after + 1);
			if (scheme != REGISTRY_AUTH_NONE) {
				if (nn == 5 && strncasecmp(b + ns, "realm", 5) == 0)
					dst = c->realm, dlen = sizeof(c->realm);
				else if (nn == 7 && strncasecmp(b + ns, "service", 7) == 0)
					dst = c->service, dlen = sizeof(c->service);
				else if (nn == 5 && strncasecmp(b + ns, "scope", 5) == 0)
					dst = c->scope, dlen = sizeof(c->scope);
			}
			i = value(b, len, i, dst, dlen);
			if (i == (size_t)-1)
				return -1;
			i = skip_ws(b, len, i);
			if (i < len && b[i] != ',')
				return -1;
		}
		if (scheme != REGISTRY_AUTH_NONE) {
			c->scheme = scheme;
			return (long)(i > 0 ? i : 1);
		}
		memset(c, 0, sizeof(*c));
	}
	return -1;
}

static int is_loopback(const char *host)
{
	return strncmp(host, "127.", 4) == 0 || strncmp(host, "localhost", 9) == 0 ||
	       strncmp(host, "[::1]", 5) == 0;
}

int registry_ref_parse(const char *ref, char *host, size_t hostlen, char *repo, size_t repolen,
                       char *tag, size_t taglen)
{
	char name[512];
	const char *slash;
	size_t hl;

	if (images_ref_split(ref, name, sizeof(name), tag, taglen) < 0 || !tag[0])
		return -1;
	/* no empty path component ("host/:tag" passes images_ref_valid()) */
	if (name[strlen(name) - 1] == '/' || strstr(name, "//") || name[0] == '/')
		return -1;
	slash = strchr(name, '/');
	if (slash && (memchr(name, '.', (size_t)(slash - name)) ||
	              memchr(name, ':', (size_t)(slash - name)) ||
	              ((size_t)(slash - name) == 9 && strncmp(name, "localhost", 9) == 0))) {
		hl = (size_t)(slash - name);
		if (hl >= hostlen)
			return -1;
		memcpy(host, name, hl);
		host[hl] = '\0';
		if (strcmp(host, "docker.io") == 0 || strcmp(host, "index.docker.io") == 0)
			snprintf(host, hostlen, "%s", "registry-1.docker.io");
		if ((size_t)snprintf(repo, repolen, "%s%s",
		                     !strchr(slash + 1, '/') &&
		                                     strcmp(host, "registry-1.docker.io") == 0
		                             ? "library/"
		                             : "",
		                     slash + 1) >= repolen)
			return -1;
		return 0;
	}
	if ((size_t)snprintf(host, hostlen, "%s", "registry-1.docker.io") >= hostlen)
		return -1;
	if ((size_t)snprintf(repo, repolen, "%s%s", slash ? "" : "library/", name) >= repolen)
		return -1;
	return 0;
}

static int isdig(char ch)
{
	return ch >= '0' && ch <= '9';
}

int registry_tag_cmp(const char *a, const char *b)
{
	while (*a && *b) {
		if (isdig(*a) && isdig(*b)) {
			const char *ea = a, *eb = b;
			while (*a == '0' && isdig(a[1]))
				a++;
			while (*b == '0' && isdig(b[1]))
				b++;
			for (ea = a; isdig(*ea); ea++)
				;
			for (eb = b; isdig(*eb); eb++)
				;
			if (ea - a != eb - b)
				return ea - a < eb - b ? -1 : 1;
			for (; a < ea; a++, b++)
				if (*a != *b)
					return *a < *b ? -1 : 1;
			continue;
		}
		if (*a != *b)
			return (unsigned char)*a < (unsigned char)*b ? -1 : 1;
		a++;
		b++;
	}
	return *a ? 1 : *b ? -1 : 0;
}

/* The tag with each digit run as one '#'; 0 when it has no digit or does
 * not fit. */
static int shape(const char *t, char *out, size_t outlen)
{
	size_t o = 0;
	int digits = 0;

	for (; *t; t++) {
		if (isdig(*t)) {
			digits = 1;
			if (o && out[o - 1] == '#' && isdig(t[-1]))
				continue;
		}
		if (o + 1 >= outlen)
			return 0;
		out[o++] = isdig(*t) ? '#' : *t;
	}
	out[o] = '\0';
	return digits;
}

int registry_tag_newer(const char *cur, const char *cand)
{
	char a[160], b[160];

	if (!shape(cur, a, sizeof(a)) || !shape(cand, b, sizeof(b)) || strcmp(a, b) != 0)
		return 0;
	return registry_tag_cmp(cand, cur) > 0;
}

int registry_repo_valid(const char *repo)
{
	size_t n = repo ? strlen(repo) : 0;

	if (n == 0 || n > 255 || repo[0] == '/' || repo[n - 1] == '/' || strstr(repo, "//") ||
	    strstr(repo, ".."))
		return 0;
	if (strspn(repo, "abcdefghijklmnopqrstuvwxyz0123456789._-/") != n)
		return 0;
	return repo[0] != '.' && repo[0] != '-';
}

/* ---- calls ---- */

enum what { MANIFEST, CATALOG, TAGS };

struct rcall {
	enum what what;
	long long reg_id;
	char ref[300], host[256], repo[300], tag[160];
	char regname[64];
	char url[1200];  /* the API call */
	char *basic;     /* "Authorization: Basic ..." (wiped when freed), NULL: none */
	char *bearer;    /* "Authorization: Bearer ..." */
	int sent_basic;  /* the API call went with Basic */
	int sent_bearer; /* ... with a token */
	int bad;         /* the reference does not parse */
	int by_ref;      /* host and repository come from ref */
	registry_cb cb;
	void *arg;
};

static void wipe_free(char *s)
{
	if (s) {
		explicit_bzero(s, strlen(s));
		free(s);
	}
}

static void rcall_free(struct rcall *p)
{
	wipe_free(p->basic);
	wipe_free(p->bearer);
	free(p);
}

static void finish(struct rcall *p, enum rc rc, const char *body, size_t len, const char *fmt, ...)
        __attribute__((format(printf, 5, 6)));
static void finish(struct rcall *p, enum rc rc, const char *body, size_t len, const char *fmt, ...)
{
	char err[900] = "";
	va_list ap;

	if (fmt) {
		va_start(ap, fmt);
		vsnprintf(err, sizeof(err), fmt, ap);
		va_end(ap);
	}
	if (rc != RC_OK)
		LOG_D("registry", "%s", err);
	p->cb(rc, body ? body : "", body ? len : 0, err, p->arg);
	rcall_free(p);
}

/* The registry's own words from an error body ({"errors":[{"message"}]}). */
static void registry_words(const char *body, size_t len, int status, char *out, size_t outlen)
{
	json_t *j = len ? json_loadb(body, len, 0, NULL) : NULL;
	json_t *e = json_array_get(json_object_get(j, "errors"), 0);
	const char *m = json_string_value(json_object_get(e, "message"));
	const char *c = json_string_value(json_object_get(e, "code"));

	if (m)
		snprintf(out, outlen, "%s%s%s", c ? c : "", c ? ": " : "", m);
	else
		snprintf(out, outlen, "HTTP %d", status);
	json_decref(j);
}

static void add_escaped(char *out, size_t outlen, const char *s)
{
	size_t o = strlen(out);

	for (; *s && o + 4 < outlen; s++) {
		unsigned char ch = (unsigned char)*s;
		if ((ch >= 'a' && ch <= 'z') || (ch >= 'A' && ch <= 'Z') ||
		    (ch >= '0' && ch <= '9') || strchr("-._~", ch))
			out[o++] = (char)ch;
		else
			o += (size_t)snprintf(out + o, outlen - o, "%%%02X", ch);
	}
	out[o] = '\0';
}

static void api_send(struct rcall *p);

static void token_done(struct docker_call *call, enum rc rc, int status, const char *body,
                       size_t len, const char *err, void *arg)
{
	struct rcall *p = arg;
	json_t *j;
	const char *tok;
	char words[400];

	(void)call;
	if (rc != RC_OK) {
		finish(p, rc, NULL, 0, "could not get a token for registry '%s': %s", p->host, err);
		return;
	}
	if (status == 401 || status == 403) {
		registry_words(body, len, status, words, sizeof(words));
		finish(p, RC_FORBIDDEN, NULL, 0, "registry '%s' refused the credentials%s%s%s: %s",
		       p->host, p->regname[0] ? " of registry '" : "", p->regname,
		       p->regname[0] ? "'" : "", words);
		return;
	}
	j = status == 200 ? json_loadb(body, len, 0, NULL) : NULL;
	tok = json_string_value(json_object_get(j, "token"));
	if (!tok)
		tok = json_string_value(json_object_get(j, "access_token"));
	if (!tok || !*tok || strpbrk(tok, "\r\n")) {
		json_decref(j);
		finish(p, RC_DOCKER, NULL, 0, "the token service of registry '%s' answered %d",
		       p->host, status);
		return;
	}
	p->bearer = malloc(strlen(tok) + 32);
	if (p->bearer)
		snprintf(p->bearer, strlen(tok) + 32, "Authorization: Bearer %s", tok);
	json_decref(j);
	if (!p->bearer) {
		finish(p, RC_NOMEM, NULL, 0, "out of memory");
		return;
	}
	api_send(p);
}

static void get_token(struct rcall *p, const struct registry_challenge *ch)
{
	char url[1600];
	const char *headers[3] = { "Accept: application/json", p->basic, NULL };

	if (strncmp(ch->realm, "https://", 8) != 0 &&
	    !(strncmp(ch->realm, "http://", 7) == 0 && is_loopback(ch->realm + 7))) {
		finish(p, RC_DOCKER, NULL, 0,
		       "registry '%s' sends for a token to '%.200s', not an https:// address",
		       p->host, ch->realm);
		return;
	}
	snprintf(url, sizeof(url), "%s%s", ch->realm, strchr(ch->realm, '?') ? "&" : "?");
	if (ch->service[0]) {
		strncat(url, "service=", sizeof(url) - strlen(url) - 1);
		add_escaped(url, sizeof(url), ch->service);
		strncat(url, "&", sizeof(url) - strlen(url) - 1);
	}
	strncat(url, "scope=", sizeof(url) - strlen(url) - 1);
	if (ch->scope[0]) {
		add_escaped(url, sizeof(url), ch->scope);
	} else {
		char scope[400];
		if (p->what == CATALOG)
			snprintf(scope, sizeof(scope), "registry:catalog:*");
		else
			snprintf(scope, sizeof(scope), "repository:%s:pull", p->repo);
		add_escaped(url, sizeof(url), scope);
	}
	p->sent_bearer = 1;
	if (!docker_http("GET", url, headers, CALL_TIMEOUT_MS, token_done, p))
		finish(p, RC_NOMEM, NULL, 0, "could not ask registry '%s' for a token", p->host);
}

static void api_done(struct docker_call *call, enum rc rc, int status, const char *body, size_t len,
                     const char *err, void *arg)
{
	struct rcall *p = arg;
	struct registry_challenge ch;
	char hdr[2048], words[400];

	if (rc != RC_OK) {
		finish(p, rc, NULL, 0, "could not reach registry '%s': %s", p->host, err);
		return;
	}
	if (status == 200) {
		finish(p, RC_OK, body, len, NULL);
		return;
	}
	if (status == 404) {
		registry_words(body, len, status, words, sizeof(words));
		if (p->what == MANIFEST)
			finish(p, RC_NOTFOUND, NULL, 0,
			       "image '%s' not found in registry '%s' (%s)", p->ref, p->host,
			       words);
		else
			finish(p, RC_NOTFOUND, NULL, 0, "registry '%s' answered 404 for %s (%s)",
			       p->host, p->what == CATALOG ? "its repository list" : p->repo,
			       words);
		return;
	}
	if (status == 401 && !p->sent_basic && !p->sent_bearer) {
		docker_call_header(call, "WWW-Authenticate", hdr, sizeof(hdr));
		if (registry_challenge_parse(hdr, strlen(hdr), &ch) < 0) {
			finish(p, RC_FORBIDDEN, NULL, 0,
			       "registry '%s' wants an authentication gpucloud does not speak "
			       "('%.100s')",
			       p->host, hdr);
			return;
		}
		if (ch.scheme == REGISTRY_AUTH_BEARER) {
			get_token(p, &ch);
			return;
		}
		if (!p->basic) {
			finish(p, RC_FORBIDDEN, NULL, 0,
			       "registry '%s' needs credentials: add them to the registry whose "
			       "server is '%s'",
			       p->host, p->host);
			return;
		}
		p->sent_basic = 1;
		api_send(p);
		return;
	}
	if (status == 401 || status == 403) {
		registry_words(body, len, status, words, sizeof(words));
		if (!p->basic)
			finish(p, RC_FORBIDDEN, NULL, 0,
			       "registry '%s' needs credentials: add them to the registry whose "
			       "server is '%s' (%s)",
			       p->host, p->host, words);
		else
			finish(p, RC_FORBIDDEN, NULL, 0,
			       "registry '%s' refused the credentials of registry '%s': %s",
			       p->host, p->regname, words);
		return;
	}
	registry_words(body, len, status, words, sizeof(words));
	finish(p, RC_DOCKER, NULL, 0, "registry '%s' answered %d: %s", p->host, status, words);
}

static void api_send(struct rcall *p)
{
	const char *headers[3] = { NULL, NULL, NULL };
	int n = 0;

	headers[n++] = p->what == MANIFEST
	                       ? "Accept: application/vnd.docker.distribution.manifest.v2+json, "
	                         "application/vnd.docker.distribution.manifest.list.v2+json, "
	                         "application/vnd.oci.image.manifest.v1+json, "
	                         "application/vnd.oci.image.index.v1+json"
	                       : "Accept: application/json";
	if (p->bearer)
		headers[n++] = p->bearer;
	else if (p->sent_basic)
		headers[n++] = p->basic;
	if (!docker_http(p->what == MANIFEST ? "HEAD" : "GET", p->url, headers, CALL_TIMEOUT_MS,
	                 api_done, p))
		finish(p, RC_NOMEM, NULL, 0, "could not start a call to registry '%s'", p->host);
}

/* "Authorization: Basic base64(user:password)" from the row's credentials. */
static int make_basic(struct rcall *p, const char *name, const char *server, const char *user,
                      const char *sealed)
{
	char aad[400], *secret = NULL, *plain = NULL;
	size_t slen = 0, plen;
	int ret = -1;

	if (!sealed || !*sealed)
		return 0; /* anonymous */
	images_secret_aad(name, server, aad, sizeof(aad));
	secret = crypto_open(sealed, aad, &slen);
	if (!secret)
		return -1;
	plen = strlen(user ? user : "") + 1 + slen;
	plain = malloc(plen + 1);
	p->basic = malloc(4 * ((plen + 2) / 3) + 32);
	if (plain && p->basic) {
		snprintf(plain, plen + 1, "%s:", user ? user : "");
		memcpy(plain + strlen(user ? user : "") + 1, secret, slen);
		plain[plen] = '\0';
		memcpy(p->basic, "Authorization: Basic ", 21);
		EVP_EncodeBlock((unsigned char *)p->basic + 21, (const unsigned char *)plain,
		                (int)plen);
		ret = 0;
	}
	if (plain) {
		explicit_bzero(plain, plen);
		free(plain);
	}
	explicit_bzero(secret, slen);
	free(secret);
	return ret;
}

/* Row: 0 name, 1 server, 2 username, 3 secret_sealed (no row: anonymous). */
static void loaded(PGresult *res, enum rc rc, void *arg)
{
	struct rcall *p = arg;
	const char *server = NULL;
	int path_len;

	if (rc != RC_OK) {
		finish(p, rc, NULL, 0, "could not read the registry (database %s)", rc_code(rc));
		return;
	}
	if (p->bad) {
		finish(p, RC_INVALID, NULL, 0, "'%s' is not an image reference", p->ref);
		return;
	}
	if (PQntuples(res) != 1 && (p->reg_id || !p->by_ref)) {
		finish(p, RC_INVALID, NULL, 0, "no such registry");
		return;
	}
	if (PQntuples(res) == 1) {
		server = db_val(res, 0, 1);
		snprintf(p->regname, sizeof(p->regname), "%s", db_val(res, 0, 0));
	}
	if (!p->by_ref) {
		char h[300], r[8], t[8];
		/* the server as a reference's host: docker.io is registry-1 */
		snprintf(h, sizeof(h), "%s/x", server);
		if (registry_ref_parse(h, p->host, sizeof(p->host), r, sizeof(r), t, sizeof(t)) <
		    0) {
			finish(p, RC_INVALID, NULL, 0, "registry server '%s' is not a host",
			       server);
			return;
		}
	}
	/* credentials go only to the host they are for */
	if (server &&
	    (strcmp(server, p->host) == 0 ||
	     (strcmp(p->host, "registry-1.docker.io") == 0 &&
	      (strcmp(server, "docker.io") == 0 || strcmp(server, "index.docker.io") == 0 ||
	       strcmp(server, "registry-1.docker.io") == 0))) &&
	    make_basic(p, db_val(res, 0, 0), server, db_val(res, 0, 2), db_val(res, 0, 3)) < 0) {
		finish(p, RC_INVALID, NULL, 0,
		       "cannot decrypt the credentials of registry '%s' (is the master key the one "
		       "they were stored with?)",
		       p->regname);
		return;
	}
	path_len = snprintf(p->url, sizeof(p->url), "%s://%s/v2/",
	                    is_loopback(p->host) ? "http" : "https", p->host);
	if (p->what == MANIFEST)
		path_len += snprintf(p->url + path_len, sizeof(p->url) - (size_t)path_len,
		                     "%s/manifests/%s", p->repo, p->tag);
	else if (p->what == CATALOG)
		path_len += snprintf(p->url + path_len, sizeof(p->url) - (size_t)path_len,
		                     "_catalog?n=1000");
	else
		path_len += snprintf(p->url + path_len, sizeof(p->url) - (size_t)path_len,
		                     "%s/tags/list?n=1000", p->repo);
	if ((size_t)path_len >= sizeof(p->url)) {
		finish(p, RC_INVALID, NULL, 0, "the registry address is too long");
		return;
	}
	api_send(p);
}

static struct rcall *rcall_new(enum what what, long long reg_id, registry_cb cb, void *arg)
{
	struct rcall *p = calloc(1, sizeof(*p));

	if (!p)
		return NULL;
	p->what = what;
	p->reg_id = reg_id;
	p->cb = cb;
	p->arg = arg;
	return p;
}

#define REG_ROW "SELECT name, server, username, secret_sealed FROM registries"

static int start_ref(enum what what, long long registry_id, const char *ref, registry_cb cb,
                     void *arg)
{
	struct rcall *p = rcall_new(what, registry_id, cb, arg);
	char ids[24];
	const char *params[2] = { ids, ref };

	if (!p)
		return -1;
	p->by_ref = 1;
	snprintf(p->ref, sizeof(p->ref), "%s", ref);
	/* a reference that does not parse is told on the loop, as every answer */
	p->bad = registry_ref_parse(ref, p->host, sizeof(p->host), p->repo, sizeof(p->repo), p->tag,
	                            sizeof(p->tag)) < 0;
	snprintf(ids, sizeof(ids), "%lld", registry_id);
	if (registry_id)
		db_query(REG_ROW " WHERE id = $1::bigint AND $2::text IS NOT NULL", 2, params,
		         loaded, p);
	else
		db_query(REG_ROW " WHERE $1::bigint = 0 AND starts_with($2, server || '/')"
		                 " ORDER BY length(server) DESC, id LIMIT 1",
		         2, params, loaded, p);
	return 0;
}

int registry_check_ref(long long registry_id, const char *ref, registry_cb cb, void *arg)
{
	return start_ref(MANIFEST, registry_id, ref, cb, arg);
}

int registry_ref_tags(long long registry_id, const char *ref, registry_cb cb, void *arg)
{
	return start_ref(TAGS, registry_id, ref, cb, arg);
}

int registry_list_repos(long long registry_id, registry_cb cb, void *arg)
{
	struct rcall *p = rcall_new(CATALOG, registry_id, cb, arg);
	char ids[24];
	const char *params[1] = { ids };

	if (!p)
		return -1;
	snprintf(ids, sizeof(ids), "%lld", registry_id);
	db_query(REG_ROW " WHERE id = $1::bigint", 1, params, loaded, p);
	return 0;
}

int registry_list_tags(long long registry_id, const char *repo, registry_cb cb, void *arg)
{
	struct rcall *p = rcall_new(TAGS, registry_id, cb, arg);
	char ids[24];
	const char *params[1] = { ids };

	if (!p)
		return -1;
	snprintf(p->repo, sizeof(p->repo), "%s", repo);
	snprintf(ids, sizeof(ids), "%lld", registry_id);
	db_query(REG_ROW " WHERE id = $1::bigint", 1, params, loaded, p);
	return 0;
}
