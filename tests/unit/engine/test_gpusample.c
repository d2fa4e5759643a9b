/* test_gpusample.c — the node host a DCGM URL template ({host}) gets. */
#include "engine/gpusample.c"
#include "harness.h"

TEST(node_host)
{
	char h[64], tiny[4];

	CHECK(gpusample_node_host("tcp://gpu7.example.edu:2376", h, sizeof(h)) == 0);
	CHECK_STR(h, "gpu7.example.edu");
	CHECK(gpusample_node_host("tcp://10.0.0.5:2376", h, sizeof(h)) == 0);
	CHECK_STR(h, "10.0.0.5");
	CHECK(gpusample_node_host("tcp://[fd00::7]:2376", h, sizeof(h)) == 0);
	CHECK_STR(h, "[fd00::7]");
	CHECK(gpusample_node_host("tcp://gpu7", h, sizeof(h)) == 0);
	CHECK_STR(h, "gpu7");
	CHECK(gpusample_node_host("unix:///var/run/docker.sock", h, sizeof(h)) == 0);
	CHECK_STR(h, "127.0.0.1");
	CHECK(gpusample_node_host("tcp://", h, sizeof(h)) == -1);
	CHECK(gpusample_node_host("tcp://[fd00::7", h, sizeof(h)) == -1);
	CHECK(gpusample_node_host("http://x", h, sizeof(h)) == -1);
	CHECK(gpusample_node_host("tcp://toolong:1", tiny, sizeof(tiny)) == -1);
}

TEST(dcgm_template)
{
	char u[128];

	config_set("gpu_dcgm_url", "http://{host}:9400/metrics", u, sizeof(u));
	CHECK(dcgm_url("tcp://gpu7:2376", u, sizeof(u)) == 0);
	CHECK_STR(u, "http://gpu7:9400/metrics");
	config_set("gpu_dcgm_url", "http://exporter.example.edu/metrics", u, sizeof(u));
	CHECK(dcgm_url("tcp://gpu7:2376", u, sizeof(u)) == 0);
	CHECK_STR(u, "http://exporter.example.edu/metrics");
	config_set("gpu_dcgm_url", "http://{host}:9400/metrics", u, sizeof(u));
	CHECK(dcgm_url("tcp://gpu7:2376", u, 10) == -1);
	config_free();
}

int main(void)
{
	RUN(node_host);
	RUN(dcgm_template);
	return harness_done("test_gpusample");
}
