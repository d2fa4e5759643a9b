/* spec.c — the container spec (see spec.h).
 *
 * Owns: the shape of every create body gpucloudd sends.  Does not own:
 * where the values come from (the driver reads them from the database,
 * storage.c makes the binds) nor sending it (the driver).
 */
#include "work/spec.h"

#include <stdio.h>
#include <string.h>
#include <strings.h>

/* Names only the platform sets, from any source. */
static int platform_only(const char *k)
{
	return strncmp(k, "NVIDIA_", 7) == 0 || strcmp(k, "CUDA_VISIBLE_DEVICES") == 0 ||
	       strcmp(k, "GPUCLOUD_APP_TOKEN") == 0 || strcmp(k, "GPUCLOUD_INSTANCE_ID") == 0 ||
	       strcmp(k, "HOME") == 0 || strcmp(k, "USER") == 0;
}

int spec_jupyter(const char *framework, const json_t *app_ports)
{
	size_t i;
	json_t *v;

	if (framework && strcasecmp(framework, "jupyter") == 0)
		return 1;
	json_array_foreach((json_t *)app_ports, i, v)
	{
		const char *n = json_string_value(json_object_get(v, "name"));
		if (n && strcmp(n, "jupyter") == 0)
			return 1;
	}
	return 0;
}

int spec_env_reserved(const char *k)
{
	return platform_only(k) || strncmp(k, "GPUCLOUD_", 9) == 0;
}

void spec_publish_host(const char *url, const char *app_bind, char *out, size_t outlen)
{
	snprintf(out, outlen, "127.0.0.1");
	if (url && strncmp(url, "tcp://", 6) == 0 && app_bind && *app_bind) {
		snprintf(out, outlen, "%s", app_bind);
	} else if (url && strncmp(url, "tcp://", 6) == 0) {
		const char *h = url + 6, *c = strrchr(h, ':');
		snprintf(out, outlen, "%.*s", (int)(c ? (size_t)(c - h) : strlen(h)), h);
	}
}

static void add_env(json_t *env, const char *k, const char *v)
{
	char buf[1400];

	snprintf(buf, sizeof(buf), "%s=%s", k, v);
	json_array_append_new(env, json_string(buf));
}

static void append(char *buf, size_t len, const char *sep, const char *s)
{
	size_t n = strlen(buf);

	if (n < len)
		snprintf(buf + n, len - n, "%s%s", sep, s);
}

/* The GPUs: Devices (declared GPUs' files, renumbered from 0 in allocation
 * order, which is what CUDA_VISIBLE_DEVICES says) and the visible-devices
 * variables; a discovered GPU goes by UUID through the NVIDIA runtime. */
static int gpus(const struct spec_input *in, json_t *devices, json_t *env, char *vis, size_t vislen,
                char *sig, size_t siglen)
{
	char cvis[1200] = "", num[16];
	int discovered = 0;

	vis[0] = '\0';
	for (int n = 0; n < in->ngpus; n++) {
		const struct spec_gpu *g = &in->gpus[n];
		const char *sep = n ? "," : "";
		append(sig, siglen, sep, g->uuid ? g->uuid : "");
		if (g->ndevices > 0) {
			for (int d = 0; d < g->ndevices && d < SPEC_MAX_DEVICES; d++) {
				char dst[64];
				const char *hp = g->devices[d], *bn;
				if (!hp)
					continue;
				bn = strrchr(hp, '/') ? strrchr(hp, '/') + 1 : hp;
				if (d == 0)
					snprintf(dst, sizeof(dst), "/dev/nvidia%d", n);
				else
					snprintf(dst, sizeof(dst), "/dev/%.50s", bn);
				json_array_append_new(devices,
				                      json_pack("{s:s, s:s, s:s}", "PathOnHost", hp,
				                                "PathInContainer", dst,
				                                "CgroupPermissions", "rwm"));
			}
			snprintf(num, sizeof(num), "%d", n);
			append(cvis, sizeof(cvis), sep, num);
		} else {
			discovered = 1;
			append(vis, vislen, sep, g->uuid ? g->uuid : "");
		}
	}
	if (discovered) {
		add_env(env, "NVIDIA_VISIBLE_DEVICES", vis);
		add_env(env, "CUDA_VISIBLE_DEVICES", vis);
		json_array_append_new(env,
		                      json_string("NVIDIA_DRIVER_CAPABILITIES=compute,utility"));
	} else {
		json_array_append_new(env, json_string("NVIDIA_VISIBLE_DEVICES=void"));
		add_env(env, "CUDA_VISIBLE_DEVICES", cvis);
	}
	return discovered;
}

json_t *spec_build(const struct spec_input *in, char *sig_out, size_t sig_len)
{
	json_t *env = json_array(), *devices = json_array(), *exposed = json_object();
	json_t *pb = json_object(), *binds = json_array(), *labels = NULL, *hc = NULL;
	json_t *spec = NULL, *v;
	const json_t *srcs[2] = { in->env, in->platform_env };
	char buf[1200], user[64], sig[600], vis[1200];
	const char *k;
	size_t i;
	int discovered;

	if (!env || !devices || !exposed || !pb || !binds)
		goto out;
	/* the user's variables, then the kind's, then the platform's */
	for (int s = 0; s < 2; s++)
		json_object_foreach((json_t *)srcs[s], k, v)
		{
			if ((s == 0 ? spec_env_reserved(k) : platform_only(k)) ||
			    (in->jupyter && strcmp(k, "JUPYTER_TOKEN") == 0) || !json_is_string(v))
				continue;
			add_env(env, k, json_string_value(v));
		}
	snprintf(sig, sizeof(sig), "%lld|", in->image_id);
	discovered = gpus(in, devices, env, vis, sizeof(vis), sig, sizeof(sig));
	/* containers made before per-user networks are not reused */
	append(sig, sizeof(sig), "|net=", in->network);
	if (in->ipv4)
		append(sig, sizeof(sig), "@", in->ipv4);
	/* a member removed from a class must not get its old container back */
	if (in->classes && *in->classes)
		append(sig, sizeof(sig), "|cls=", in->classes);
	add_env(env, "GPUCLOUD_APP_TOKEN", in->app_token ? in->app_token : "");
	/* Jupyter reads its token from JUPYTER_TOKEN: the proxy's token signs
	 * the browser in, whatever command the image runs */
	if (in->jupyter)
		add_env(env, "JUPYTER_TOKEN", in->app_token ? in->app_token : "");
	snprintf(buf, sizeof(buf), "%lld", in->id);
	/* a job's id is another number space: jobs.c sets GPUCLOUD_JOB_ID */
	if (!in->kind || strcmp(in->kind, "job") != 0)
		add_env(env, "GPUCLOUD_INSTANCE_ID", buf);
	snprintf(buf, sizeof(buf), "/home/%s", in->owner);
	add_env(env, "HOME", buf);
	add_env(env, "USER", in->owner);
	json_array_foreach((json_t *)in->app_ports, i, v)
	{
		char key[32];
		snprintf(key, sizeof(key), "%lld/tcp",
		         (long long)json_integer_value(json_object_get(v, "port")));
		json_object_set_new(exposed, key, json_object());
		json_object_set_new(pb, key,
		                    json_pack("[{s:s, s:s}]", "HostIp", in->host, "HostPort", ""));
	}
	json_array_foreach((json_t *)in->binds, i, v)
	{
		if (json_is_string(v))
			json_array_append_new(binds, json_string(json_string_value(v)));
	}
	snprintf(user, sizeof(user), "%lld:%lld", in->uid, in->uid);
	snprintf(buf, sizeof(buf), "%lld", in->id);
	labels = json_pack("{s:s, s:s, s:s, s:s, s:s}", "gpucloud.cluster", in->cluster,
	                   "gpucloud.kind", in->kind, "gpucloud.id", buf, "gpucloud.owner",
	                   in->owner, "gpucloud.sig", sig);
	hc = json_pack(
	        "{s:b, s:[s], s:[s], s:I, s:I, s:I, s:I, s:I, s:s, s:o, s:o, s:o,"
	        " s:{s:s}, s:s, s:s, s:s, s:b}",
	        "Privileged", 0, "CapDrop", "ALL", "SecurityOpt", "no-new-privileges", "PidsLimit",
	        (json_int_t)in->pids_limit, "Memory", (json_int_t)(in->mem_mib << 20), "MemorySwap",
	        (json_int_t)(in->mem_mib << 20), "NanoCpus",
	        (json_int_t)(in->cpu_millis * 1000000LL), "ShmSize",
	        (json_int_t)(in->shm_mib << 20), "NetworkMode", in->network, "Binds", binds,
	        "PortBindings", pb, "Devices", devices, "RestartPolicy", "Name", "no", "IpcMode",
	        "private", "PidMode", "", "CgroupnsMode", "private", "ReadonlyRootfs", 0);
	binds = pb = devices = NULL; /* handed off (or freed by a failed pack) */
	if (!labels || !hc)
		goto out;
	if (json_array_size(in->groups) > 0)
		json_object_set_new(hc, "GroupAdd", json_deep_copy(in->groups));
	if (discovered) {
		json_t *ids = json_array();
		char *tok, *save = NULL;
		for (tok = strtok_r(vis, ",", &save); tok; tok = strtok_r(NULL, ",", &save))
			json_array_append_new(ids, json_string(tok));
		json_object_set_new(hc, "Runtime", json_string("nvidia"));
		json_object_set_new(hc, "DeviceRequests",
		                    json_pack("[{s:s, s:o, s:[[s]]}]", "Driver", "nvidia",
		                              "DeviceIDs", ids, "Capabilities", "gpu"));
	}
	if (in->workdir)
		snprintf(buf, sizeof(buf), "%s", in->workdir);
	else
		snprintf(buf, sizeof(buf), "/home/%s", in->owner);
	spec = json_pack("{s:s, s:o, s:s, s:s, s:o, s:o, s:o, s:s}", "Image", in->image, "Env", env,
	                 "User", user, "WorkingDir", buf, "Labels", labels, "ExposedPorts", exposed,
	                 "HostConfig", hc, "Hostname", in->name);
	env = exposed = labels = hc = NULL; /* handed off */
	if (spec && in->ipv4 && in->network)
		json_object_set_new(spec, "NetworkingConfig",
		                    json_pack("{s:{s:{s:{s:s}}}}", "EndpointsConfig", in->network,
		                              "IPAMConfig", "IPv4Address", in->ipv4));
	if (spec && json_is_array(in->cmd) && json_array_size(in->cmd) > 0)
		json_object_set_new(spec, "Cmd", json_deep_copy(in->cmd));
	if (spec && sig_out)
		snprintf(sig_out, sig_len, "%s", sig);
out:
	json_decref(env);
	json_decref(devices);
	json_decref(exposed);
	json_decref(pb);
	json_decref(binds);
	json_decref(labels);
	json_decref(hc);
	return spec;
}
