/* test_nodes.c — version comparison behind the runc/toolkit flags, and the
 * TLS files written for tcp:// nodes. */
#include "engine/nodes.c"
#include "harness.h"

#include <sys/stat.h>

TEST(version_older)
{
	CHECK(nodes_version_older("1.1.11", "1.1.12") == 1);
	CHECK(nodes_version_older("1.1.12", "1.1.12") == 0);
	CHECK(nodes_version_older("1.1.13", "1.1.12") == 0);
	CHECK(nodes_version_older("1.2.0", "1.1.12") == 0);
	CHECK(nodes_version_older("1.0.99", "1.1.12") == 1);
	CHECK(nodes_version_older("0.9", "1.1.12") == 1);
	CHECK(nodes_version_older("v1.1.11", "1.1.12") == 1);
	CHECK(nodes_version_older("1.1.5-0ubuntu1", "1.1.12") == 1);
	CHECK(nodes_version_older("1.1.12+ds1", "1.1.12") == 0);
	CHECK(nodes_version_older("1.17.7", "1.17.8") == 1);
	CHECK(nodes_version_older("1.17", "1.17.8") == 1);
	CHECK(nodes_version_older("2", "1.17.8") == 0);
	CHECK(nodes_version_older("", "1.1.12") == -1);
	CHECK(nodes_version_older("unknown", "1.1.12") == -1);
}

TEST(tls_files)
{
	char dir[] = "/tmp/gpucloud-nodes-XXXXXX", path[128], buf[64];
	struct stat st;
	FILE *f;

	CHECK(mkdtemp(dir) != NULL);
	snprintf(path, sizeof(path), "%s/n1", dir);
	CHECK(nodes_write_tls(path, "CA", "CERT", "KEY") == 0);
	CHECK(stat(path, &st) == 0 && (st.st_mode & 0777) == 0700);
	snprintf(path, sizeof(path), "%s/n1/key.pem", dir);
	CHECK(stat(path, &st) == 0 && (st.st_mode & 0777) == 0600);
	f = fopen(path, "r");
	CHECK(f && fgets(buf, sizeof(buf), f) && strcmp(buf, "KEY") == 0);
	if (f)
		fclose(f);
	/* rewriting replaces the content */
	snprintf(path, sizeof(path), "%s/n1", dir);
	CHECK(nodes_write_tls(path, "CA2", "CERT2", "K") == 0);
	snprintf(path, sizeof(path), "%s/n1/key.pem", dir);
	f = fopen(path, "r");
	CHECK(f && fgets(buf, sizeof(buf), f) && strcmp(buf, "K") == 0);
	if (f)
		fclose(f);
	for (int i = 0; i < 3; i++) {
		static const char *const n[] = {"ca.pem", "cert.pem", "key.pem"};
		snprintf(path, sizeof(path), "%s/n1/%s", dir, n[i]);
		unlink(path);
	}
	snprintf(path, sizeof(path), "%s/n1", dir);
	rmdir(path);
	rmdir(dir);
	CHECK(nodes_write_tls("/nonexistent-dir/x", "a", "b", "c") == -1);
}

int main(void)
{
	RUN(version_older);
	RUN(tls_files);
	return harness_done("test_nodes");
}
