/* mailer.c — e-mail of notifications (see mailer.h).
 *
 * Owns: the texts of the mails (English and Simplified Chinese), the
 * message format (headers, RFC 2047 subjects, base64 bodies), and one
 * round at a time on the leader: claim a batch of pending notifications,
 * send it on a worker thread with libcurl's SMTP, record the outcomes.
 * Does not own the notifications (0038's triggers make them, the API reads
 * and marks them; the mailer only removes those past
 * notification_keep_days) nor the preferences (api_notifications.c).
 *
 * A claim pushes mail_next_at a few minutes ahead, so a replica that dies
 * mid-send leaves its batch to be tried again, never lost; a mail may then
 * be sent twice, which beats not at all.
 */
#include "work/mailer.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include <curl/curl.h>

#include "base/config.h"
#include "base/cron.h"
#include "base/log.h"
#include "base/worker.h"
#include "db/db.h"
#include "db/leader.h"

#define BATCH 10

/* ---- a growing string ---- */

struct buf {
	char *p;
	size_t len, cap;
	int bad;
};

static void put(struct buf *b, const char *s, size_t n)
{
	if (b->bad)
		return;
	if (b->len + n + 1 > b->cap) {
		size_t cap = b->cap ? b->cap : 256;
		char *p;
		while (cap < b->len + n + 1)
			cap *= 2;
		p = realloc(b->p, cap);
		if (!p) {
			b->bad = 1;
			return;
		}
		b->p = p;
		b->cap = cap;
	}
	memcpy(b->p + b->len, s, n);
	b->len += n;
	b->p[b->len] = '\0';
}

static void puts_(struct buf *b, const char *s)
{
	put(b, s, strlen(s));
}

static char *done(struct buf *b)
{
	if (b->bad || !b->p) {
		free(b->p);
		return b->bad ? NULL : strdup("");
	}
	return b->p;
}

/* ---- texts ---- */

struct text {
	const char *kind;
	const char *subject[2]; /* en, zh-CN */
	const char *body[2];
};

/* {name} is the parameter's value; a few are derived (see derive()). */
static const struct text texts[] = {
	{ "job.succeeded",
	  { "Job {name} finished", "作业 {name} 已完成" },
	  { "Your job {name} (#{job_id}) finished successfully.",
	    "你的作业 {name}（#{job_id}）已成功完成。" } },
	{ "job.failed",
	  { "Job {name} failed", "作业 {name} 失败" },
	  { "Your job {name} (#{job_id}) ended: {state_text}.{exit_text}\n{reason}",
	    "你的作业 {name}（#{job_id}）已结束：{state_text}。{exit_text}\n{reason}" } },
	{ "instance.idle_warning",
	  { "Instance {name} will be stopped", "实例 {name} 即将被停止" },
	  { "Your instance {name} has been idle for {idle_seconds} s. It will be stopped at "
	    "{stop_at} unless it is used.",
	    "你的实例 {name} 已空闲 {idle_seconds} 秒。如果在 {stop_at} "
	    "之前仍未使用，它将被停止。" } },
	{ "instance.stopped",
	  { "Instance {name} was stopped", "实例 {name} 已被停止" },
	  { "Your instance {name} was stopped: {why_text}.",
	    "你的实例 {name} 已被停止：{why_text}。" } },
	{ "quota.storage",
	  { "Your home storage is {percent}% full", "你的主目录存储已用 {percent}%" },
	  { "Your home directory uses {bytes_text} of its {limit_text} limit ({percent}%). "
	    "Delete files you no longer need before it is full.",
	    "你的主目录已使用 {bytes_text}，上限为 {limit_text}（{percent}%）。"
	    "请在用满之前删除不再需要的文件。" } },
	{ "quota.gpu_hours",
	  { "GPU-hours in pool {pool} at {percent}%", "资源池 {pool} 的 GPU 时长已用 {percent}%" },
	  { "You have used {used_hours} of your {limit_hours} GPU-hours per week in pool {pool} "
	    "({percent}%).",
	    "你在资源池 {pool} 中已使用每周 {limit_hours} GPU 小时中的 "
	    "{used_hours}（{percent}%）。" } },
	{ "class.notice",
	  { "Notice in {class}: {first_line}", "课程 {class} 的通知：{first_line}" },
	  { "{author} posted a notice in class {class}:\n\n{body}",
	    "{author} 在课程 {class} 中发布了通知：\n\n{body}" } },
};

static const char *footer[2] = {
	"You can choose which notifications are e-mailed on your Account page.",
	"你可以在“账户”页面选择哪些通知通过邮件发送。",
};

/* A parameter as text ("" when absent or null). */
static char *param(const json_t *params, const char *name)
{
	const json_t *v = json_object_get(params, name);
	char tmp[64];

	if (json_is_string(v))
		return strdup(json_string_value(v));
	if (json_is_integer(v)) {
		snprintf(tmp, sizeof(tmp), "%lld", (long long)json_integer_value(v));
		return strdup(tmp);
	}
	if (json_is_real(v)) {
		snprintf(tmp, sizeof(tmp), "%g", json_real_value(v));
		return strdup(tmp);
	}
	return strdup("");
}

static void bytes_text(char *out, size_t n, double v)
{
	const char *units[] = { "B", "KiB", "MiB", "GiB", "TiB", "PiB" };
	int u = 0;

	while (v >= 1024 && u < 5) {
		v /= 1024;
		u++;
	}
	snprintf(out, n, u ? "%.1f %s" : "%.0f %s", v, units[u]);
}

/* The derived parameters: texts that depend on the language or on a
 * number's formatting. */
static char *derive(const json_t *params, const char *name, int zh)
{
	char tmp[128];
	const json_t *v;

	if (strcmp(name, "exit_text") == 0) {
		v = json_object_get(params, "exit_code");
		if (!json_is_integer(v))
			return strdup("");
		snprintf(tmp, sizeof(tmp), zh ? "退出码：%lld。" : " Exit code: %lld.",
		         (long long)json_integer_value(v));
		return strdup(tmp);
	}
	if (strcmp(name, "state_text") == 0) {
		v = json_object_get(params, "state");
		if (json_is_string(v) && strcmp(json_string_value(v), "lost") == 0)
			return strdup(zh ? "丢失" : "lost");
		return strdup(zh ? "失败" : "failed");
	}
	if (strcmp(name, "why_text") == 0) {
		v = json_object_get(params, "why");
		if (json_is_string(v) && strcmp(json_string_value(v), "idle") == 0)
			return strdup(zh ? "空闲时间过长" : "it was idle for too long");
		return strdup(zh ? "已达到最长运行时间" : "it reached its maximum lifetime");
	}
	if (strcmp(name, "bytes_text") == 0 || strcmp(name, "limit_text") == 0) {
		v = json_object_get(params, name[0] == 'b' ? "bytes" : "limit_bytes");
		bytes_text(tmp, sizeof(tmp), json_number_value(v));
		return strdup(tmp);
	}
	if (strcmp(name, "stop_at") == 0) {
		/* "2026-12-02T18:30:00Z" reads as "2026-12-02 18:30 UTC" */
		char *v = param(params, name);
		if (v && strlen(v) == 20 && v[10] == 'T' && v[19] == 'Z') {
			snprintf(tmp, sizeof(tmp), "%.10s %.5s UTC", v, v + 11);
			free(v);
			return strdup(tmp);
		}
		return v;
	}
	if (strcmp(name, "first_line") == 0) {
		char *b = param(params, "body"), *nl;
		if (b && (nl = strpbrk(b, "\r\n")))
			*nl = '\0';
		if (b && strlen(b) > 80) {
			size_t cut = 77;
			while (cut > 0 && ((unsigned char)b[cut] & 0xc0) == 0x80)
				cut--; /* not inside a UTF-8 sequence */
			memcpy(b + cut, "...", 4);
		}
		return b;
	}
	return param(params, name);
}

/* tmpl with each {name} replaced; oneline: control characters become
 * spaces (a subject), else only '\n' stays. */
static char *fill(const char *tmpl, const json_t *params, int zh, int oneline)
{
	struct buf b = { 0 };
	const char *p = tmpl, *q;

	while (*p) {
		if (*p == '{' && (q = strchr(p, '}')) && q - p < 32) {
			char name[32], *v;
			memcpy(name, p + 1, (size_t)(q - p - 1));
			name[q - p - 1] = '\0';
			v = derive(params, name, zh);
			if (!v) {
				free(b.p);
				return NULL;
			}
			for (char *c = v; *c; c++)
				if ((unsigned char)*c < 0x20 || *c == 0x7f)
					if (oneline || *c != '\n')
						*c = ' ';
			puts_(&b, v);
			free(v);
			p = q + 1;
			continue;
		}
		put(&b, p, 1);
		p++;
	}
	return done(&b);
}

int mailer_text(const char *kind, const json_t *params, const char *lang, const char *link,
                const char *base_url, char **subject, char **body)
{
	int zh = lang && strcmp(lang, "zh-CN") == 0;
	const struct text *t = NULL;
	struct buf b = { 0 };
	char *s = NULL, *text = NULL;

	*subject = *body = NULL;
	for (size_t i = 0; i < sizeof(texts) / sizeof(texts[0]); i++)
		if (strcmp(texts[i].kind, kind) == 0)
			t = &texts[i];
	if (!t)
		return -1;
	s = fill(t->subject[zh], params, zh, 1);
	text = fill(t->body[zh], params, zh, 0);
	if (!s || !text)
		goto fail;
	puts_(&b, text);
	puts_(&b, "\n\n");
	if (base_url && *base_url && link && *link) {
		size_t n = strlen(base_url);
		put(&b, base_url, base_url[n - 1] == '/' ? n - 1 : n);
		puts_(&b, "/#");
		puts_(&b, link);
		puts_(&b, "\n\n");
	}
	puts_(&b, "-- \n");
	puts_(&b, footer[zh]);
	puts_(&b, "\n");
	*body = done(&b);
	if (!*body)
		goto fail;
	*subject = s;
	free(text);
	return 0;
fail:
	free(s);
	free(text);
	return -1;
}

/* ---- the message ---- */

static const char b64[] = "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/";

static void put_b64(struct buf *b, const unsigned char *p, size_t n)
{
	char q[4];

	for (size_t i = 0; i < n; i += 3) {
		unsigned v = (unsigned)p[i] << 16;
		if (i + 1 < n)
			v |= (unsigned)p[i + 1] << 8;
		if (i + 2 < n)
			v |= p[i + 2];
		q[0] = b64[(v >> 18) & 63];
		q[1] = b64[(v >> 12) & 63];
		q[2] = i + 1 < n ? b64[(v >> 6) & 63] : '=';
		q[3] = i + 2 < n ? b64[v & 63] : '=';
		put(b, q, 4);
	}
}

int mailer_address(const char *from, char *out, size_t outlen)
{
	const char *lt = strrchr(from, '<'), *a = from, *e;
	size_t n;

	if (lt) {
		a = lt + 1;
		e = strchr(a, '>');
		if (!e)
			return -1;
	} else
		e = a + strlen(a);
	n = (size_t)(e - a);
	if (n == 0 || n >= outlen || !memchr(a, '@', n))
		return -1;
	for (size_t i = 0; i < n; i++) {
		unsigned char c = (unsigned char)a[i];
		if (c <= 0x20 || c == 0x7f || strchr("<>,\"()[];:\\", c))
			return -1;
	}
	memcpy(out, a, n);
	out[n] = '\0';
	return 0;
}

static int ascii_printable(const char *s)
{
	for (; *s; s++)
		if ((unsigned char)*s < 0x20 || (unsigned char)*s >= 0x7f)
			return 0;
	return 1;
}

/* A header value as RFC 2047 encoded words (UTF-8, base64), each at most
 * 75 characters and none splitting a character. */
static void put_encoded(struct buf *b, const char *s)
{
	size_t n = strlen(s), i = 0;

	while (i < n) {
		size_t take = n - i > 36 ? 36 : n - i; /* 36 bytes -> 48 base64: 60 a word */
		while (i + take < n && take > 0 && ((unsigned char)s[i + take] & 0xc0) == 0x80)
			take--;
		if (take == 0)
			take = n - i > 36 ? 36 : n - i;
		if (i)
			puts_(b, "\r\n ");
		puts_(b, "=?UTF-8?B?");
		put_b64(b, (const unsigned char *)s + i, take);
		puts_(b, "?=");
		i += take;
	}
}

char *mailer_message(const char *from, const char *to, const char *subject, const char *body,
                     const char *message_id, long long now)
{
	struct buf b = { 0 }, text = { 0 };
	char addr[256], date[64], *subj = NULL, *msg;
	time_t t = (time_t)now;
	struct tm tm;
	static const char *days[] = { "Sun", "Mon", "Tue", "Wed", "Thu", "Fri", "Sat" };
	static const char *months[] = { "Jan", "Feb", "Mar", "Apr", "May", "Jun",
		                        "Jul", "Aug", "Sep", "Oct", "Nov", "Dec" };

	/* from is configuration, to was checked when saved: still, neither
	 * may carry a line break into the headers */
	if (strpbrk(from, "\r\n") || mailer_address(from, addr, sizeof(addr)) < 0 ||
	    mailer_address(to, addr, sizeof(addr)) < 0 || strcmp(addr, to) != 0 ||
	    strpbrk(message_id, "\r\n<>"))
		return NULL;
	subj = strdup(subject);
	if (!subj)
		return NULL;
	for (char *c = subj; *c; c++)
		if ((unsigned char)*c < 0x20 || *c == 0x7f)
			*c = ' ';
	gmtime_r(&t, &tm);
	snprintf(date, sizeof(date), "%s, %02d %s %04d %02d:%02d:%02d +0000", days[tm.tm_wday],
	         tm.tm_mday, months[tm.tm_mon], tm.tm_year + 1900, tm.tm_hour, tm.tm_min,
	         tm.tm_sec);
	puts_(&b, "Date: ");
	puts_(&b, date);
	puts_(&b, "\r\nFrom: ");
	if (ascii_printable(from))
		puts_(&b, from);
	else {
		/* a display name in UTF-8: encode it, keep <addr> */
		const char *lt = strrchr(from, '<');
		char *name = lt ? strndup(from, (size_t)(lt - from)) : NULL;
		if (name) {
			size_t n = strlen(name);
			while (n && name[n - 1] == ' ')
				name[--n] = '\0';
			put_encoded(&b, name);
			puts_(&b, " ");
			free(name);
		}
		mailer_address(from, addr, sizeof(addr));
		puts_(&b, "<");
		puts_(&b, addr);
		puts_(&b, ">");
	}
	puts_(&b, "\r\nTo: <");
	puts_(&b, to);
	puts_(&b, ">\r\nSubject: ");
	if (ascii_printable(subj) && strlen(subj) <= 900 && !strstr(subj, "=?"))
		puts_(&b, subj);
	else
		put_encoded(&b, subj);
	puts_(&b, "\r\nMessage-ID: <");
	puts_(&b, message_id);
	puts_(&b, ">\r\nMIME-Version: 1.0\r\n"
	          "Content-Type: text/plain; charset=UTF-8\r\n"
	          "Content-Transfer-Encoding: base64\r\n"
	          "Auto-Submitted: auto-generated\r\n\r\n");
	/* the body with CRLF line ends, then base64 in lines of 76 */
	for (const char *p = body; *p; p++) {
		if (*p == '\r')
			continue;
		if (*p == '\n')
			puts_(&text, "\r\n");
		else
			put(&text, p, 1);
	}
	for (size_t i = 0; i < text.len; i += 57) {
		put_b64(&b, (const unsigned char *)text.p + i,
		        text.len - i > 57 ? 57 : text.len - i);
		puts_(&b, "\r\n");
	}
	free(text.p);
	free(subj);
	if (text.bad) {
		free(b.p);
		return NULL;
	}
	msg = done(&b);
	return msg;
}

/* ---- a round ---- */

struct mail {
	long long id;
	char to[256];
	char *msg;
	size_t off;
	int ok;
	int tried; /* 0: skipped, the server being unreachable (no try counted) */
	char err[200];
};

struct round {
	struct mail m[BATCH];
	int n;
	/* copies of the settings, so the thread reads nothing shared */
	char *url, *from, *user, *password, *tls;
};

static int busy;
static struct cron_section *section;

static size_t on_read(char *p, size_t size, size_t nmemb, void *arg)
{
	struct mail *m = arg;
	size_t left = strlen(m->msg) - m->off, n = size * nmemb;

	if (n > left)
		n = left;
	memcpy(p, m->msg + m->off, n);
	m->off += n;
	return n;
}

/* Worker thread: one SMTP session per mail (a failure stays its own). */
static void send_work(void *arg)
{
	struct round *r = arg;
	char from[256];
	int down = 0; /* the server did not answer: the rest wait for a later round */

	for (int i = 0; i < r->n; i++) {
		struct mail *m = &r->m[i];
		CURL *c = curl_easy_init();
		struct curl_slist *rcpt = NULL;
		char env_from[260], env_to[260];
		CURLcode rc;

		m->tried = 1;
		if (!*m->msg) /* could not be written: its error is set */
			continue;
		if (down) {
			m->tried = 0;
			snprintf(m->err, sizeof(m->err), "%s",
			         "not tried: the SMTP server did not answer");
			continue;
		}
		if (!c || mailer_address(r->from, from, sizeof(from)) < 0) {
			snprintf(m->err, sizeof(m->err), "%s",
			         c ? "smtp_from holds no usable address" : "no memory");
			curl_easy_cleanup(c);
			continue;
		}
		snprintf(env_from, sizeof(env_from), "<%s>", from);
		snprintf(env_to, sizeof(env_to), "<%s>", m->to);
		rcpt = curl_slist_append(NULL, env_to);
		curl_easy_setopt(c, CURLOPT_URL, r->url);
		curl_easy_setopt(c, CURLOPT_MAIL_FROM, env_from);
		curl_easy_setopt(c, CURLOPT_MAIL_RCPT, rcpt);
		curl_easy_setopt(c, CURLOPT_READFUNCTION, on_read);
		curl_easy_setopt(c, CURLOPT_READDATA, m);
		curl_easy_setopt(c, CURLOPT_UPLOAD, 1L);
		curl_easy_setopt(c, CURLOPT_NOSIGNAL, 1L);
		curl_easy_setopt(c, CURLOPT_CONNECTTIMEOUT, 10L);
		curl_easy_setopt(c, CURLOPT_TIMEOUT, 30L);
		curl_easy_setopt(c, CURLOPT_USE_SSL,
		                 strcmp(r->tls, "required") == 0 ? CURLUSESSL_ALL
		                 : strcmp(r->tls, "none") == 0   ? CURLUSESSL_NONE
		                                                 : CURLUSESSL_TRY);
		if (*r->user) {
			curl_easy_setopt(c, CURLOPT_USERNAME, r->user);
			curl_easy_setopt(c, CURLOPT_PASSWORD, r->password);
		}
		rc = curl_easy_perform(c);
		if (rc == CURLE_OK)
			m->ok = 1;
		else
			snprintf(m->err, sizeof(m->err), "%s", curl_easy_strerror(rc));
		/* a worker thread is shared: do not spend it waiting on a dead
		 * server mail after mail */
		if (rc == CURLE_COULDNT_CONNECT || rc == CURLE_COULDNT_RESOLVE_HOST ||
		    rc == CURLE_OPERATION_TIMEDOUT)
			down = 1;
		curl_slist_free_all(rcpt);
		curl_easy_cleanup(c);
	}
}

static void round_free(struct round *r)
{
	for (int i = 0; i < r->n; i++)
		free(r->m[i].msg);
	free(r->url);
	free(r->from);
	free(r->user);
	free(r->password);
	free(r->tls);
	free(r);
}

static void recorded(PGresult *res, enum rc rc, void *arg)
{
	(void)res;
	(void)arg;
	busy = 0;
	if (rc != RC_OK)
		log_msg(LOG_WARN, "mailer", NULL, "cannot record the outcome of mails");
	else
		cron_soon(section, 10); /* more may be waiting */
}

/* Records each mail's outcome: sent, or another try after a doubling
 * backoff, or failed once its tries are spent. */
static void record(struct round *r)
{
	json_t *out = json_array();
	char *doc;
	struct db_args a = DB_ARGS_INIT;

	for (int i = 0; i < r->n; i++) {
		struct mail *m = &r->m[i];
		if (!m->ok)
			log_msg(LOG_WARN, "mailer", NULL,
			        "cannot mail notification %lld to '%s': %s", m->id, m->to, m->err);
		json_array_append_new(out,
		                      json_pack("{s:I, s:b, s:b, s:s}", "id", (json_int_t)m->id,
		                                "ok", m->ok, "tried", m->tried, "err", m->err));
	}
	doc = json_dumps(out, JSON_COMPACT);
	json_decref(out);
	db_arg_str(&a, doc ? doc : "[]");
	db_arg_ll(&a, cfg.mail_max_attempts);
	db_arg_ll(&a, cfg.mail_retry_s);
	db_query_args(
	        "UPDATE notifications n SET"
	        " mail_attempts = n.mail_attempts - CASE WHEN x.tried THEN 0 ELSE 1 END,"
	        " mail_state = CASE WHEN x.ok THEN 'sent'"
	        "  WHEN x.tried AND n.mail_attempts >= $2::int THEN 'failed' ELSE 'pending' END,"
	        " mailed_at = CASE WHEN x.ok THEN now() END, mail_error = x.err,"
	        " mail_next_at = CASE WHEN x.ok OR (x.tried AND n.mail_attempts >= $2::int) THEN "
	        "NULL"
	        "  WHEN NOT x.tried THEN now() + make_interval(secs => $3::int)"
	        "  ELSE now() + make_interval(secs => $3::int * 2 ^ (n.mail_attempts - 1)) END"
	        " FROM jsonb_to_recordset($1::jsonb)"
	        "  AS x(id bigint, ok boolean, tried boolean, err text)"
	        " WHERE n.id = x.id AND n.mail_state = 'pending'",
	        &a, recorded, NULL);
	free(doc);
}

static void send_done(void *arg)
{
	struct round *r = arg;

	record(r);
	round_free(r);
}

static char *dup_or_empty(const char *s)
{
	return strdup(s ? s : "");
}

static void claimed(PGresult *res, enum rc rc, void *arg)
{
	struct round *r;
	char mid[128];

	(void)arg;
	if (rc != RC_OK || PQntuples(res) == 0) {
		busy = 0;
		return;
	}
	r = calloc(1, sizeof(*r));
	if (!r) {
		busy = 0;
		return;
	}
	r->url = dup_or_empty(cfg.smtp_url);
	r->from = dup_or_empty(cfg.smtp_from);
	r->user = dup_or_empty(cfg.smtp_user);
	r->password = dup_or_empty(cfg.smtp_password);
	r->tls = dup_or_empty(cfg.smtp_tls);
	for (int i = 0; i < PQntuples(res) && r->n < BATCH; i++) {
		struct mail *m = &r->m[r->n];
		json_t *params = json_loads(db_val(res, i, 2), 0, NULL);
		char *subject = NULL, *body = NULL;

		m->id = strtoll(db_val(res, i, 0), NULL, 10);
		snprintf(m->to, sizeof(m->to), "%s", db_val(res, i, 4));
		snprintf(mid, sizeof(mid), "notification-%lld.%lld@gpucloud", m->id,
		         (long long)time(NULL));
		if (params && mailer_text(db_val(res, i, 1), params, db_val(res, i, 5),
		                          db_val(res, i, 3), cfg.public_url, &subject, &body) == 0)
			m->msg = mailer_message(cfg.smtp_from, m->to, subject, body, mid,
			                        (long long)time(NULL));
		if (!m->msg)
			snprintf(m->err, sizeof(m->err), "%s",
			         "cannot write the mail (check the address and smtp_from)");
		json_decref(params);
		free(subject);
		free(body);
		r->n++;
	}
	/* the ones that could not be written fail without a try */
	for (int i = 0; i < r->n; i++)
		if (!r->m[i].msg) {
			r->m[i].msg = strdup("");
			r->m[i].ok = 0;
		}
	if (worker_submit(send_work, send_done, r) < 0) {
		/* the pool is full: the claim expires and a later round retries */
		round_free(r);
		busy = 0;
	}
}

static void dropped(PGresult *res, enum rc rc, void *arg)
{
	(void)res;
	(void)rc;
	(void)arg;
	busy = 0;
}

/* Hourly on the leader: notifications past notification_keep_days go. */
static void prune(void)
{
	static time_t last;
	time_t now = time(NULL);
	struct db_args a = DB_ARGS_INIT;

	if (now - last < 3600)
		return;
	last = now;
	db_arg_ll(&a, cfg.notification_keep_days);
	db_query_args("DELETE FROM notifications"
	              " WHERE created_at < now() - make_interval(days => $1::int)",
	              &a, db_ignore, NULL);
}

static void on_cron(struct cron_section *s, void *arg)
{
	(void)s;
	(void)arg;
	if (busy || !leader_is())
		return;
	prune();
	busy = 1;
	if (!cfg.smtp_url || !*cfg.smtp_url) {
		/* nowhere to send: say so rather than keep them waiting */
		db_query(
		        "UPDATE notifications SET mail_state = 'none', mail_next_at = NULL,"
		        " mail_error = 'no SMTP server is configured' WHERE mail_state = 'pending'",
		        0, NULL, dropped, NULL);
		return;
	}
	/* the claim: a try counted now, and its next one a while ahead in
	 * case this replica dies before it records the outcome */
	db_query("UPDATE notifications n SET mail_attempts = n.mail_attempts + 1,"
	         " mail_next_at = now() + interval '5 minutes'"
	         " FROM (SELECT id FROM notifications WHERE mail_state = 'pending'"
	         "  AND mail_next_at <= now() ORDER BY mail_next_at, id LIMIT 10"
	         "  FOR UPDATE SKIP LOCKED) x, users u"
	         " LEFT JOIN notification_prefs p ON p.user_id = u.id"
	         " WHERE n.id = x.id AND u.id = n.user_id"
	         " RETURNING n.id, n.kind, n.params::text, n.link, u.email,"
	         " COALESCE(p.language, 'en')",
	         0, NULL, claimed, NULL);
}

int mailer_init(void)
{
	if (cfg.smtp_tls && strcmp(cfg.smtp_tls, "try") && strcmp(cfg.smtp_tls, "required") &&
	    strcmp(cfg.smtp_tls, "none"))
		log_msg(LOG_WARN, "mailer", NULL,
		        "smtp_tls '%s' is not try, required or none: STARTTLS is tried when "
		        "offered",
		        cfg.smtp_tls);
	section = cron_every("mailer", cfg.mail_poll_ms, cfg.mail_poll_ms, on_cron, NULL);
	return section ? 0 : -1;
}
