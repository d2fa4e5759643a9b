/* test_ddp.c — distributed jobs without an engine: each job's /27 and its
 * members' addresses, the node network's create body, the torchrun-style
 * variables and what node labels imply; a member's fixed address in the
 * container spec. */
#include <string.h>

#include <jansson.h>

#include "harness.h"
#include "work/ddp.h"
#include "work/spec.h"

TEST(addresses)
{
	char sub[40], gw[20], addr[20];

	CHECK(ddp_addresses(NULL, 1, 0, sub, sizeof(sub), gw, sizeof(gw), addr, sizeof(addr)) == 0);
	CHECK_STR(sub, "10.208.0.32/27");
	CHECK_STR(gw, "10.208.0.33");
	CHECK_STR(addr, "10.208.0.34");
	CHECK(ddp_addresses("", 1, 15, sub, sizeof(sub), gw, sizeof(gw), addr, sizeof(addr)) == 0);
	CHECK_STR(addr, "10.208.0.49"); /* the last of 16 members, inside the /27 */
	/* slot modulo the range's /27s */
	CHECK(ddp_addresses("10.208.0.0/16", 257, 1, sub, sizeof(sub), gw, sizeof(gw), addr,
	                    sizeof(addr)) == 0);
	CHECK_STR(sub, "10.208.0.32/27");
	CHECK_STR(addr, "10.208.0.35");
	CHECK(ddp_addresses("10.208.0.0/16", 255, 0, sub, sizeof(sub), gw, sizeof(gw), addr,
	                    sizeof(addr)) == 0);
	CHECK_STR(sub, "10.208.31.224/27");
	/* a small range: fewer slots; host bits of the range are ignored */
	CHECK(ddp_addresses("192.168.7.77/26", 3, 0, sub, sizeof(sub), gw, sizeof(gw), addr,
	                    sizeof(addr)) == 0);
	CHECK_STR(sub, "192.168.7.96/27");
	CHECK(ddp_addresses("10.1.0.0/27", 99, 0, sub, sizeof(sub), gw, sizeof(gw), addr,
	                    sizeof(addr)) == 0);
	CHECK_STR(sub, "10.1.0.0/27");
	/* refused */
	CHECK(ddp_addresses("10.1.0.0/28", 1, 0, sub, sizeof(sub), gw, sizeof(gw), addr,
	                    sizeof(addr)) < 0);
	CHECK(ddp_addresses("10.1.0.0", 1, 0, sub, sizeof(sub), gw, sizeof(gw), addr,
	                    sizeof(addr)) < 0);
	CHECK(ddp_addresses("10.1.0.x/16", 1, 0, sub, sizeof(sub), gw, sizeof(gw), addr,
	                    sizeof(addr)) < 0);
	CHECK(ddp_addresses("10.1.0.0/16x", 1, 0, sub, sizeof(sub), gw, sizeof(gw), addr,
	                    sizeof(addr)) < 0);
	CHECK(ddp_addresses(NULL, 1, 16, sub, sizeof(sub), gw, sizeof(gw), addr, sizeof(addr)) < 0);
	CHECK(ddp_addresses(NULL, 1, -1, sub, sizeof(sub), gw, sizeof(gw), addr, sizeof(addr)) < 0);
}

TEST(network)
{
	char name[64];
	json_t *b, *cfg;

	ddp_net_name("c0ffee00-1111", name, sizeof(name));
	CHECK_STR(name, "gc-c0ffee00-ddp");
	b = ddp_net_body(name, "eth1", NULL, "c0ffee00-1111");
	CHECK(b != NULL);
	CHECK_STR(json_string_value(json_object_get(b, "Driver")), "macvlan");
	CHECK_STR(json_string_value(json_object_get(json_object_get(b, "Options"), "parent")),
	          "eth1");
	CHECK_STR(json_string_value(json_object_get(json_object_get(b, "Labels"), "gpucloud.kind")),
	          "network");
	cfg = json_object_get(json_object_get(b, "IPAM"), "Config");
	CHECK(json_array_size(cfg) == DDP_SLOTS);
	CHECK_STR(json_string_value(json_object_get(json_array_get(cfg, 1), "Subnet")),
	          "10.208.0.32/27");
	CHECK_STR(json_string_value(json_object_get(json_array_get(cfg, 1), "Gateway")),
	          "10.208.0.33");
	json_decref(b);
	b = ddp_net_body(name, "eth1", "10.9.0.0/26", "c");
	CHECK(json_array_size(json_object_get(json_object_get(b, "IPAM"), "Config")) == 2);
	json_decref(b);
	CHECK(ddp_net_body(name, "eth1", "bad", "c") == NULL);
}

static const char *sv(const json_t *o, const char *k)
{
	return json_string_value(json_object_get(o, k));
}

TEST(environment)
{
	json_t *env = json_object();
	json_t *labels = json_loads("{\"nccl.socket_ifname\": \"ib0\", \"ib\": \"false\","
	                            " \"nccl.debug\": \"INFO\", \"nccl.BAD\": \"x\","
	                            " \"nccl.a-b\": \"x\", \"zone\": \"a\"}",
	                            0, NULL);

	ddp_env(env, labels, "10.208.0.34", 4, 3);
	CHECK_STR(sv(env, "MASTER_ADDR"), "10.208.0.34");
	CHECK_STR(sv(env, "MASTER_PORT"), "29500");
	CHECK_STR(sv(env, "WORLD_SIZE"), "4");
	CHECK_STR(sv(env, "RANK"), "3");
	CHECK_STR(sv(env, "NODE_RANK"), "3");
	CHECK_STR(sv(env, "LOCAL_RANK"), "0");
	CHECK_STR(sv(env, "NPROC_PER_NODE"), "1");
	CHECK_STR(sv(env, "LOCAL_WORLD_SIZE"), "1");
	CHECK_STR(sv(env, "NCCL_SOCKET_IFNAME"), "ib0");
	CHECK_STR(sv(env, "GLOO_SOCKET_IFNAME"), "ib0");
	CHECK_STR(sv(env, "NCCL_IB_DISABLE"), "1");
	CHECK_STR(sv(env, "NCCL_DEBUG"), "INFO");
	CHECK(json_object_size(env) == 12); /* nothing from the bad or other labels */
	json_decref(env);
	/* no labels: the job network's interface */
	env = json_object();
	ddp_env(env, NULL, "10.0.0.2", 2, 0);
	CHECK_STR(sv(env, "NCCL_SOCKET_IFNAME"), "eth0");
	CHECK_STR(sv(env, "GLOO_SOCKET_IFNAME"), "eth0");
	CHECK(json_object_get(env, "NCCL_IB_DISABLE") == NULL);
	json_decref(env);
	json_decref(labels);
}

TEST(fixed_address_in_spec)
{
	struct spec_input in;
	char sig[600];
	json_t *s;

	memset(&in, 0, sizeof(in));
	in.cluster = "c0ffee00";
	in.kind = "job";
	in.id = 5;
	in.name = "gc-c0ffee00-job-5-r1";
	in.owner = "alice";
	in.uid = 100042;
	in.image = "img";
	in.host = "127.0.0.1";
	in.network = "gc-c0ffee00-ddp";
	in.ipv4 = "10.208.0.163";
	in.cpu_millis = 1000;
	in.mem_mib = 64;
	in.shm_mib = 64;
	in.pids_limit = 100;
	s = spec_build(&in, sig, sizeof(sig));
	CHECK(s != NULL);
	CHECK_STR(
	        json_string_value(json_object_get(json_object_get(s, "HostConfig"), "NetworkMode")),
	        "gc-c0ffee00-ddp");
	CHECK_STR(json_string_value(json_object_get(
	                  json_object_get(
	                          json_object_get(
	                                  json_object_get(json_object_get(s, "NetworkingConfig"),
	                                                  "EndpointsConfig"),
	                                  "gc-c0ffee00-ddp"),
	                          "IPAMConfig"),
	                  "IPv4Address")),
	          "10.208.0.163");
	CHECK(strstr(sig, "@10.208.0.163") != NULL); /* another address: another container */
	CHECK(json_is_false(json_object_get(json_object_get(s, "HostConfig"), "Privileged")));
	json_decref(s);
}

int main(void)
{
	RUN(addresses);
	RUN(network);
	RUN(environment);
	RUN(fixed_address_in_spec);
	return harness_done("test_ddp");
}
