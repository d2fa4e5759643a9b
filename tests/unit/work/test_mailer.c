/* test_mailer.c — the texts and the message format of notification mails:
 * both languages, RFC 2047 subjects, base64 bodies, and no way for CR/LF in
 * user-controlled text (class names, notice bodies, addresses) to add a
 * header. */
#include <stdlib.h>
#include <string.h>

#include "harness.h"
#include "work/mailer.h"

/* The header block of msg (up to the empty line), NUL-terminated; caller
 * frees. */
static char *head_of(const char *msg)
{
	const char *end = strstr(msg, "\r\n\r\n");
	return end ? strndup(msg, (size_t)(end - msg) + 2) : NULL;
}

/* Lines of head that start with name (a header), after unfolding. */
static int count_header(const char *head, const char *name)
{
	int n = 0;
	size_t len = strlen(name);
	for (const char *p = head; p; p = strstr(p, "\r\n")) {
		if (p != head)
			p += 2;
		if (strncasecmp(p, name, len) == 0)
			n++;
		if (!*p)
			break;
	}
	return n;
}

TEST(texts_en_and_zh)
{
	json_t *p = json_pack("{s:s, s:I, s:s, s:I}", "name", "train", "job_id", (json_int_t)7,
	                      "state", "failed", "exit_code", (json_int_t)3);
	char *s, *b;

	CHECK(mailer_text("job.failed", p, "en", "/job?id=7", "https://gpu.example.edu/", &s, &b) ==
	      0);
	CHECK_STR(s, "Job train failed");
	CHECK(strstr(b, "Your job train (#7) ended: failed. Exit code: 3.") != NULL);
	CHECK(strstr(b, "https://gpu.example.edu/#/job?id=7") != NULL);
	free(s);
	free(b);
	CHECK(mailer_text("job.failed", p, "zh-CN", "/job?id=7", "", &s, &b) == 0);
	CHECK_STR(s, "作业 train 失败");
	CHECK(strstr(b, "已结束：失败。退出码：3。") != NULL);
	CHECK(strstr(b, "http") == NULL);
	free(s);
	free(b);
	CHECK(mailer_text("no.such", p, "en", "", "", &s, &b) == -1);
	json_decref(p);
}

TEST(idle_warning_time)
{
	json_t *p = json_pack("{s:s, s:I, s:s}", "name", "nb", "idle_seconds", (json_int_t)1800,
	                      "stop_at", "2026-12-02T18:30:00Z");
	char *s, *b;

	CHECK(mailer_text("instance.idle_warning", p, "en", "", "", &s, &b) == 0);
	CHECK_STR(s, "Instance nb will be stopped");
	CHECK(strstr(b, "idle for 1800 s. It will be stopped at 2026-12-02 18:30 UTC unless") !=
	      NULL);
	free(s);
	free(b);
	json_decref(p);
}

TEST(subject_of_a_notice_is_one_line)
{
	json_t *p = json_pack("{s:s, s:s, s:s}", "class", "Evil\r\nBcc: x@evil.test", "author",
	                      "tina", "body", "Lab moved\r\nBcc: victim@evil.test\r\n\r\nfake");
	char *s, *b;

	CHECK(mailer_text("class.notice", p, "en", "", "", &s, &b) == 0);
	CHECK(strpbrk(s, "\r\n") == NULL);
	CHECK_STR(s, "Notice in Evil  Bcc: x@evil.test: Lab moved");
	CHECK(strchr(b, '\r') == NULL); /* the body keeps only \n */
	CHECK(strstr(b, "Bcc: victim@evil.test") != NULL);
	free(s);
	free(b);
	json_decref(p);
}

TEST(message_headers)
{
	char *m = mailer_message("gpucloud <noreply@example.edu>", "alice@example.org",
	                         "作业 train 失败", "line one\nline two\n", "n-1@gpucloud", 0);
	char *head;

	CHECK(m != NULL);
	head = head_of(m);
	CHECK(head != NULL);
	CHECK(strstr(head, "Date: Thu, 01 Jan 1970 00:00:00 +0000\r\n") != NULL);
	CHECK(strstr(head, "From: gpucloud <noreply@example.edu>\r\n") != NULL);
	CHECK(strstr(head, "To: <alice@example.org>\r\n") != NULL);
	CHECK(strstr(head, "Subject: =?UTF-8?B?5L2c5LiaIHRyYWluIOWksei0pQ==?=\r\n") != NULL);
	CHECK(strstr(head, "Content-Transfer-Encoding: base64\r\n") != NULL);
	CHECK(count_header(head, "Subject:") == 1);
	free(head);
	free(m);
}

TEST(message_refuses_injection)
{
	char *m, *head;
	char longer[400];

	/* CR/LF in a subject becomes spaces: still one Subject, no Bcc */
	m = mailer_message("a@b.c", "alice@example.org", "hi\r\nBcc: victim@evil.test", "x", "i",
	                   0);
	CHECK(m != NULL);
	head = head_of(m);
	CHECK(count_header(head, "Bcc:") == 0);
	CHECK(count_header(head, "Subject:") == 1);
	free(head);
	free(m);
	/* addresses that would break a header or the envelope */
	CHECK(mailer_message("a@b.c", "alice@example.org\r\nBcc: v@evil.test", "s", "b", "i", 0) ==
	      NULL);
	CHECK(mailer_message("a@b.c", "alice@example.org, v@evil.test", "s", "b", "i", 0) == NULL);
	CHECK(mailer_message("x <a@b.c>\r\nBcc: v@evil.test", "alice@example.org", "s", "b", "i",
	                     0) == NULL);
	CHECK(mailer_message("a@b.c", "alice@example.org", "s", "b", "i>\r\nBcc: v@e", 0) == NULL);
	/* a long UTF-8 subject folds into encoded words of at most 75 */
	memset(longer, 0, sizeof(longer));
	for (int i = 0; i < 40; i++)
		memcpy(longer + i * 6, "通知", 6);
	m = mailer_message("a@b.c", "alice@example.org", longer, "b", "i", 0);
	CHECK(m != NULL);
	head = head_of(m);
	for (char *l = head; l && *l;) {
		char *e = strstr(l, "\r\n");
		CHECK(e && e - l <= 78);
		l = e ? e + 2 : NULL;
	}
	free(head);
	free(m);
}

TEST(addresses)
{
	char out[64];

	CHECK(mailer_address("gpucloud <noreply@x.edu>", out, sizeof(out)) == 0);
	CHECK_STR(out, "noreply@x.edu");
	CHECK(mailer_address("a@b", out, sizeof(out)) == 0);
	CHECK(mailer_address("no at sign", out, sizeof(out)) == -1);
	CHECK(mailer_address("<a b@c>", out, sizeof(out)) == -1);
	CHECK(mailer_address("x <a@b", out, sizeof(out)) == -1);
}

int main(void)
{
	RUN(texts_en_and_zh);
	RUN(idle_warning_time);
	RUN(subject_of_a_notice_is_one_line);
	RUN(message_headers);
	RUN(message_refuses_injection);
	RUN(addresses);
	return harness_done("test_mailer");
}
