/* gpucloud.c — the `gpucloud` command-line client: argv, the commands
 * (login, logout, whoami, submit, jobs, logs, cancel, instances, cp,
 * usage) and their text and --json output.  It talks to gpucloudd only
 * over the REST API (client.c); it links nothing of the server but its own
 * folder.  Job files are jobfile.c's, file copies cp.c's.
 */
#include <errno.h>
#include <getopt.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/random.h>
#include <termios.h>
#include <time.h>
#include <unistd.h>

#include "cli/client.h"
#include "cli/cp.h"
#include "cli/gpucloud.h"
#include "cli/jobfile.h"

#define VERSION "1.0"

struct command {
	const char *name;
	int (*run)(struct client *c, int argc, char **argv);
	const char *summary;
	const char *usage; /* the command's --help */
};

static const struct command *find_command(const char *name);

int usage_error(const char *cmd, const char *fmt, ...)
{
	va_list ap;

	fprintf(stderr, "gpucloud %s: ", cmd);
	va_start(ap, fmt);
	vfprintf(stderr, fmt, ap);
	va_end(ap);
	fprintf(stderr, "\nTry 'gpucloud %s --help'.\n", cmd);
	return EXIT_USAGE;
}

int gpucloud_common_opt(struct client *c, int opt, const char *cmd)
{
	const struct command *k;

	switch (opt) {
	case 'J': c->json = 1; return 1;
	case 'S': c->server_flag = optarg; return 1;
	case 'h':
		k = find_command(cmd);
		fputs(k ? k->usage : "", stdout);
		return -1;
	default: return 0;
	}
}

/* A positive id from text; -1 when it is not one. */
static long long parse_id(const char *s)
{
	char *end;
	long long v;

	if (!s || !*s || *s == '-' || *s == '+')
		return -1;
	errno = 0;
	v = strtoll(s, &end, 10);
	return *end || errno || v < 1 ? -1 : v;
}

static const char *str(json_t *o, const char *k)
{
	const char *s = json_string_value(json_object_get(o, k));
	return s ? s : "-";
}

/* ---- login, logout, whoami -------------------------------------------- */

static int read_line(FILE *f, char *buf, size_t n)
{
	size_t k;

	if (!fgets(buf, (int)n, f))
		return -1;
	k = strlen(buf);
	while (k > 0 && (buf[k - 1] == '\n' || buf[k - 1] == '\r'))
		buf[--k] = '\0';
	return 0;
}

/* Asks on the terminal; echo off for a password. */
static int ask(const char *prompt, char *buf, size_t n, int secret)
{
	FILE *tty = fopen("/dev/tty", "r+");
	struct termios old, quiet;
	int rc, off = 0;

	if (!tty)
		return -1;
	fputs(prompt, tty);
	fflush(tty);
	if (secret && tcgetattr(fileno(tty), &old) == 0) {
		quiet = old;
		quiet.c_lflag &= ~(tcflag_t)ECHO;
		off = tcsetattr(fileno(tty), TCSAFLUSH, &quiet) == 0;
	}
	rc = read_line(tty, buf, n);
	if (off) {
		tcsetattr(fileno(tty), TCSAFLUSH, &old);
		fputc('\n', tty);
	}
	fclose(tty);
	return rc;
}

static long long token_id_by_prefix(struct client *c)
{
	int code;
	json_t *l = client_call(c, "GET", "/api/v1/tokens", NULL, "list tokens", &code), *t;
	size_t i;
	long long id = 0;

	json_array_foreach(json_object_get(l, "items"), i, t)
	{
		const char *p = json_string_value(json_object_get(t, "prefix"));
		if (p && strlen(p) >= 8 && strncmp(c->token, p, strlen(p)) == 0)
			id = json_integer_value(json_object_get(t, "id"));
	}
	json_decref(l);
	return id;
}

static int login_with_token(struct client *c, const char *tok)
{
	char buf[160];
	json_t *me, *out;
	int code;

	if (strcmp(tok, "-") == 0) {
		if (read_line(stdin, buf, sizeof(buf)) < 0)
			return usage_error("login", "no token on standard input");
		tok = buf;
	}
	if (strncmp(tok, "gct_", 4) != 0 || strlen(tok) >= sizeof(c->token))
		return usage_error("login", "that is not a gpucloud API token (they start gct_)");
	snprintf(c->token, sizeof(c->token), "%s", tok);
	explicit_bzero(buf, sizeof(buf));
	me = client_call(c, "GET", "/api/v1/me", NULL, "check the token", &code);
	if (!me)
		return code;
	snprintf(c->username, sizeof(c->username), "%s",
	         str(json_object_get(me, "user"), "username"));
	c->token_id = token_id_by_prefix(c);
	if (client_save(c) < 0) {
		json_decref(me);
		return EXIT_LOCAL;
	}
	out = json_pack("{s:s, s:s, s:I, s:O?}", "server", c->server, "username", c->username,
	                "token_id", (json_int_t)c->token_id, "scopes",
	                json_object_get(me, "scopes"));
	if (c->json)
		client_print_json(out);
	else
		printf("logged in to %s as %s\n", c->server, c->username);
	json_decref(out);
	json_decref(me);
	return EXIT_OK;
}

static int cmd_login(struct client *c, int argc, char **argv)
{
	static const struct option opts[] = {
		{ "username", required_argument, NULL, 'u' },
		{ "password-stdin", no_argument, NULL, 'p' },
		{ "token", required_argument, NULL, 't' },
		{ "name", required_argument, NULL, 'n' },
		{ "days", required_argument, NULL, 'd' },
		{ "read-only", no_argument, NULL, 'r' },
		COMMON_OPTS,
		{ NULL, 0, NULL, 0 },
	};
	const char *user = NULL, *tok = NULL, *name = NULL, *env;
	char ubuf[128], pw[1025], host[64], tname[128];
	long long days = 90;
	int pw_stdin = 0, read_only = 0, opt, code = EXIT_OK;
	struct client_req r = { .method = "POST", .session = 1, .upload_fd = -1, .upload_len = -1 };
	struct client_reply rep = { 0 };
	json_t *body, *tokj = NULL, *out;

	while ((opt = getopt_long(argc, argv, "u:", opts, NULL)) != -1) {
		int k = gpucloud_common_opt(c, opt, "login");
		if (k < 0)
			return EXIT_OK;
		if (k)
			continue;
		switch (opt) {
		case 'u': user = optarg; break;
		case 'p': pw_stdin = 1; break;
		case 't': tok = optarg; break;
		case 'n': name = optarg; break;
		case 'r': read_only = 1; break;
		case 'd':
			days = parse_id(optarg);
			if (days < 1 || days > 365)
				return usage_error("login", "--days must be 1 to 365");
			break;
		default: return usage_error("login", "unknown option");
		}
	}
	if (optind < argc && !c->server_flag)
		c->server_flag = argv[optind++]; /* gpucloud login URL */
	if (optind < argc)
		return usage_error("login", "unexpected argument '%s'", argv[optind]);
	if (client_load(c, c->server_flag) == -1)
		return EXIT_USAGE;
	if (!c->server[0])
		return usage_error("login", "give the server's URL (gpucloud login URL)");
	c->token[0] = '\0';
	c->token_id = 0;
	if (tok)
		return login_with_token(c, tok);
	if (!user && (env = getenv("GPUCLOUD_USERNAME")) != NULL && *env)
		user = env;
	if (!user) {
		if (ask("username: ", ubuf, sizeof(ubuf), 0) < 0 || !*ubuf)
			return usage_error("login", "give --username (no terminal to ask on)");
		user = ubuf;
	}
	if (pw_stdin) {
		if (read_line(stdin, pw, sizeof(pw)) < 0)
			return usage_error("login", "no password on standard input");
	} else if (ask("password: ", pw, sizeof(pw), 1) < 0) {
		return usage_error("login", "give --password-stdin (no terminal to ask on)");
	}
	/* a browser-like session, only long enough to mint the token */
	body = json_pack("{s:s, s:s}", "username", user, "password", pw);
	explicit_bzero(pw, sizeof(pw));
	if (!body)
		return usage_error("login", "the username and password must be UTF-8 text");
	r.path = "/api/v1/auth/login";
	r.body = body;
	if (client_send(c, &r, &rep) < 0 || rep.status != 200) {
		code = client_fail(c, rep.status ? &rep : NULL, "log in");
		json_object_clear(body);
		json_decref(body);
		client_reply_release(&rep);
		return code;
	}
	json_object_clear(body);
	json_decref(body);
	snprintf(c->csrf, sizeof(c->csrf), "%s", str(rep.json, "csrf_token"));
	snprintf(c->username, sizeof(c->username), "%s",
	         str(json_object_get(rep.json, "user"), "username"));
	client_reply_release(&rep);

	if (gethostname(host, sizeof(host)) < 0)
		snprintf(host, sizeof(host), "unknown");
	host[sizeof(host) - 1] = '\0';
	for (int attempt = 0; attempt < 3; attempt++) {
		time_t now = time(NULL);
		struct tm tm;
		char when[32];
		gmtime_r(&now, &tm);
		strftime(when, sizeof(when), "%Y-%m-%dT%H:%M:%SZ", &tm);
		/* unique per login: the server refuses a name twice */
		if (attempt == 0)
			snprintf(tname, sizeof(tname), "gpucloud-cli %.40s %.24s", host, when);
		else
			snprintf(tname, sizeof(tname), "gpucloud-cli %.40s %.24s #%d-%ld", host,
			         when, attempt, (long)getpid());
		body = json_pack("{s:s, s:[s, s*], s:I}", "name", name ? name : tname, "scopes",
		                 "read", read_only ? NULL : "write", "expires_in_days",
		                 (json_int_t)days);
		r.path = "/api/v1/tokens";
		r.body = body;
		if (client_send(c, &r, &rep) < 0) {
			code = client_fail(c, NULL, "create an API token");
			json_decref(body);
			client_reply_release(&rep);
			goto logout;
		}
		json_decref(body);
		if (rep.status == 409 && !name) {
			client_reply_release(&rep);
			continue;
		}
		break;
	}
	if (rep.status != 201) {
		code = client_fail(c, &rep, "create an API token");
		client_reply_release(&rep);
		goto logout;
	}
	tokj = json_incref(rep.json);
	client_reply_release(&rep);
	snprintf(c->token, sizeof(c->token), "%s", str(tokj, "token"));
	c->token_id = json_integer_value(json_object_get(tokj, "id"));
	json_object_del(tokj, "token");
	if (client_save(c) < 0) {
		code = EXIT_LOCAL;
		goto logout;
	}
	out = json_pack("{s:s, s:s, s:O}", "server", c->server, "username", c->username, "token",
	                tokj);
	if (c->json) {
		client_print_json(out);
	} else {
		char path[4096];
		client_config_path("credentials.json", path, sizeof(path));
		printf("logged in to %s as %s\n", c->server, c->username);
		printf("token '%s' (%s) expires %s; saved in %s\n", str(tokj, "name"),
		       read_only ? "read-only" : "read and write", str(tokj, "expires_at"), path);
	}
	json_decref(out);
logout:
	json_decref(tokj);
	r.path = "/api/v1/auth/logout";
	r.body = NULL;
	if (client_send(c, &r, &rep) == 0)
		client_reply_release(&rep);
	explicit_bzero(c->csrf, sizeof(c->csrf));
	return code;
}

static int cmd_logout(struct client *c, int argc, char **argv)
{
	static const struct option opts[] = { COMMON_OPTS, { NULL, 0, NULL, 0 } };
	char path[64];
	int opt, code = EXIT_OK, revoked = 0;
	json_t *out;

	while ((opt = getopt_long(argc, argv, "", opts, NULL)) != -1) {
		int k = gpucloud_common_opt(c, opt, "logout");
		if (k < 0)
			return EXIT_OK;
		if (!k)
			return usage_error("logout", "unknown option");
	}
	if (optind < argc)
		return usage_error("logout", "unexpected argument '%s'", argv[optind]);
	if (client_load(c, c->server_flag) == 0 && c->token[0] && c->token_id > 0 &&
	    !getenv("GPUCLOUD_TOKEN")) {
		struct client_req r = {
			.method = "DELETE", .path = path, .upload_fd = -1, .upload_len = -1
		};
		struct client_reply rep = { 0 };
		snprintf(path, sizeof(path), "/api/v1/tokens/%lld", c->token_id);
		if (client_send(c, &r, &rep) < 0)
			code = client_fail(c, NULL, "revoke the token");
		else if (rep.status == 204)
			revoked = 1;
		else if (rep.status == 403) /* a read-only token cannot revoke itself */
			fprintf(stderr,
			        "gpucloud: the token could not be revoked (%s); revoke it in "
			        "the web interface\n",
			        str(json_object_get(rep.json, "error"), "message"));
		/* an expired or revoked token is as good as revoked */
		else if (rep.status != 401 && rep.status != 404)
			code = client_fail(c, &rep, "revoke the token");
		client_reply_release(&rep);
		if (code != EXIT_OK)
			return code; /* the saved login stays: the token still works */
	}
	if (client_forget() < 0) {
		fprintf(stderr, "gpucloud: cannot remove the saved login: %s\n", strerror(errno));
		return EXIT_LOCAL;
	}
	out = json_pack("{s:b, s:b}", "logged_out", 1, "token_revoked", revoked);
	if (c->json)
		client_print_json(out);
	else
		printf("logged out%s\n", revoked ? "; the token is revoked" : "");
	json_decref(out);
	return code;
}

static int cmd_whoami(struct client *c, int argc, char **argv)
{
	static const struct option opts[] = { COMMON_OPTS, { NULL, 0, NULL, 0 } };
	int opt, code;
	json_t *me;

	while ((opt = getopt_long(argc, argv, "", opts, NULL)) != -1) {
		int k = gpucloud_common_opt(c, opt, "whoami");
		if (k < 0)
			return EXIT_OK;
		if (!k)
			return usage_error("whoami", "unknown option");
	}
	if ((code = client_connect(c)) != EXIT_OK)
		return code;
	me = client_call(c, "GET", "/api/v1/me", NULL, "who am I", &code);
	if (!me)
		return code;
	if (c->json)
		client_print_json(me);
	else
		printf("%s (%s) on %s\n", str(json_object_get(me, "user"), "username"),
		       str(json_object_get(me, "user"), "role"), c->server);
	json_decref(me);
	return EXIT_OK;
}

/* ---- submit ----------------------------------------------------------- */

static char *read_file(const char *path, size_t *len, size_t max)
{
	FILE *f = strcmp(path, "-") == 0 ? stdin : fopen(path, "rb");
	char *buf = NULL, *b;
	size_t n = 0, cap = 0;

	if (!f)
		return NULL;
	for (;;) {
		if (n == cap) {
			cap = cap ? cap * 2 : 65536;
			if (cap > max + 1) {
				errno = EFBIG;
				goto bad;
			}
			b = realloc(buf, cap);
			if (!b)
				goto bad;
			buf = b;
		}
		size_t k = fread(buf + n, 1, cap - n, f);
		n += k;
		if (k == 0)
			break;
	}
	if (ferror(f))
		goto bad;
	if (f != stdin)
		fclose(f);
	*len = n;
	return buf;
bad:
	if (f != stdin)
		fclose(f);
	free(buf);
	return NULL;
}

/* "K=V" into obj[K] (typed with type, else text); -1 without '='. */
static int key_value(json_t *obj, const char *kv, int typed)
{
	const char *eq = strchr(kv, '=');
	char key[256];
	json_t *v;

	if (!eq || eq == kv || (size_t)(eq - kv) >= sizeof(key))
		return -1;
	memcpy(key, kv, (size_t)(eq - kv));
	key[eq - kv] = '\0';
	v = typed ? jobfile_scalar(eq + 1) : json_string(eq + 1);
	if (!v || json_object_set_new(obj, key, v) < 0)
		return -1;
	return 0;
}

/* An image by name: a reference, its repository, or a display name. */
static int resolve_image(struct client *c, json_t *job)
{
	const char *want = json_string_value(json_object_get(job, "image"));
	json_t *l, *img, *hit = NULL;
	size_t i, hits = 0;
	int code;

	if (!want)
		return EXIT_OK;
	l = client_call(c, "GET", "/api/v1/images", NULL, "list images", &code);
	if (!l)
		return code;
	for (int pass = 0; pass < 3 && !hits; pass++)
		json_array_foreach(json_object_get(l, "items"), i, img)
		{
			const char *ref = str(img, "reference"), *dn = str(img, "display_name");
			const char *slash = strrchr(ref, '/');
			int ok = pass == 0   ? strcmp(ref, want) == 0
			         : pass == 1 ? strcasecmp(dn, want) == 0
			                     : (slash &&
			                        (strcmp(slash + 1, want) == 0 ||
			                         (strncmp(slash + 1, want, strlen(want)) == 0 &&
			                          slash[1 + strlen(want)] == ':')));
			if (ok) {
				hit = img;
				hits++;
			}
		}
	if (hits != 1) {
		fprintf(stderr, "gpucloud submit: %s image '%s'\n",
		        hits ? "more than one" : "no such", want);
		fprintf(stderr, "hint: give its id or full reference; the images are:\n");
		json_array_foreach(json_object_get(l, "items"), i, img)
		        fprintf(stderr, "  %5lld  %s  (%s)\n",
		                (long long)json_integer_value(json_object_get(img, "id")),
		                str(img, "reference"), str(img, "display_name"));
		json_decref(l);
		return hits ? EXIT_USAGE : EXIT_NOTFOUND;
	}
	json_object_set_new(job, "image_id",
	                    json_integer(json_integer_value(json_object_get(hit, "id"))));
	json_object_del(job, "image");
	json_decref(l);
	return EXIT_OK;
}

static int follow_logs(struct client *c, long long id, long tail);

/* POSTs a submit with an Idempotency-Key, again (up to 3 tries) when the
 * connection failed before a reply: the server makes one job however many
 * of the tries reached it.  The reply's JSON, or NULL with *code set. */
static json_t *submit_once(struct client *c, const char *path, json_t *body, const char *what,
                           int *code)
{
	unsigned char rnd[16];
	char key[64];
	struct client_req r = { .method = "POST",
		                .path = path,
		                .body = body,
		                .upload_fd = -1,
		                .upload_len = -1,
		                .idem_key = key };
	struct client_reply rep = { 0 };
	json_t *out = NULL;
	int n;

	if (getrandom(rnd, sizeof(rnd), 0) != (ssize_t)sizeof(rnd)) {
		fprintf(stderr, "gpucloud: no randomness for the Idempotency-Key\n");
		*code = EXIT_LOCAL;
		return NULL;
	}
	n = snprintf(key, sizeof(key), "gpucloud-cli-");
	for (size_t i = 0; i < sizeof(rnd); i++)
		n += snprintf(key + n, sizeof(key) - (size_t)n, "%02x", rnd[i]);
	for (int attempt = 0;; attempt++) {
		if (client_send(c, &r, &rep) == 0)
			break;
		client_reply_release(&rep);
		if (attempt == 2) {
			*code = client_fail(c, NULL, what);
			return NULL;
		}
		sleep(1 + attempt);
	}
	if (rep.status == 200 || rep.status == 201) {
		out = rep.json ? json_incref(rep.json) : json_object();
		*code = EXIT_OK;
	} else {
		*code = client_fail(c, &rep, what);
	}
	client_reply_release(&rep);
	return out;
}

static int cmd_submit(struct client *c, int argc, char **argv)
{
	static const struct option opts[] = {
		{ "file", required_argument, NULL, 'f' },
		{ "name", required_argument, NULL, 'n' },
		{ "image", required_argument, NULL, 'i' },
		{ "command", required_argument, NULL, 'c' },
		{ "pool", required_argument, NULL, 'p' },
		{ "gpus", required_argument, NULL, 'g' },
		{ "cpu", required_argument, NULL, 'C' },
		{ "memory", required_argument, NULL, 'm' },
		{ "shm", required_argument, NULL, 'M' },
		{ "env", required_argument, NULL, 'e' },
		{ "hp", required_argument, NULL, 'H' },
		{ "hyperparameter", required_argument, NULL, 'H' },
		{ "tag", required_argument, NULL, 'T' },
		{ "class", required_argument, NULL, 'k' },
		{ "priority", required_argument, NULL, 'P' },
		{ "max-runtime", required_argument, NULL, 'R' },
		{ "retry-limit", required_argument, NULL, 'r' },
		{ "template", required_argument, NULL, 't' },
		{ "members", required_argument, NULL, 'N' },
		{ "follow", no_argument, NULL, 'F' },
		{ "dry-run", no_argument, NULL, 'D' },
		COMMON_OPTS,
		{ NULL, 0, NULL, 0 },
	};
	json_t *flags = json_object(), *env = json_object(), *hp = json_object(),
	       *tags = json_array();
	json_t *doc = NULL, *req = NULL, *job, *res = NULL, *cmd = NULL;
	const char *file = NULL;
	struct jobfile_err err;
	int opt, code = EXIT_OK, sweep = 0, follow = 0, dry = 0;

	while ((opt = getopt_long(argc, argv, "+f:n:i:c:p:g:e:F", opts, NULL)) != -1) {
		int k = gpucloud_common_opt(c, opt, "submit");
		if (k < 0)
			goto out;
		if (k)
			continue;
		switch (opt) {
		case 'f': file = optarg; break;
		case 'n': json_object_set_new(flags, "name", json_string(optarg)); break;
		case 'i': json_object_set_new(flags, "image", json_string(optarg)); break;
		case 'c': json_object_set_new(flags, "command", json_string(optarg)); break;
		case 'p': json_object_set_new(flags, "pool", json_string(optarg)); break;
		case 'C': json_object_set_new(flags, "cpu", json_string(optarg)); break;
		case 'm': json_object_set_new(flags, "memory", json_string(optarg)); break;
		case 'M': json_object_set_new(flags, "shm", json_string(optarg)); break;
		case 'R': json_object_set_new(flags, "max_runtime", json_string(optarg)); break;
		case 'P': json_object_set_new(flags, "priority", json_string(optarg)); break;
		case 'T': json_array_append_new(tags, json_string(optarg)); break;
		case 'F': follow = 1; break;
		case 'D': dry = 1; break;
		case 'g':
		case 'k':
		case 'r':
		case 't':
		case 'N': {
			static const char *const names[] = { ['g'] = "gpus",
				                             ['k'] = "class",
				                             ['r'] = "retry_limit",
				                             ['t'] = "template",
				                             ['N'] = "members" };
			long long n = opt == 'r' && strcmp(optarg, "0") == 0 ? 0 : parse_id(optarg);
			if (n < 0) {
				code = usage_error("submit", "--%s must be a positive number",
				                   names[opt]);
				goto out;
			}
			json_object_set_new(flags, names[opt], json_integer(n));
			break;
		}
		case 'e':
			if (key_value(env, optarg, 0) < 0) {
				code = usage_error("submit", "--env takes NAME=VALUE, not '%s'",
				                   optarg);
				goto out;
			}
			break;
		case 'H':
			if (key_value(hp, optarg, 1) < 0) {
				code = usage_error("submit", "--hp takes NAME=VALUE, not '%s'",
				                   optarg);
				goto out;
			}
			break;
		default: code = usage_error("submit", "unknown option"); goto out;
		}
	}
	if (optind < argc) { /* gpucloud submit [flags] -- cmd args... */
		cmd = json_array();
		for (int i = optind; i < argc; i++) {
			json_t *s = json_string(argv[i]);
			if (!s) {
				code = usage_error("submit", "the command must be UTF-8 text");
				goto out;
			}
			json_array_append_new(cmd, s);
		}
		if (json_object_get(flags, "command")) {
			code = usage_error("submit",
			                   "give the command once: --command or after --");
			goto out;
		}
		json_object_set(flags, "command", cmd);
	}
	if (file) {
		size_t len;
		char *text = read_file(file, &len, 4u << 20);
		if (!text) {
			fprintf(stderr, "gpucloud submit: cannot read '%s': %s\n", file,
			        strerror(errno));
			code = EXIT_LOCAL;
			goto out;
		}
		doc = jobfile_parse(text, len, &err);
		free(text);
		if (!doc) {
			code = usage_error("submit", "%s: %s", file, err.msg);
			goto out;
		}
	} else {
		doc = json_object();
	}
	/* the flags win over the file; env and hyperparameters merge */
	if (json_object_size(env)) {
		json_t *m = json_object_get(doc, "env");
		if (json_is_object(m))
			json_object_update(m, env);
		else
			json_object_set(doc, "env", env);
	}
	if (json_object_size(hp)) {
		json_t *m = json_object_get(doc, "hyperparameters");
		if (json_is_object(m))
			json_object_update(m, hp);
		else
			json_object_set(doc, json_object_get(doc, "hp") ? "hp" : "hyperparameters",
			                hp);
	}
	if (json_array_size(tags))
		json_object_set(flags, "tags", tags);
	if (json_object_get(doc, "job") && json_is_object(json_object_get(doc, "job"))) {
		json_t *inner = json_object_get(doc, "job");
		json_t *n = json_object_get(flags, "name");
		if (n)
			json_object_set(doc, "name", n);
		json_object_del(flags, "name");
		json_object_update(inner, flags);
	} else {
		json_object_update(doc, flags);
	}
	req = jobfile_request(doc, &sweep, &err);
	if (!req) {
		code = usage_error("submit", "%s%s%s", file ? file : "", file ? ": " : "", err.msg);
		goto out;
	}
	job = sweep ? json_object_get(req, "job") : req;
	if (!json_object_get(req, "name")) {
		code = usage_error("submit", "give the %s a --name", sweep ? "sweep" : "job");
		goto out;
	}
	if (!json_object_get(job, "command") && !json_object_get(job, "template_id")) {
		code = usage_error("submit", "give a command: after --, with --command, or in the "
		                             "job file");
		goto out;
	}
	if (!json_object_get(job, "image_id") && !json_object_get(job, "image") &&
	    !json_object_get(job, "template_id")) {
		code = usage_error("submit", "give an --image (an id or a reference)");
		goto out;
	}
	if (dry) { /* the request, unsent (the image name unresolved) */
		client_print_json(req);
		goto out;
	}
	if ((code = client_connect(c)) != EXIT_OK)
		goto out;
	if ((code = resolve_image(c, job)) != EXIT_OK)
		goto out;
	res = submit_once(c, sweep ? "/api/v1/sweeps" : "/api/v1/jobs", req,
	                  sweep ? "submit the sweep" : "submit the job", &code);
	if (!res)
		goto out;
	if (c->json)
		client_print_json(res);
	else if (sweep)
		printf("submitted sweep %lld '%s': %lld runs\n",
		       (long long)json_integer_value(json_object_get(res, "id")), str(res, "name"),
		       (long long)json_integer_value(json_object_get(res, "runs")));
	else
		printf("submitted job %lld '%s' (%s)\n",
		       (long long)json_integer_value(json_object_get(res, "id")), str(res, "name"),
		       str(res, "state"));
	if (follow && !sweep) {
		fflush(stdout);
		code = follow_logs(c, json_integer_value(json_object_get(res, "id")), 200);
	}
out:
	json_decref(flags);
	json_decref(env);
	json_decref(hp);
	json_decref(tags);
	json_decref(cmd);
	json_decref(doc);
	json_decref(req);
	json_decref(res);
	return code;
}

/* ---- jobs, cancel, instances ------------------------------------------ */

static void add_query(struct client *c, char *q, size_t n, const char *k, const char *v)
{
	char *e = client_escape(c, v);
	size_t used = strlen(q);

	snprintf(q + used, n - used, "%s%s=%s", strchr(q, '?') ? "&" : "?", k, e ? e : "");
	curl_free(e);
}

static void print_job_row(json_t *j)
{
	char gpus[32];
	const char *pool = json_string_value(json_object_get(j, "pool"));

	if (pool)
		snprintf(gpus, sizeof(gpus), "%s:%lld", pool,
		         (long long)json_integer_value(json_object_get(j, "slices")));
	else
		snprintf(gpus, sizeof(gpus), "-");
	printf("%-7lld %-24.24s %-10s %-14.14s %-20.20s %s\n",
	       (long long)json_integer_value(json_object_get(j, "id")), str(j, "name"),
	       str(j, "state"), gpus, str(j, "created_at"),
	       json_string_value(json_object_get(j, "reason")) ? str(j, "reason") : "");
}

static int cmd_jobs(struct client *c, int argc, char **argv)
{
	static const struct option opts[] = {
		{ "state", required_argument, NULL, 's' },
		{ "search", required_argument, NULL, 'q' },
		{ "pool", required_argument, NULL, 'p' },
		{ "tag", required_argument, NULL, 'T' },
		{ "since", required_argument, NULL, 'a' },
		{ "user", required_argument, NULL, 'u' },
		{ "limit", required_argument, NULL, 'l' },
		{ "all", no_argument, NULL, 'A' },
		COMMON_OPTS,
		{ NULL, 0, NULL, 0 },
	};
	char q[4096] = "/api/v1/jobs", base[4096];
	int opt, code, all = 0;
	json_t *page, *items = json_array(), *j, *counts = NULL;
	size_t i;

	while ((opt = getopt_long(argc, argv, "s:q:p:l:a", opts, NULL)) != -1) {
		int k = gpucloud_common_opt(c, opt, "jobs");
		if (k < 0) {
			json_decref(items);
			return EXIT_OK;
		}
		if (k)
			continue;
		switch (opt) {
		case 's': add_query(c, q, sizeof(q), "state", optarg); break;
		case 'q': add_query(c, q, sizeof(q), "q", optarg); break;
		case 'p': add_query(c, q, sizeof(q), "pool", optarg); break;
		case 'T': add_query(c, q, sizeof(q), "tags", optarg); break;
		case 'a': add_query(c, q, sizeof(q), "since", optarg); break;
		case 'u': add_query(c, q, sizeof(q), "user", optarg); break;
		case 'A': all = 1; break;
		case 'l':
			if (parse_id(optarg) < 0) {
				json_decref(items);
				return usage_error("jobs", "--limit must be a positive number");
			}
			add_query(c, q, sizeof(q), "limit", optarg);
			break;
		default: json_decref(items); return usage_error("jobs", "unknown option");
		}
	}
	if ((code = client_connect(c)) != EXIT_OK) {
		json_decref(items);
		return code;
	}
	if (optind < argc) { /* gpucloud jobs ID: one job */
		long long id = parse_id(argv[optind]);
		json_decref(items);
		if (id < 0 || optind + 1 < argc)
			return usage_error("jobs", "'%s' is not a job id", argv[optind]);
		snprintf(q, sizeof(q), "/api/v1/jobs/%lld", id);
		j = client_call(c, "GET", q, NULL, "get the job", &code);
		if (!j)
			return code;
		if (c->json) {
			client_print_json(j);
		} else {
			char *s = json_dumps(j, JSON_INDENT(2) | JSON_SORT_KEYS);
			printf("%s\n", s ? s : "");
			free(s);
		}
		json_decref(j);
		return EXIT_OK;
	}
	snprintf(base, sizeof(base), "%s", q);
	for (;;) {
		const char *next;
		page = client_call(c, "GET", q, NULL, "list jobs", &code);
		if (!page) {
			json_decref(items);
			json_decref(counts);
			return code;
		}
		json_array_extend(items, json_object_get(page, "items"));
		if (!counts)
			counts = json_incref(json_object_get(page, "counts"));
		next = json_string_value(json_object_get(page, "next_cursor"));
		if (!all || !next) {
			if (c->json) {
				json_object_set(page, "items", items);
				client_print_json(page);
			}
			json_decref(page);
			break;
		}
		snprintf(q, sizeof(q), "%s", base);
		add_query(c, q, sizeof(q), "cursor", next);
		json_decref(page);
	}
	if (!c->json) {
		printf("%-7s %-24s %-10s %-14s %-20s %s\n", "ID", "NAME", "STATE", "GPUS",
		       "SUBMITTED", "REASON");
		json_array_foreach(items, i, j) print_job_row(j);
	}
	json_decref(items);
	json_decref(counts);
	return EXIT_OK;
}

static int cmd_cancel(struct client *c, int argc, char **argv)
{
	static const struct option opts[] = { COMMON_OPTS, { NULL, 0, NULL, 0 } };
	int opt, code, worst = EXIT_OK;
	json_t *outs = json_array();

	while ((opt = getopt_long(argc, argv, "", opts, NULL)) != -1) {
		int k = gpucloud_common_opt(c, opt, "cancel");
		if (k < 0) {
			json_decref(outs);
			return EXIT_OK;
		}
		if (!k) {
			json_decref(outs);
			return usage_error("cancel", "unknown option");
		}
	}
	if (optind >= argc) {
		json_decref(outs);
		return usage_error("cancel", "name the job id(s) to cancel");
	}
	for (int i = optind; i < argc; i++)
		if (parse_id(argv[i]) < 0) {
			json_decref(outs);
			return usage_error("cancel", "'%s' is not a job id", argv[i]);
		}
	if ((code = client_connect(c)) != EXIT_OK) {
		json_decref(outs);
		return code;
	}
	for (int i = optind; i < argc; i++) {
		char path[64], what[64];
		json_t *j;
		snprintf(path, sizeof(path), "/api/v1/jobs/%lld/cancel", parse_id(argv[i]));
		snprintf(what, sizeof(what), "cancel job %lld", parse_id(argv[i]));
		j = client_call(c, "POST", path, NULL, what, &code);
		if (!j) {
			worst = worst ? worst : code;
			continue;
		}
		if (c->json)
			json_array_append(outs, j);
		else
			printf("cancelling job %lld '%s' (%s)\n",
			       (long long)json_integer_value(json_object_get(j, "id")),
			       str(j, "name"), str(j, "state"));
		json_decref(j);
	}
	if (c->json && json_array_size(outs))
		client_print_json(json_array_size(outs) == 1 ? json_array_get(outs, 0) : outs);
	json_decref(outs);
	return worst;
}

static int cmd_instances(struct client *c, int argc, char **argv)
{
	static const struct option opts[] = { { "all", no_argument, NULL, 'A' },
		                              COMMON_OPTS,
		                              { NULL, 0, NULL, 0 } };
	char q[256];
	int opt, code, all = 0;
	json_t *items = json_array(), *j, *page;
	const char *next = NULL;
	char cursor[256] = "";
	size_t i;

	while ((opt = getopt_long(argc, argv, "", opts, NULL)) != -1) {
		int k = gpucloud_common_opt(c, opt, "instances");
		if (k < 0) {
			json_decref(items);
			return EXIT_OK;
		}
		if (k)
			continue;
		if (opt == 'A') {
			all = 1;
			continue;
		}
		json_decref(items);
		return usage_error("instances", "unknown option");
	}
	if (optind < argc) {
		json_decref(items);
		return usage_error("instances", "unexpected argument '%s'", argv[optind]);
	}
	if ((code = client_connect(c)) != EXIT_OK) {
		json_decref(items);
		return code;
	}
	do {
		snprintf(q, sizeof(q), "/api/v1/instances?limit=200%s", all ? "&all=1" : "");
		if (cursor[0])
			add_query(c, q, sizeof(q), "cursor", cursor);
		page = client_call(c, "GET", q, NULL, "list instances", &code);
		if (!page) {
			json_decref(items);
			return code;
		}
		json_array_extend(items, json_object_get(page, "items"));
		next = json_string_value(json_object_get(page, "next_cursor"));
		snprintf(cursor, sizeof(cursor), "%s", next ? next : "");
		json_decref(page);
	} while (cursor[0]);
	if (c->json) {
		json_t *o = json_pack("{s:O}", "items", items);
		client_print_json(o);
		json_decref(o);
	} else {
		printf("%-7s %-24s %-10s %-14s %-32s %s\n", "ID", "NAME", "STATE", "GPUS", "IMAGE",
		       "NODE");
		json_array_foreach(items, i, j)
		{
			char gpus[32];
			const char *pool = json_string_value(json_object_get(j, "pool"));
			if (pool)
				snprintf(gpus, sizeof(gpus), "%s:%lld", pool,
				         (long long)json_integer_value(
				                 json_object_get(j, "slices")));
			else
				snprintf(gpus, sizeof(gpus), "-");
			printf("%-7lld %-24.24s %-10s %-14.14s %-32.32s %s\n",
			       (long long)json_integer_value(json_object_get(j, "id")),
			       str(j, "name"), str(j, "state"), gpus, str(j, "image"),
			       str(j, "node"));
		}
	}
	json_decref(items);
	return EXIT_OK;
}

/* ---- logs ------------------------------------------------------------- */

struct sse {
	struct client *c;
	char line[65536 + 256];
	size_t len;
	int overflow;
	char event[32];
	char data[65536 + 256];
	size_t dlen;
	char id[32];
	int has_data; /* this event had a data: line (an empty log line too) */
	char end_state[32];
};

static void sse_dispatch(struct sse *s)
{
	if (strcmp(s->event, "end") == 0) {
		snprintf(s->end_state, sizeof(s->end_state), "%.*s", (int)s->dlen, s->data);
	} else if (s->has_data) {
		if (s->c->json) {
			json_int_t off = (json_int_t)strtoll(s->id, NULL, 10);
			json_t *o =
			        json_pack("{s:s%, s:I}", "line", s->data, s->dlen, "offset", off);
			if (!o) /* not UTF-8 */
				o = json_pack("{s:s, s:I, s:b}", "line", "", "offset", off,
				              "binary", 1);
			client_print_json(o);
			json_decref(o);
		} else {
			fwrite(s->data, 1, s->dlen, stdout);
			fputc('\n', stdout);
			fflush(stdout);
		}
	}
	s->event[0] = '\0';
	s->dlen = 0;
	s->has_data = 0;
}

static void sse_line(struct sse *s, const char *l, size_t n)
{
	if (n == 0) {
		sse_dispatch(s);
		return;
	}
	if (n >= 5 && memcmp(l, "data:", 5) == 0) {
		size_t k = n - 5, off = 5;
		if (k && l[off] == ' ')
			off++, k--;
		if (s->has_data && s->dlen < sizeof(s->data) - 1)
			s->data[s->dlen++] = '\n';
		s->has_data = 1;
		if (k > sizeof(s->data) - s->dlen - 1)
			k = sizeof(s->data) - s->dlen - 1;
		memcpy(s->data + s->dlen, l + off, k);
		s->dlen += k;
	} else if (n >= 6 && memcmp(l, "event:", 6) == 0) {
		snprintf(s->event, sizeof(s->event), "%.*s", (int)(n - 6 - (l[6] == ' ')),
		         l + 6 + (l[6] == ' '));
	} else if (n >= 3 && memcmp(l, "id:", 3) == 0) {
		snprintf(s->id, sizeof(s->id), "%.*s", (int)(n - 3 - (n > 3 && l[3] == ' ')),
		         l + 3 + (n > 3 && l[3] == ' '));
	}
}

static size_t sse_sink(const char *p, size_t n, void *arg)
{
	struct sse *s = arg;

	for (size_t i = 0; i < n; i++) {
		if (p[i] == '\n') {
			size_t k = s->len;
			if (k && s->line[k - 1] == '\r')
				k--;
			sse_line(s, s->line, k);
			s->len = 0;
		} else if (s->len < sizeof(s->line) - 1) {
			s->line[s->len++] = p[i];
		}
	}
	return n;
}

static int follow_logs(struct client *c, long long id, long tail)
{
	struct sse *s = calloc(1, sizeof(*s));
	char path[128];
	struct client_req r = {
		.method = "GET", .path = path, .upload_fd = -1, .upload_len = -1, .sink = sse_sink
	};
	struct client_reply rep = { 0 };
	int code = EXIT_OK, tries = 0;

	if (!s)
		return EXIT_LOCAL;
	s->c = c;
	r.sink_arg = s;
	snprintf(path, sizeof(path), "/api/v1/jobs/%lld/logs?follow=1&tail=%ld", id, tail);
	/* until "event: end"; a dropped stream goes on after the last line */
	while (!s->end_state[0]) {
		r.last_event = s->id[0] ? s->id : NULL;
		if (client_send(c, &r, &rep) < 0 && !rep.status) {
			if (++tries > 5) {
				code = client_fail(c, NULL, "follow the log");
				break;
			}
			sleep(1);
			continue;
		}
		if (rep.status != 200) {
			code = client_fail(c, &rep, "follow the log");
			client_reply_release(&rep);
			break;
		}
		client_reply_release(&rep);
		tries = 0;
		s->len = 0;
		s->dlen = 0;
		s->has_data = 0;
		if (!s->end_state[0])
			sleep(1); /* cut off before the end: go on after the last line */
	}
	if (s->end_state[0]) {
		if (c->json) {
			json_t *o =
			        json_pack("{s:I, s:s}", "job", (json_int_t)id, "end", s->end_state);
			client_print_json(o);
			json_decref(o);
		} else {
			fprintf(stderr, "gpucloud: job %lld ended: %s\n", id, s->end_state);
		}
	}
	free(s);
	return code;
}

static int cmd_logs(struct client *c, int argc, char **argv)
{
	static const struct option opts[] = {
		{ "follow", no_argument, NULL, 'f' },
		{ "tail", required_argument, NULL, 'n' },
		COMMON_OPTS,
		{ NULL, 0, NULL, 0 },
	};
	int opt, code, follow = 0;
	long tail = 200;
	long long id;
	char path[128];
	struct client_req r = { .method = "GET", .path = path, .upload_fd = -1, .upload_len = -1 };
	struct client_reply rep = { 0 };

	while ((opt = getopt_long(argc, argv, "fn:", opts, NULL)) != -1) {
		int k = gpucloud_common_opt(c, opt, "logs");
		if (k < 0)
			return EXIT_OK;
		if (k)
			continue;
		switch (opt) {
		case 'f': follow = 1; break;
		case 'n':
			tail = (long)parse_id(optarg);
			if (tail < 1 || tail > 100000)
				return usage_error("logs", "--tail must be 1 to 100000");
			break;
		default: return usage_error("logs", "unknown option");
		}
	}
	if (optind + 1 != argc)
		return usage_error("logs", "name one job id");
	id = parse_id(argv[optind]);
	if (id < 0)
		return usage_error("logs", "'%s' is not a job id", argv[optind]);
	if ((code = client_connect(c)) != EXIT_OK)
		return code;
	if (follow)
		return follow_logs(c, id, tail);
	snprintf(path, sizeof(path), "/api/v1/jobs/%lld/logs?tail=%ld", id, tail);
	if (client_send(c, &r, &rep) < 0) {
		client_reply_release(&rep);
		return client_fail(c, NULL, "get the log");
	}
	if (rep.status != 200) {
		code = client_fail(c, &rep, "get the log");
		client_reply_release(&rep);
		return code;
	}
	if (c->json) {
		json_t *o = json_pack("{s:I, s:s%}", "job", (json_int_t)id, "log",
		                      rep.body ? rep.body : "", rep.len);
		client_print_json(o ? o
		                    : json_pack("{s:I, s:s}", "job", (json_int_t)id, "log", ""));
		json_decref(o);
	} else if (rep.len) {
		fwrite(rep.body, 1, rep.len, stdout);
	}
	client_reply_release(&rep);
	return EXIT_OK;
}

/* ---- usage ------------------------------------------------------------ */

static void num(char *buf, size_t n, json_t *v)
{
	if (json_is_null(v) || !v)
		snprintf(buf, n, "-");
	else if (json_is_integer(v))
		snprintf(buf, n, "%lld", (long long)json_integer_value(v));
	else
		snprintf(buf, n, "%.2f", json_number_value(v));
}

static int cmd_usage(struct client *c, int argc, char **argv)
{
	static const struct option opts[] = {
		{ "group-by", required_argument, NULL, 'g' },
		{ "period", required_argument, NULL, 'p' },
		{ "from", required_argument, NULL, 'F' },
		{ "to", required_argument, NULL, 't' },
		{ "csv", no_argument, NULL, 'c' },
		{ "waste", no_argument, NULL, 'w' },
		COMMON_OPTS,
		{ NULL, 0, NULL, 0 },
	};
	char q[2048];
	const char *group = NULL, *period = NULL, *from = NULL, *to = NULL;
	int opt, code, csv = 0, waste = 0;
	struct client_req r = { .method = "GET", .path = q, .upload_fd = -1, .upload_len = -1 };
	struct client_reply rep = { 0 };
	json_t *row;
	size_t i;

	while ((opt = getopt_long(argc, argv, "g:p:", opts, NULL)) != -1) {
		int k = gpucloud_common_opt(c, opt, "usage");
		if (k < 0)
			return EXIT_OK;
		if (k)
			continue;
		switch (opt) {
		case 'g': group = optarg; break;
		case 'p': period = optarg; break;
		case 'F': from = optarg; break;
		case 't': to = optarg; break;
		case 'c': csv = 1; break;
		case 'w': waste = 1; break;
		default: return usage_error("usage", "unknown option");
		}
	}
	if (optind < argc && strcmp(argv[optind], "waste") == 0)
		waste = 1, optind++;
	if (optind < argc)
		return usage_error("usage", "unexpected argument '%s'", argv[optind]);
	if (group && strcmp(group, "user") && strcmp(group, "class") &&
	    (waste || (strcmp(group, "pool") && strcmp(group, "image"))))
		return usage_error("usage", "--group-by is user, class%s",
		                   waste ? "" : ", pool or image");
	if (period && (waste || (strcmp(period, "day") && strcmp(period, "week") &&
	                         strcmp(period, "month") && strcmp(period, "total"))))
		return usage_error("usage", "--period is day, week, month or total%s",
		                   waste ? " (not for the waste report)" : "");
	if (csv && c->json)
		return usage_error("usage", "--csv and --json do not mix");
	if ((code = client_connect(c)) != EXIT_OK)
		return code;
	snprintf(q, sizeof(q), "/api/v1/usage%s", waste ? "/waste" : "");
	add_query(c, q, sizeof(q), "group_by", group ? group : "user");
	if (period)
		add_query(c, q, sizeof(q), "period", period);
	if (from)
		add_query(c, q, sizeof(q), "from", from);
	if (to)
		add_query(c, q, sizeof(q), "to", to);
	if (csv)
		add_query(c, q, sizeof(q), "format", "csv");
	if (client_send(c, &r, &rep) < 0) {
		client_reply_release(&rep);
		return client_fail(c, NULL, "get usage");
	}
	if (rep.status != 200) {
		code = client_fail(c, &rep, "get usage");
		client_reply_release(&rep);
		return code;
	}
	if (csv) {
		fwrite(rep.body ? rep.body : "", 1, rep.len, stdout);
	} else if (c->json || !rep.json) {
		if (rep.json)
			client_print_json(rep.json);
		else
			fwrite(rep.body ? rep.body : "", 1, rep.len, stdout);
	} else if (waste) {
		printf("%-24s %18s %s\n", "KEY", "IDLE_GPU_SECONDS", "PERIODS");
		json_array_foreach(json_object_get(rep.json, "rows"), i, row)
		{
			char a[32];
			num(a, sizeof(a), json_object_get(row, "allocated_idle_seconds"));
			printf("%-24.24s %18s %zu\n", str(row, "key"), a,
			       json_array_size(json_object_get(row, "periods")));
		}
	} else {
		json_t *tot = json_object_get(rep.json, "totals");
		printf("%-20s %-20s %12s %12s %-14s %10s %10s %10s\n", "KEY", "PERIOD",
		       "GPU_SECONDS", "GPU_USED_S", "MEASURED", "CPU_H", "MEM_GIB_H", "STOR_GIB_D");
		json_array_foreach(json_object_get(rep.json, "rows"), i, row)
		{
			char a[32], b[32], d[32], e[32], f[32];
			num(a, sizeof(a), json_object_get(row, "gpu_seconds"));
			num(b, sizeof(b), json_object_get(row, "gpu_used_seconds"));
			num(d, sizeof(d), json_object_get(row, "cpu_hours"));
			num(e, sizeof(e), json_object_get(row, "memory_gib_hours"));
			num(f, sizeof(f), json_object_get(row, "storage_gib_days"));
			printf("%-20.20s %-20.20s %12s %12s %-14.14s %10s %10s %10s\n",
			       str(row, "key"), str(row, "period_start"), a, b,
			       str(row, "gpu_measured"), d, e, f);
		}
		if (json_is_object(tot)) {
			char a[32], b[32], d[32], e[32], f[32];
			num(a, sizeof(a), json_object_get(tot, "gpu_seconds"));
			num(b, sizeof(b), json_object_get(tot, "gpu_used_seconds"));
			num(d, sizeof(d), json_object_get(tot, "cpu_hours"));
			num(e, sizeof(e), json_object_get(tot, "memory_gib_hours"));
			num(f, sizeof(f), json_object_get(tot, "storage_gib_days"));
			printf("%-20s %-20s %12s %12s %-14s %10s %10s %10s\n", "TOTAL", "", a, b,
			       "", d, e, f);
		}
	}
	client_reply_release(&rep);
	return EXIT_OK;
}

/* ---- the table -------------------------------------------------------- */

static int cmd_help(struct client *c, int argc, char **argv);

static const struct command commands[] = {
	{ "login", cmd_login, "log in and save an API token",
	  "usage: gpucloud login [URL] [--server URL] [-u USER] [--password-stdin]\n"
	  "                      [--name NAME] [--days N] [--read-only] [--json]\n"
	  "       gpucloud login [URL] --token TOKEN|-\n"
	  "\n"
	  "Logs in with a username and password, creates a named API token (read and\n"
	  "write unless --read-only; 90 days unless --days) and saves it with the server\n"
	  "URL in $XDG_CONFIG_HOME/gpucloud/credentials.json (mode 0600). The password\n"
	  "is asked on the terminal, or read from standard input with --password-stdin.\n"
	  "--token saves an existing token instead ('-': read it from standard input).\n" },
	{ "logout", cmd_logout, "revoke the saved token and forget it",
	  "usage: gpucloud logout [--json]\n"
	  "\n"
	  "Revokes the token 'gpucloud login' created and removes the saved login.\n" },
	{ "whoami", cmd_whoami, "show who the saved token belongs to",
	  "usage: gpucloud whoami [--json]\n" },
	{ "submit", cmd_submit, "submit a job or a sweep",
	  "usage: gpucloud submit [-f FILE] [--name NAME] [--image IMAGE] [--pool POOL]\n"
	  "                       [--gpus N] [--cpu CPUS] [--memory SIZE] [--shm SIZE]\n"
	  "                       [--env K=V]... [--hp K=V]... [--tag T]... [--class ID]\n"
	  "                       [--priority P] [--max-runtime DURATION] [--retry-limit N]\n"
	  "                       [--template ID] [--members N] [--follow] [--dry-run]\n"
	  "                       [--json] [--command 'SHELL LINE' | -- COMMAND ARGS...]\n"
	  "\n"
	  "Submits a job from flags, from a YAML or JSON job file (-f, '-' for standard\n"
	  "input), or both (flags win). A job file with 'grid' or 'list' (and 'metric',\n"
	  "'goal') is a sweep: one run per set of hyperparameters. IMAGE is an id, a\n"
	  "reference or a display name; CPUS 2, 0.5 or 500m; SIZE 512M, 2G (a number is\n"
	  "MiB); DURATION 3600, 90m, 2h, 1d. --hp values are typed (1, 0.1, true, text).\n"
	  "--follow streams the job's log until it ends; --dry-run prints the request.\n" },
	{ "jobs", cmd_jobs, "list jobs, or show one",
	  "usage: gpucloud jobs [--state S[,S]] [--search TEXT] [--pool P] [--tag T[,T]]\n"
	  "                     [--since WHEN] [--user U] [--limit N] [--all] [--json]\n"
	  "       gpucloud jobs ID [--json]\n"
	  "\n"
	  "Lists my jobs, newest first (one page unless --all). WHEN is a date, a time\n"
	  "or an age such as 7d, 24h, 30m.\n" },
	{ "ls", cmd_jobs, "the same as jobs", "usage: gpucloud ls: see gpucloud jobs --help\n" },
	{ "logs", cmd_logs, "print a job's log, or follow it",
	  "usage: gpucloud logs [-f] [--tail N] [--json] JOB\n"
	  "\n"
	  "Prints the last N lines (200) of the job's log. With -f, goes on printing\n"
	  "lines as the job writes them until it ends (the final state goes to stderr);\n"
	  "a dropped connection is resumed where it stopped. --json prints one object\n"
	  "per line: {\"line\", \"offset\"}, then {\"job\", \"end\"}.\n" },
	{ "cancel", cmd_cancel, "cancel jobs", "usage: gpucloud cancel [--json] JOB...\n" },
	{ "instances", cmd_instances, "list my instances",
	  "usage: gpucloud instances [--all] [--json]\n"
	  "\n"
	  "--all: everyone's (admins).\n" },
	{ "cp", cp_main, "copy a file to or from my home",
	  "usage: gpucloud cp [--overwrite] [--limit-rate BYTES] [--json] LOCAL home:PATH\n"
	  "       gpucloud cp [--overwrite] [--limit-rate BYTES] [--json] home:PATH LOCAL\n"
	  "\n"
	  "Uploads or downloads one file. Also shared:PATH, class:ID:PATH and\n"
	  "job:ID:PATH (read-only areas: downloads only). Files over 8 MiB upload\n"
	  "resumably: run the same command again after an interruption and only the\n"
	  "missing parts are sent. Downloads resume from LOCAL.gcpart with a Range\n"
	  "request. A progress bar shows when stderr is a terminal. BYTES takes K, M, G.\n" },
	{ "usage", cmd_usage, "GPU, CPU, memory and storage usage",
	  "usage: gpucloud usage [--group-by user|class|pool|image]\n"
	  "                      [--period day|week|month|total] [--from ISO8601]\n"
	  "                      [--to ISO8601] [--csv | --json]\n"
	  "       gpucloud usage waste [--group-by user|class] [--from] [--to] [--csv|--json]\n"
	  "\n"
	  "Allocated GPU-seconds, GPU time measured in use (or '-' where GPUs are not\n"
	  "measurable), CPU-hours, memory GiB-hours and storage GiB-days. 'waste': GPU\n"
	  "time allocated but idle, with the idle periods (--json).\n" },
	{ "help", cmd_help, "help on a command", "usage: gpucloud help [COMMAND]\n" },
};

static const struct command *find_command(const char *name)
{
	for (size_t i = 0; i < sizeof(commands) / sizeof(commands[0]); i++)
		if (strcmp(commands[i].name, name) == 0)
			return &commands[i];
	return NULL;
}

static void main_usage(FILE *f)
{
	fprintf(f, "usage: gpucloud [--server URL] [--json] COMMAND [ARGS]\n\ncommands:\n");
	for (size_t i = 0; i < sizeof(commands) / sizeof(commands[0]); i++)
		fprintf(f, "  %-10s %s\n", commands[i].name, commands[i].summary);
	fprintf(f, "\n'gpucloud COMMAND --help' says more; 'man gpucloud' says all.\n"
	           "exit codes: 0 ok, 1 usage, 2 refused (4xx), 3 server or network error,\n"
	           "4 not found, 5 not logged in or token expired/revoked, 6 local file error\n");
}

static int cmd_help(struct client *c, int argc, char **argv)
{
	const struct command *k = argc > 1 ? find_command(argv[1]) : NULL;

	(void)c;
	if (argc > 1 && !k)
		return usage_error("help", "no command '%s'", argv[1]);
	if (k)
		fputs(k->usage, stdout);
	else
		main_usage(stdout);
	return EXIT_OK;
}

int main(int argc, char **argv)
{
	struct client c;
	const struct command *k;
	int i = 1, code;

	memset(&c, 0, sizeof(c));
	c.tty = isatty(2);
	/* options before the command */
	for (; i < argc && argv[i][0] == '-'; i++) {
		if (!strcmp(argv[i], "--json"))
			c.json = 1;
		else if (!strcmp(argv[i], "--server") && i + 1 < argc)
			c.server_flag = argv[++i];
		else if (!strncmp(argv[i], "--server=", 9))
			c.server_flag = argv[i] + 9;
		else if (!strcmp(argv[i], "--help") || !strcmp(argv[i], "-h")) {
			main_usage(stdout);
			return EXIT_OK;
		} else if (!strcmp(argv[i], "--version")) {
			printf("gpucloud %s\n", VERSION);
			return EXIT_OK;
		} else {
			fprintf(stderr, "gpucloud: unknown option '%s'\n", argv[i]);
			main_usage(stderr);
			return EXIT_USAGE;
		}
	}
	if (i >= argc) {
		main_usage(stderr);
		return EXIT_USAGE;
	}
	k = find_command(argv[i]);
	if (!k) {
		fprintf(stderr, "gpucloud: no command '%s'\n", argv[i]);
		main_usage(stderr);
		return EXIT_USAGE;
	}
	if (curl_global_init(CURL_GLOBAL_DEFAULT) != CURLE_OK) {
		fprintf(stderr, "gpucloud: cannot start libcurl\n");
		return EXIT_SERVER;
	}
	optind = 0; /* glibc: a full reset of getopt */
	opterr = 1;
	code = k->run(&c, argc - i, argv + i);
	client_release(&c);
	curl_global_cleanup();
	return code;
}
