/* mailer.h — e-mail of notifications through the configured SMTP server.
 *
 * The notifications themselves are made by the database (0038); the mailer,
 * on the leader, claims those waiting to be mailed, writes each in its
 * user's language, sends them with libcurl's SMTP on a worker thread (the
 * loop never waits on a mail server) and records the outcome: sent, or
 * another try later with a doubling backoff, or failed after
 * cfg.mail_max_attempts.
 */
#ifndef GPUCLOUD_MAILER_H
#define GPUCLOUD_MAILER_H

#include <stddef.h>
#include <jansson.h>

/* Registers the mailer's cron section.  0 or -1. */
int mailer_init(void);

/* Writes the subject and the plain-text body of a notification of kind
 * with params (its JSON object) in lang ("en" or "zh-CN"; anything else is
 * English).  link is the notification's in-app path ("/job?id=3"); with
 * base_url ("" for none) the body ends with the page's address.  Both
 * results are UTF-8; the subject has no control characters, the body only
 * '\n'.  Returns 0 with *subject and *body (caller frees), or -1 (unknown
 * kind, no memory). */
int mailer_text(const char *kind, const json_t *params, const char *lang, const char *link,
                const char *base_url, char **subject, char **body);

/* Builds the whole message (RFC 5322 headers, then the body as base64
 * UTF-8 text): the subject as RFC 2047 encoded words when it is not plain
 * ASCII, and every header value free of CR/LF whatever it was given.
 * from: "Name <addr>" or "addr"; to: an address.  Returns the message
 * (caller frees) or NULL (an address with characters no header may hold,
 * no memory). */
char *mailer_message(const char *from, const char *to, const char *subject, const char *body,
                     const char *message_id, long long now);

/* The address inside "Name <addr>" (or the whole of "addr") into out.
 * 0, or -1 when there is none or it holds a character an SMTP envelope
 * must not carry (space, control, '<', '>', ',', '"'). */
int mailer_address(const char *from, char *out, size_t outlen);

#endif
