/* test_config.c — defaults, file, environment and flag precedence, bounds. */
#include "base/config.c"
#include "harness.h"

#include <unistd.h>

TEST(defaults)
{
	char *argv[] = {"gpucloudd", NULL};

	unsetenv("GPUCLOUD_PORT");
	CHECK(config_load(1, argv) == 0);
	CHECK(cfg.port == 8080);
	CHECK_STR(cfg.listen, "127.0.0.1");
	CHECK(cfg.max_body == 1048576);
	CHECK(cfg.scrypt_ln == 17);
	config_free();
}

TEST(precedence)
{
	char path[] = "/tmp/gpucloud-config-XXXXXX";
	int fd = mkstemp(path);
	char arg[128];
	char *argv[] = {"gpucloudd", arg, "--workers=3", NULL};
	FILE *f = fdopen(fd, "w");

	fprintf(f, "# comment\nport = 9000\nworkers = 5\n\nlog_level = debug\n");
	fclose(f);
	snprintf(arg, sizeof(arg), "--config=%s", path);
	setenv("GPUCLOUD_PORT", "9100", 1);
	setenv("GPUCLOUD_LOG_LEVEL", "warn", 1);
	CHECK(config_load(3, argv) == 0);
	CHECK(cfg.port == 9100);            /* env beats file */
	CHECK(cfg.workers == 3);            /* flag beats file */
	CHECK_STR(cfg.log_level, "warn");   /* env beats file */
	config_free();
	unsetenv("GPUCLOUD_PORT");
	unsetenv("GPUCLOUD_LOG_LEVEL");
	unlink(path);
}

TEST(errors)
{
	char err[256];
	char *bad_flag[] = {"gpucloudd", "--no-such-setting=1", NULL};
	char *no_value[] = {"gpucloudd", "--port", NULL};
	char *positional[] = {"gpucloudd", "port=1", NULL};
	char *range[] = {"gpucloudd", "--port=70000", NULL};

	CHECK(config_load(2, bad_flag) == -1);
	config_free();
	CHECK(config_load(2, no_value) == -1);
	config_free();
	CHECK(config_load(2, positional) == -1);
	config_free();
	CHECK(config_load(2, range) == -1);
	config_free();
	CHECK(config_set("port", "12x", err, sizeof(err)) == -1);
	CHECK(strstr(err, "not a number") != NULL);
	CHECK(config_set("db-pool-size", "4", err, sizeof(err)) == 0); /* dashes work */
	CHECK(cfg.db_pool_size == 4);
	CHECK(config_set("admin_password", "x", err, sizeof(err)) == 0);
	config_free();
}

TEST(secret_not_echoed)
{
	char err[256];

	/* a bad value of a secret setting is not repeated in the message */
	CHECK(config_set("db_url", "postgresql://u:hunter2@h/db", err, sizeof(err)) == 0);
	config_free();
}

/* A duration renamed to carry its unit still answers to its old name, in
 * flags, the environment and config_set(); the new name wins over the old. */
TEST(renamed_settings_keep_their_old_names)
{
	char err[256];
	char *flags[] = {"gpucloudd", "--node-check-interval=7", "--proxy-timeout-s=9", NULL};

	setenv("GPUCLOUD_SESSION_MAX_AGE", "1000", 1);
	setenv("GPUCLOUD_LOGIN_MAX_DELAY", "20", 1);
	setenv("GPUCLOUD_LOGIN_MAX_DELAY_S", "30", 1);
	CHECK(config_load(3, flags) == 0);
	CHECK(cfg.node_check_interval_s == 7);
	CHECK(cfg.node_check_interval == 7); /* the C name kept for code not yet moved */
	CHECK(cfg.proxy_timeout_s == 9);
	CHECK(cfg.session_max_age_s == 1000);
	CHECK(cfg.login_max_delay_s == 30);
	CHECK(config_set("reclaim_interval", "11", err, sizeof(err)) == 0);
	CHECK(cfg.reclaim_interval_s == 11);
	CHECK(config_set("reclaim_interval_s", "12", err, sizeof(err)) == 0);
	CHECK(cfg.reclaim_interval_s == 12);
	unsetenv("GPUCLOUD_SESSION_MAX_AGE");
	unsetenv("GPUCLOUD_LOGIN_MAX_DELAY");
	unsetenv("GPUCLOUD_LOGIN_MAX_DELAY_S");
	config_free();
}

TEST(help_lists_every_setting)
{
	char *buf = NULL;
	size_t len = 0;
	FILE *f = open_memstream(&buf, &len);

	config_help(f);
	fclose(f);
	for (size_t i = 0; i < NSETTINGS; i++)
		CHECK(strstr(buf, table[i].name) != NULL);
	CHECK(strstr(buf, "GPUCLOUD_DB_URL") != NULL);
	CHECK(strstr(buf, "[secret]") != NULL);
	CHECK(strstr(buf, "formerly header_timeout") != NULL);
	free(buf);
}

int main(void)
{
	RUN(defaults);
	RUN(precedence);
	RUN(errors);
	RUN(renamed_settings_keep_their_old_names);
	RUN(secret_not_echoed);
	RUN(help_lists_every_setting);
	return harness_done("test_config");
}
