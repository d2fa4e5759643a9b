/* registry.h — a Registry HTTP API v2 client (what Docker Hub, nvcr.io and
 * docker-registry speak), asked directly by gpucloudd, not through an
 * engine: whether a reference exists (HEAD of its manifest), a registry's
 * repositories (/v2/_catalog) and a repository's tags (/v2/<repo>/tags/list).
 *
 * Credentials are the registry's stored ones (opened from their sealed form
 * for one call, never logged), sent as Basic, or traded for a Bearer token
 * at the realm the registry's WWW-Authenticate names (the token flow of
 * Docker Hub and nvcr.io).  Loopback registries (127.0.0.0/8, localhost,
 * [::1]) are spoken to over plain HTTP, as engines do by default; every
 * other over HTTPS verified by the system's CAs.
 */
#ifndef GPUCLOUD_REGISTRY_H
#define GPUCLOUD_REGISTRY_H

#include <stddef.h>
#include "base/rc.h"

/* Completion of a registry call; fires exactly once, on the loop, never
 * from inside the function that started it.
 * rc: RC_OK (status 200: found; body the registry's JSON, for HEAD empty),
 *     RC_NOTFOUND (the registry answered 404: no such manifest/repository),
 *     RC_INVALID (no such registry row; a reference that does not parse;
 *     credentials that do not decrypt), RC_FORBIDDEN (401/403: credentials missing
 *     or refused), RC_UNAVAILABLE / RC_TIMEOUT (the registry could not be
 *     reached), RC_DOCKER (any other answer), RC_NOMEM.
 * err: a message a user can act on for non-OK rc (the registry's own words
 * when it gave some).  body and err are borrowed for the callback. */
typedef void (*registry_cb)(enum rc rc, const char *body, size_t len, const char *err, void *arg);

/* Does ref exist?  registry_id: the registry whose credentials to use (0:
 * the registry whose server ref starts with, the longest, else anonymous).
 * The credentials go only to the host ref names.  Returns 0 (cb will fire)
 * or -1 (out of memory; cb will not). */
int registry_check_ref(long long registry_id, const char *ref, registry_cb cb, void *arg);

/* GET /v2/_catalog?n=1000 of registry registry_id: body {"repositories":[...]}. */
int registry_list_repos(long long registry_id, registry_cb cb, void *arg);

/* GET /v2/<repo>/tags/list?n=1000 on registry registry_id's server:
 * body {"name":..., "tags":[...]}. */
int registry_list_tags(long long registry_id, const char *repo, registry_cb cb, void *arg);

/* The tags of ref's repository (tags/list on the host ref names), with
 * the credentials chosen as for registry_check_ref(). */
int registry_ref_tags(long long registry_id, const char *ref, registry_cb cb, void *arg);

/* ---- pure parts, for the API, unit tests and the fuzz target ---- */

enum registry_scheme { REGISTRY_AUTH_NONE, REGISTRY_AUTH_BASIC, REGISTRY_AUTH_BEARER };

/* One challenge of a WWW-Authenticate header. */
struct registry_challenge {
	enum registry_scheme scheme;
	char realm[512], service[256], scope[512];
};

/* Parses buf[0..len), a WWW-Authenticate value, into c: the first Bearer or
 * Basic challenge (others are skipped), its realm, service and scope
 * parameters (quoted with backslash escapes, or tokens).  Returns the bytes
 * consumed (> 0), or -1 when no Basic or Bearer challenge is there or the
 * syntax is broken (an unterminated quote, a parameter too long).  No
 * allocation, no I/O. */
long registry_challenge_parse(const char *buf, size_t len, struct registry_challenge *c);

/* Splits an image reference the way engines read it: host (docker.io's
 * short names become "registry-1.docker.io"), repository ("busybox" ->
 * "library/busybox" there) and tag or digest ("latest" when none).
 * Returns 0, or -1 when a part does not fit. */
int registry_ref_parse(const char *ref, char *host, size_t hostlen, char *repo, size_t repolen,
                       char *tag, size_t taglen);

/* Tags as versions: digit runs compare as numbers, the rest byte by byte
 * ("24.10-py3" > "24.9-py3").  <0, 0, >0 like strcmp. */
int registry_tag_cmp(const char *a, const char *b);

/* 1 when cand is a newer tag of the same series as cur: both have digits,
 * the same shape once each digit run is one symbol ("24.08-py3" and
 * "24.10-py3", not "24.10-py3-igpu" nor "latest"), and cand compares
 * greater.  Else 0. */
int registry_tag_newer(const char *cur, const char *cand);

/* Checks a repository name as the v2 API takes it (lower-case path
 * components of [a-z0-9._-], separated by '/', at most 255 bytes).  1 or 0. */
int registry_repo_valid(const char *repo);

#endif
