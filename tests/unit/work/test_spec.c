/* test_spec.c — the container spec without an engine: hardening, exactly
 * the allocated devices, the platform's variables beyond the user's reach,
 * only the user's storage bound, the labels reconcile relies on.
 */
#include <stdlib.h>
#include <string.h>

#include <jansson.h>

#include "harness.h"
#include "work/spec.h"

static json_t *J(const char *doc)
{
	return json_loads(doc, 0, NULL);
}

/* A CPU-only instance of user alice (uid 100042). */
static void base_input(struct spec_input *in)
{
	memset(in, 0, sizeof(*in));
	in->cluster = "c0ffee00-1111-2222-3333-444455556666";
	in->kind = "instance";
	in->id = 7;
	in->name = "gc-c0ffee00-inst-7";
	in->owner = "alice";
	in->uid = 100042;
	in->image_id = 3;
	in->image = "registry.local/pytorch:24.08";
	in->app_token = "tok";
	in->host = "127.0.0.1";
	in->network = "gpucloud-c0ffee00-1111-2222-3333-444455556666-u42";
	in->cpu_millis = 2000;
	in->mem_mib = 4096;
	in->shm_mib = 256;
	in->pids_limit = 4096;
}

static const char *hc_str(const json_t *spec, const char *k)
{
	return json_string_value(json_object_get(json_object_get(spec, "HostConfig"), k));
}

static long long hc_int(const json_t *spec, const char *k)
{
	return (long long)json_integer_value(
	        json_object_get(json_object_get(spec, "HostConfig"), k));
}

/* How many entries of Env start with prefix; the last one into *val. */
static int env_count(const json_t *spec, const char *prefix, const char **val)
{
	json_t *v;
	size_t i;
	int n = 0;

	json_array_foreach(json_object_get(spec, "Env"), i, v)
	{
		const char *s = json_string_value(v);
		if (s && strncmp(s, prefix, strlen(prefix)) == 0) {
			n++;
			if (val)
				*val = s + strlen(prefix);
		}
	}
	return n;
}

TEST(hardening)
{
	struct spec_input in;
	json_t *spec, *hc;

	base_input(&in);
	spec = spec_build(&in, NULL, 0);
	CHECK(spec != NULL);
	hc = json_object_get(spec, "HostConfig");
	CHECK(json_is_false(json_object_get(hc, "Privileged")));
	CHECK(json_array_size(json_object_get(hc, "CapDrop")) == 1);
	CHECK_STR(json_string_value(json_array_get(json_object_get(hc, "CapDrop"), 0)), "ALL");
	CHECK(json_object_get(hc, "CapAdd") == NULL);
	CHECK_STR(json_string_value(json_array_get(json_object_get(hc, "SecurityOpt"), 0)),
	          "no-new-privileges");
	CHECK(json_array_size(json_object_get(hc, "SecurityOpt")) == 1); /* default seccomp */
	CHECK(hc_int(spec, "PidsLimit") == 4096);
	CHECK(hc_int(spec, "Memory") == 4096LL << 20);
	CHECK(hc_int(spec, "MemorySwap") == hc_int(spec, "Memory"));
	CHECK(hc_int(spec, "NanoCpus") == 2000LL * 1000000);
	CHECK(hc_int(spec, "ShmSize") == 256LL << 20);
	/* no host network, PID or IPC namespace */
	CHECK_STR(hc_str(spec, "NetworkMode"), in.network);
	CHECK_STR(hc_str(spec, "IpcMode"), "private");
	CHECK_STR(hc_str(spec, "PidMode"), "");
	CHECK_STR(hc_str(spec, "CgroupnsMode"), "private");
	CHECK(json_object_get(hc, "UsernsMode") == NULL);
	/* the platform user's uid, never root */
	CHECK_STR(json_string_value(json_object_get(spec, "User")), "100042:100042");
	CHECK_STR(json_string_value(json_object_get(spec, "WorkingDir")), "/home/alice");
	CHECK_STR(json_string_value(json_object_get(spec, "Hostname")), in.name);
	CHECK_STR(json_string_value(json_object_get(spec, "Image")), in.image);
	/* no GPUs: none visible, no devices, no runtime */
	CHECK(json_array_size(json_object_get(hc, "Devices")) == 0);
	CHECK(json_object_get(hc, "Runtime") == NULL);
	CHECK(json_object_get(hc, "DeviceRequests") == NULL);
	{
		const char *v = NULL;
		CHECK(env_count(spec, "NVIDIA_VISIBLE_DEVICES=", &v) == 1);
		CHECK_STR(v, "void");
	}
	CHECK(json_object_get(spec, "Cmd") == NULL);
	json_decref(spec);
	/* a job runs in its directory, and its id is not an instance's */
	in.workdir = "/home/alice/jobs/7-train";
	in.kind = "job";
	spec = spec_build(&in, NULL, 0);
	CHECK_STR(json_string_value(json_object_get(spec, "WorkingDir")),
	          "/home/alice/jobs/7-train");
	CHECK(env_count(spec, "GPUCLOUD_INSTANCE_ID=", NULL) == 0);
	json_decref(spec);
}

TEST(declared_devices)
{
	struct spec_input in;
	struct spec_gpu g[2] = {
		{ "GPU-aaa", { "/dev/nvidia3", "/dev/nvidiactl", "/dev/nvidia-uvm" }, 3 },
		{ "GPU-bbb", { "/dev/nvidia5" }, 1 },
	};
	json_t *spec, *devs, *d;
	const char *v = NULL;
	char sig[600];

	base_input(&in);
	in.gpus = g;
	in.ngpus = 2;
	spec = spec_build(&in, sig, sizeof(sig));
	devs = json_object_get(json_object_get(spec, "HostConfig"), "Devices");
	/* exactly the allocated GPUs' files, renumbered from 0 */
	CHECK(json_array_size(devs) == 4);
	d = json_array_get(devs, 0);
	CHECK_STR(json_string_value(json_object_get(d, "PathOnHost")), "/dev/nvidia3");
	CHECK_STR(json_string_value(json_object_get(d, "PathInContainer")), "/dev/nvidia0");
	CHECK_STR(json_string_value(json_object_get(d, "CgroupPermissions")), "rwm");
	d = json_array_get(devs, 1);
	CHECK_STR(json_string_value(json_object_get(d, "PathInContainer")), "/dev/nvidiactl");
	d = json_array_get(devs, 3);
	CHECK_STR(json_string_value(json_object_get(d, "PathOnHost")), "/dev/nvidia5");
	CHECK_STR(json_string_value(json_object_get(d, "PathInContainer")), "/dev/nvidia1");
	CHECK(env_count(spec, "CUDA_VISIBLE_DEVICES=", &v) == 1);
	CHECK_STR(v, "0,1");
	CHECK(env_count(spec, "NVIDIA_VISIBLE_DEVICES=", &v) == 1);
	CHECK_STR(v, "void");
	CHECK(json_object_get(json_object_get(spec, "HostConfig"), "Runtime") == NULL);
	CHECK(strcmp(sig, "3|GPU-aaa,GPU-bbb|net=gpucloud-c0ffee00-1111-2222-3333-444455556666-"
	                  "u42") == 0);
	json_decref(spec);
}

TEST(discovered_devices)
{
	struct spec_input in;
	struct spec_gpu g[2] = { { "GPU-aaa", { NULL }, 0 }, { "MIG-ccc", { NULL }, 0 } };
	json_t *spec, *hc, *req;
	const char *v = NULL;

	base_input(&in);
	in.gpus = g;
	in.ngpus = 2;
	spec = spec_build(&in, NULL, 0);
	hc = json_object_get(spec, "HostConfig");
	CHECK(json_array_size(json_object_get(hc, "Devices")) == 0);
	CHECK_STR(json_string_value(json_object_get(hc, "Runtime")), "nvidia");
	req = json_array_get(json_object_get(hc, "DeviceRequests"), 0);
	CHECK(json_array_size(json_object_get(hc, "DeviceRequests")) == 1);
	CHECK(json_array_size(json_object_get(req, "DeviceIDs")) == 2);
	CHECK_STR(json_string_value(json_array_get(json_object_get(req, "DeviceIDs"), 0)),
	          "GPU-aaa");
	CHECK_STR(json_string_value(json_array_get(json_object_get(req, "DeviceIDs"), 1)),
	          "MIG-ccc");
	CHECK(env_count(spec, "NVIDIA_VISIBLE_DEVICES=", &v) == 1);
	CHECK_STR(v, "GPU-aaa,MIG-ccc");
	CHECK(env_count(spec, "CUDA_VISIBLE_DEVICES=", &v) == 1);
	CHECK_STR(v, "GPU-aaa,MIG-ccc");
	json_decref(spec);
}

TEST(env_reserved)
{
	struct spec_input in;
	json_t *env = J("{\"NVIDIA_VISIBLE_DEVICES\":\"all\",\"CUDA_VISIBLE_DEVICES\":\"0,1,2\","
	                "\"NVIDIA_DRIVER_CAPABILITIES\":\"all\",\"GPUCLOUD_APP_TOKEN\":\"mine\","
	                "\"GPUCLOUD_INSTANCE_ID\":\"1\",\"GPUCLOUD_LOGDIR\":\"/etc\","
	                "\"HOME\":\"/root\",\"USER\":\"root\",\"FOO\":\"bar\",\"N\":1}");
	json_t *plat = J("{\"GPUCLOUD_LOGDIR\":\"/home/alice/runs\","
	                 "\"NVIDIA_VISIBLE_DEVICES\":\"all\",\"GPUCLOUD_APP_TOKEN\":\"x\"}");
	json_t *spec;
	const char *v = NULL;

	base_input(&in);
	in.env = env;
	spec = spec_build(&in, NULL, 0);
	/* each platform variable once, with the platform's value */
	CHECK(env_count(spec, "NVIDIA_VISIBLE_DEVICES=", &v) == 1);
	CHECK_STR(v, "void");
	CHECK(env_count(spec, "CUDA_VISIBLE_DEVICES=", &v) == 1);
	CHECK_STR(v, "");
	CHECK(env_count(spec, "NVIDIA_DRIVER_CAPABILITIES=", NULL) == 0);
	CHECK(env_count(spec, "GPUCLOUD_APP_TOKEN=", &v) == 1);
	CHECK_STR(v, "tok");
	CHECK(env_count(spec, "GPUCLOUD_INSTANCE_ID=", &v) == 1);
	CHECK_STR(v, "7");
	CHECK(env_count(spec, "GPUCLOUD_LOGDIR=", NULL) == 0); /* GPUCLOUD_* is ours */
	CHECK(env_count(spec, "HOME=", &v) == 1);
	CHECK_STR(v, "/home/alice");
	CHECK(env_count(spec, "USER=", &v) == 1);
	CHECK_STR(v, "alice");
	CHECK(env_count(spec, "FOO=", &v) == 1);
	CHECK_STR(v, "bar");
	CHECK(env_count(spec, "N=", NULL) == 0); /* strings only */
	json_decref(spec);
	/* the kind's own variables may use GPUCLOUD_*, not the platform's */
	base_input(&in);
	in.platform_env = plat;
	spec = spec_build(&in, NULL, 0);
	CHECK(env_count(spec, "GPUCLOUD_LOGDIR=", &v) == 1);
	CHECK_STR(v, "/home/alice/runs");
	CHECK(env_count(spec, "NVIDIA_VISIBLE_DEVICES=", &v) == 1);
	CHECK_STR(v, "void");
	CHECK(env_count(spec, "GPUCLOUD_APP_TOKEN=", &v) == 1);
	CHECK_STR(v, "tok");
	json_decref(spec);
	CHECK(spec_env_reserved("GPUCLOUD_ANYTHING"));
	CHECK(spec_env_reserved("NVIDIA_VISIBLE_DEVICES"));
	CHECK(spec_env_reserved("CUDA_VISIBLE_DEVICES"));
	CHECK(!spec_env_reserved("CUDA_HOME"));
	CHECK(!spec_env_reserved("PATH"));
	json_decref(env);
	json_decref(plat);
}

/* A Jupyter image gets JUPYTER_TOKEN = the app token (the proxy's), so it
 * opens signed in with its own command; the user cannot override it there,
 * and other images get no JUPYTER_TOKEN from the platform. */
TEST(jupyter_token)
{
	struct spec_input in;
	json_t *env = J("{\"JUPYTER_TOKEN\":\"mine\",\"FOO\":\"bar\"}");
	json_t *ports = J("[{\"name\":\"tensorboard\",\"port\":6006},"
	                  "{\"name\":\"jupyter\",\"port\":8888}]");
	json_t *other = J("[{\"name\":\"jupyterlab\",\"port\":8888}]");
	json_t *spec;
	const char *v = NULL;

	CHECK(spec_jupyter("jupyter", NULL));
	CHECK(spec_jupyter("Jupyter", other));
	CHECK(spec_jupyter("pytorch", ports));
	CHECK(spec_jupyter(NULL, ports));
	CHECK(!spec_jupyter("pytorch", other));
	CHECK(!spec_jupyter("", NULL));
	CHECK(!spec_jupyter(NULL, NULL));
	base_input(&in);
	in.env = env;
	in.jupyter = 1;
	spec = spec_build(&in, NULL, 0);
	CHECK(env_count(spec, "JUPYTER_TOKEN=", &v) == 1);
	CHECK_STR(v, "tok");
	CHECK(env_count(spec, "FOO=", &v) == 1);
	json_decref(spec);
	base_input(&in);
	in.env = env;
	spec = spec_build(&in, NULL, 0);
	CHECK(env_count(spec, "JUPYTER_TOKEN=", &v) == 1);
	CHECK_STR(v, "mine"); /* not a Jupyter: the user's own variable */
	json_decref(spec);
	json_decref(env);
	json_decref(ports);
	json_decref(other);
}

TEST(binds_and_ports)
{
	struct spec_input in;
	json_t *binds = J("[\"/srv/gc/home/alice:/home/alice:rw\",\"/srv/gc/shared:/shared:ro\"]");
	json_t *ports = J("[{\"name\":\"jupyter\",\"port\":8888},{\"name\":\"tb\",\"port\":6006}]");
	json_t *cmd = J("[\"jupyter\",\"lab\"]");
	json_t *spec, *hc, *pb;

	base_input(&in);
	in.binds = binds;
	in.app_ports = ports;
	in.cmd = cmd;
	spec = spec_build(&in, NULL, 0);
	hc = json_object_get(spec, "HostConfig");
	/* the user's storage, exactly, and nothing else mounted */
	CHECK(json_equal(json_object_get(hc, "Binds"), binds));
	CHECK(json_object_get(hc, "Mounts") == NULL);
	CHECK(json_object_get(spec, "Volumes") == NULL);
	{
		char *doc = json_dumps(spec, 0);
		CHECK(doc && strstr(doc, "docker.sock") == NULL);
		free(doc);
	}
	pb = json_object_get(hc, "PortBindings");
	CHECK(json_object_size(pb) == 2);
	CHECK_STR(json_string_value(json_object_get(
	                  json_array_get(json_object_get(pb, "8888/tcp"), 0), "HostIp")),
	          "127.0.0.1");
	CHECK_STR(json_string_value(json_object_get(
	                  json_array_get(json_object_get(pb, "6006/tcp"), 0), "HostPort")),
	          "");
	CHECK(json_object_size(json_object_get(spec, "ExposedPorts")) == 2);
	CHECK(json_equal(json_object_get(spec, "Cmd"), cmd));
	json_decref(spec);
	json_decref(binds);
	json_decref(ports);
	json_decref(cmd);
}

TEST(labels)
{
	struct spec_input in;
	json_t *spec, *l;
	char sig[600];

	base_input(&in);
	in.kind = "tensorboard";
	spec = spec_build(&in, sig, sizeof(sig));
	l = json_object_get(spec, "Labels");
	CHECK(json_object_size(l) == 5);
	CHECK_STR(json_string_value(json_object_get(l, "gpucloud.cluster")), in.cluster);
	CHECK_STR(json_string_value(json_object_get(l, "gpucloud.kind")), "tensorboard");
	CHECK_STR(json_string_value(json_object_get(l, "gpucloud.id")), "7");
	CHECK_STR(json_string_value(json_object_get(l, "gpucloud.owner")), "alice");
	CHECK_STR(json_string_value(json_object_get(l, "gpucloud.sig")), sig);
	CHECK_STR(sig, "3||net=gpucloud-c0ffee00-1111-2222-3333-444455556666-u42");
	json_decref(spec);
}

/* Class areas (storage_class_binds()): the class groups are supplementary
 * groups, and the mounts are part of the signature, so a container made
 * while its owner was in a class is not reused once they are not. */
TEST(class_groups)
{
	struct spec_input in;
	json_t *spec, *groups = json_pack("[s, s]", "300000003", "300000005");
	char sig[600];

	base_input(&in);
	spec = spec_build(&in, sig, sizeof(sig));
	CHECK(json_object_get(json_object_get(spec, "HostConfig"), "GroupAdd") == NULL);
	json_decref(spec);
	in.groups = groups;
	in.classes = "3r,5w";
	spec = spec_build(&in, sig, sizeof(sig));
	CHECK(json_equal(json_object_get(json_object_get(spec, "HostConfig"), "GroupAdd"), groups));
	CHECK(strstr(sig, "|cls=3r,5w") != NULL);
	/* the user stays uid:uid; the groups only add */
	CHECK_STR(json_string_value(json_object_get(spec, "User")), "100042:100042");
	json_decref(spec);
	json_decref(groups);
}

TEST(publish_host)
{
	char h[256];

	spec_publish_host("unix:///var/run/docker.sock", "10.0.0.9", h, sizeof(h));
	CHECK_STR(h, "127.0.0.1");
	spec_publish_host("tcp://node7.example:2376", NULL, h, sizeof(h));
	CHECK_STR(h, "node7.example");
	spec_publish_host("tcp://node7.example:2376", "", h, sizeof(h));
	CHECK_STR(h, "node7.example");
	spec_publish_host("tcp://node7.example:2376", "10.0.0.9", h, sizeof(h));
	CHECK_STR(h, "10.0.0.9");
	spec_publish_host(NULL, NULL, h, sizeof(h));
	CHECK_STR(h, "127.0.0.1");
}

int main(void)
{
	RUN(hardening);
	RUN(declared_devices);
	RUN(discovered_devices);
	RUN(env_reserved);
	RUN(jupyter_token);
	RUN(binds_and_ports);
	RUN(labels);
	RUN(class_groups);
	RUN(publish_host);
	return harness_done("test_spec");
}
