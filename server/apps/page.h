/* page.h — the answers the app proxy gives itself instead of the app's:
 * "starting", "stopped", "no such app", "sign in", upstream failures.
 * Internal to apps/ (the rest of the server uses proxy.h).
 */
#ifndef GPUCLOUD_PAGE_H
#define GPUCLOUD_PAGE_H

#include "net/http.h"

/* 1 when r is a browser's GET or HEAD that accepts text/html. */
int page_wants_html(const struct http_req *r);

/* The display name of the app behind port_name ("Jupyter", "TensorBoard",
 * else port_name itself, "The app" when empty).  Borrowed. */
const char *page_app_title(const char *port_name);

/* The final reply of r: an HTML page (title, message) for browsers
 * (page_wants_html), else the JSON error shape {"error":{code, message,
 * hint}} (hint may be NULL).  retry > 0: Retry-After, and the page reloads
 * itself after that many seconds.  Always Cache-Control: no-store. */
void page_reply(struct http_req *r, int status, const char *code, const char *title,
                const char *message, const char *hint, int retry);

#endif
