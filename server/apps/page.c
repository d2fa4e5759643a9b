/* page.c — the pages the app proxy answers with itself.
 *
 * Owns: the small HTML pages a browser sees while an app starts, after it
 * stopped, when it does not exist or does not answer (self-reloading where
 * waiting helps), and the JSON error shape for every other client.
 * Does not own: deciding which answer (proxy.c, route.c), the API's own
 * error replies (http_reply_error in net/http.c).
 */
#include "apps/page.h"

#include <string.h>

#include <event2/buffer.h>
#include <http_parser.h>
#include <jansson.h>

int page_wants_html(const struct http_req *r)
{
	const char *accept = http_header(r, "Accept");

	return (r->method == HTTP_GET || r->method == HTTP_HEAD) && accept &&
	       strstr(accept, "text/html");
}

static void html_escape(const char *s, char *out, size_t outlen)
{
	size_t o = 0;

	for (; *s && o + 7 < outlen; s++) {
		const char *e = *s == '<'   ? "&lt;"
		                : *s == '>' ? "&gt;"
		                : *s == '&' ? "&amp;"
		                : *s == '"' ? "&quot;"
		                            : NULL;
		if (e) {
			memcpy(out + o, e, strlen(e));
			o += strlen(e);
		} else {
			out[o++] = *s;
		}
	}
	out[o] = '\0';
}

const char *page_app_title(const char *port_name)
{
	if (strcmp(port_name, "jupyter") == 0)
		return "Jupyter";
	if (strcmp(port_name, "tensorboard") == 0)
		return "TensorBoard";
	return port_name[0] ? port_name : "The app";
}

void page_reply(struct http_req *r, int status, const char *code, const char *title,
                const char *message, const char *hint, int retry)
{
	char t[256], m[1024], ra[16];

	if (retry > 0) {
		snprintf(ra, sizeof(ra), "%d", retry);
		http_add_header(r, "Retry-After", ra);
	}
	http_add_header(r, "Cache-Control", "no-store");
	if (page_wants_html(r)) {
		struct evbuffer *b = evbuffer_new();
		if (!b) {
			http_reply(r, status, "text/plain", message, strlen(message));
			return;
		}
		html_escape(title, t, sizeof(t));
		html_escape(message, m, sizeof(m));
		evbuffer_add_printf(
		        b,
		        "<!doctype html><html lang=\"en\"><head><meta charset=\"utf-8\">"
		        "<meta name=\"viewport\" content=\"width=device-width\">%s%d%s"
		        "<title>%s</title><style>body{font:16px system-ui,sans-serif;margin:4rem "
		        "auto;"
		        "max-width:36rem;padding:0 1rem;color:#222}p{color:#555}</style></head>"
		        "<body><h1 data-proxy-status=\"%d\">%s</h1><p>%s</p>%s</body></html>\n",
		        retry > 0 ? "<meta http-equiv=\"refresh\" content=\"" : "",
		        retry > 0 ? retry : 0, retry > 0 ? "\">" : "", t, status, t, m,
		        retry > 0 ? "<p>This page reloads by itself.</p>" : "");
		http_reply_evbuffer(r, status, "text/html; charset=utf-8", b);
		evbuffer_free(b);
		return;
	}
	{
		json_t *err = json_pack("{s:s, s:s}", "code", code, "message", message);
		if (err && hint)
			json_object_set_new(err, "hint", json_string(hint));
		http_reply_json(r, status, err ? json_pack("{s:o}", "error", err) : NULL);
	}
}
