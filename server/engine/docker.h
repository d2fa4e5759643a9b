/* docker.h — the Docker Engine API client: libcurl multi driven by the
 * libevent loop (the curl multi-socket pattern), one engine per endpoint.
 *
 * Endpoints: "unix:///path/docker.sock", or "tcp://host:port" with mutual
 * TLS (CA, client certificate and key, all verified; plain TCP without TLS
 * is refused).  Requests are asynchronous and never block the loop.
 * Responses are either collected whole (docker_request) or handed over
 * piece by piece (docker_stream), where attach/logs streams of containers
 * without a TTY are demultiplexed from their 8-byte frame headers.
 */
#ifndef GPUCLOUD_DOCKER_H
#define GPUCLOUD_DOCKER_H

#include <stddef.h>
#include <event2/event.h>
#include "base/rc.h"

#define DOCKER_API_VERSION "v1.41"

struct docker_engine;
struct docker_call;

/* Completion of a request; fires exactly once (unless cancelled), on the
 * loop, never from inside docker_request()/docker_stream().
 * rc: RC_OK when an HTTP response arrived (any status: look at status),
 *     RC_UNAVAILABLE when the engine could not be reached (connect refused,
 *     socket missing, TLS handshake failed), RC_TIMEOUT after timeout_ms,
 *     RC_NOMEM, RC_DOCKER when a whole body passes 64 MiB.  err is a human
 *     message for non-OK rc (e.g. the TLS error), else "".  body is the whole
 *     response body (NUL-terminated, len bytes; for docker_stream calls empty,
 *     unless the status is not 2xx: then the engine's error body is collected
 *     here instead of going to on_data).  Both are borrowed for the callback. */
typedef void (*docker_cb)(struct docker_call *call, enum rc rc, int status, const char *body,
                          size_t len, const char *err, void *arg);

/* Streamed body data.  stream is 1 (stdout) or 2 (stderr) for demultiplexed
 * container streams, 0 for raw data (pull progress JSON lines, TTY output).
 * Return 0 to continue, -1 to abort the call (its cb then fires with
 * RC_OK and the status). */
typedef int (*docker_data_cb)(struct docker_call *call, int stream, const char *data, size_t len,
                              void *arg);

/* Starts the client on base (curl_global_init, the multi handle). 0 or -1. */
int docker_init(struct event_base *base);
/* Cancels every call (their callbacks fire with RC_UNAVAILABLE, deferred to
 * the loop) and frees the client. */
void docker_shutdown(void);

/* An engine endpoint.  ca/cert/key are PEM file paths, required for tcp://
 * and ignored for unix://.  Returns NULL with a message in err when the URL
 * or files are unusable (nothing is contacted yet). */
struct docker_engine *docker_engine_new(const char *url, const char *ca, const char *cert,
                                        const char *key, char *err, size_t errlen);
/* Cancels the engine's calls (callbacks fire with RC_UNAVAILABLE) and frees it. */
void docker_engine_free(struct docker_engine *e);

/* One request: method ("GET", "POST", "DELETE"...), path below the API
 * version ("/info", "/containers/create?name=x"), optional body with its
 * content type, optional extra headers ("X-Registry-Auth: ...", NULL-
 * terminated list), timeout_ms (0 = none).  Returns a handle valid until the
 * callback returns, or NULL when the call could not be started (then cb
 * never fires). */
struct docker_call *docker_request(struct docker_engine *e, const char *method, const char *path,
                                   const char *ctype, const char *body, size_t len,
                                   const char *const *headers, int timeout_ms, docker_cb cb,
                                   void *arg);

/* A docker_cb for fire-and-forget calls (a best-effort remove or kill whose
 * outcome the next pass or the reconciler reads anyway): drops the answer. */
void docker_ignore(struct docker_call *call, enum rc rc, int status, const char *body, size_t len,
                   const char *err, void *arg);

/* The same, with the response body handed to on_data as it arrives.
 * demux: 1 to split 8-byte-framed container streams (logs/attach without a
 * TTY), 0 for raw bodies, DOCKER_DEMUX_FRAMES to split them and mark the
 * first piece of each frame (on_data's stream is then ORed with
 * DOCKER_FRAME_START): a logs stream sends one frame per log message, so
 * the mark says where a message begins. */
#define DOCKER_DEMUX_FRAMES 2
#define DOCKER_FRAME_START  0x100
struct docker_call *docker_stream(struct docker_engine *e, const char *method, const char *path,
                                  const char *ctype, const char *body, size_t len,
                                  const char *const *headers, int timeout_ms, int demux,
                                  docker_data_cb on_data, docker_cb cb, void *arg);

/* A request to any http(s) URL (a registry's HTTP API v2) on the same
 * multi and loop: the system's CAs verify https, no client certificate,
 * redirects are not followed, and the response's headers are kept for
 * docker_call_header().  rc and the callback as for docker_request(); err
 * names the URL.  Returns a handle or NULL (cb never fires then). */
struct docker_call *docker_http(const char *method, const char *url, const char *const *headers,
                                int timeout_ms, docker_cb cb, void *arg);

/* Inside the callback of a docker_http() call: the value of response
 * header name (case-insensitive; the last when repeated) into out.
 * Returns 1 when the header was there, else 0 (out empty). */
int docker_call_header(const struct docker_call *call, const char *name, char *out, size_t outlen);

/* Stops a call; its callbacks never fire afterwards.  Allowed from on_data
 * (for any call, its own included); inside its own cb it does nothing. */
void docker_cancel(struct docker_call *call);

/* Calls in flight (for metrics). */
int docker_calls_in_flight(void);

/* The frame header parser (picohttpparser shape): buf[0..len) starts with a
 * frame.  Returns 8 and sets *stream (0 stdin, 1 stdout, 2 stderr) and
 * *payload when a whole header is there, -2 when fewer than 8 bytes, -1
 * when it is not a frame header (stream byte > 2 or non-zero padding). */
int docker_frame_header(const unsigned char *buf, size_t len, int *stream, size_t *payload);

#endif
