/* jsonw.h — JSON text written straight into an evbuffer.
 *
 * For hot paths whose answer is a fixed shape of a few members: building a
 * jansson tree only to dump it costs more than the rest of such a request
 * (GET /me).  Everything else builds with jansson.
 */
#ifndef GPUCLOUD_JSONW_H
#define GPUCLOUD_JSONW_H

#include <stddef.h>

struct evbuffer;

/* Appends a string literal (JSON text the caller wrote) to b; evbuffer_add's
 * result.  The "" makes anything but a literal a compile error. */
#define jsonw_lit(b, lit) evbuffer_add((b), "" lit, sizeof(lit) - 1)

/* Bytes of the valid UTF-8 sequence that starts at p (1 to 4), or 0 when p
 * does not start one (a stray continuation byte, an overlong form, a
 * surrogate, past U+10FFFF, a sequence cut short by a NUL). */
int jsonw_utf8_len(const unsigned char *p);

/* Appends s as a JSON string: quoted, with '"', '\\' and control characters
 * escaped, and every byte that is not part of valid UTF-8 written as
 * "\ufffd", so the result is always valid JSON.  NULL writes null.  Returns
 * 0, or -1 when the buffer could not grow. */
int jsonw_str(struct evbuffer *b, const char *s);

#endif
