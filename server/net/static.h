/* static.h — serving the web frontend from cfg.web_root (the http fallback
 * for GET/HEAD paths no route claims). */
#ifndef GPUCLOUD_STATIC_H
#define GPUCLOUD_STATIC_H

#include "net/http.h"

/* The http fallback hook. */
void static_serve(struct http_req *r);

/* 1 when a decoded relative path is safe to open beneath the web root. */
int static_path_ok(const char *path);

/* Drops the cache. */
void static_free(void);

#endif
