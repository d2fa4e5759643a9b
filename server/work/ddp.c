/* ddp.c — distributed jobs' addresses, network and environment (see
 * ddp.h).  Pure. */
#include "work/ddp.h"

#include <arpa/inet.h>
#include <ctype.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static void ip_text(unsigned long v, char *out, size_t outlen)
{
	snprintf(out, outlen, "%lu.%lu.%lu.%lu", (v >> 24) & 255, (v >> 16) & 255, (v >> 8) & 255,
	         v & 255);
}

/* The range's base and the number of /27 slots in it (at most
 * DDP_SLOTS), or -1. */
static int range_parse(const char *range, unsigned long *base, unsigned long *slots)
{
	char ip[20];
	const char *slash;
	struct in_addr a;
	char *end;
	long prefix;

	if (!range || !*range)
		range = DDP_DEFAULT_SUBNET;
	slash = strchr(range, '/');
	if (!slash || (size_t)(slash - range) >= sizeof(ip))
		return -1;
	memcpy(ip, range, (size_t)(slash - range));
	ip[slash - range] = '\0';
	prefix = strtol(slash + 1, &end, 10);
	if (*end || end == slash + 1 || prefix < 8 || prefix > 27 ||
	    inet_pton(AF_INET, ip, &a) != 1)
		return -1;
	*base = (unsigned long)ntohl(a.s_addr) & (0xffffffffUL << (32 - prefix)) & 0xffffffffUL;
	*slots = prefix <= 19 ? DDP_SLOTS : 1UL << (27 - prefix);
	return 0;
}

int ddp_addresses(const char *range, long long slot, int rank, char *subnet, size_t subnetlen,
                  char *gateway, size_t gatewaylen, char *addr, size_t addrlen)
{
	char ip[20];
	unsigned long base, slots;

	if (range_parse(range, &base, &slots) < 0 || rank < 0 || rank >= DDP_MAX_MEMBERS ||
	    slot < 0)
		return -1;
	base += ((unsigned long)slot % slots) * 32;
	ip_text(base, ip, sizeof(ip));
	snprintf(subnet, subnetlen, "%s/27", ip);
	ip_text(base + 1, gateway, gatewaylen);
	ip_text(base + 2 + (unsigned long)rank, addr, addrlen);
	return 0;
}

void ddp_net_name(const char *cluster, char *out, size_t outlen)
{
	snprintf(out, outlen, "gc-%.8s-ddp", cluster ? cluster : "");
}

json_t *ddp_net_body(const char *name, const char *parent, const char *range, const char *cluster)
{
	unsigned long base, slots;
	json_t *cfgs, *body;
	char sub[24], gw[20], ip[20];

	if (range_parse(range, &base, &slots) < 0 || !(cfgs = json_array()))
		return NULL;
	for (unsigned long i = 0; i < slots; i++) {
		ip_text(base + i * 32, ip, sizeof(ip));
		snprintf(sub, sizeof(sub), "%s/27", ip);
		ip_text(base + i * 32 + 1, gw, sizeof(gw));
		json_array_append_new(cfgs, json_pack("{s:s, s:s}", "Subnet", sub, "Gateway", gw));
	}
	body = json_pack("{s:s, s:b, s:s, s:{s:s}, s:{s:s, s:o}, s:{s:s, s:s}}", "Name", name,
	                 "CheckDuplicate", 1, "Driver", "macvlan", "Options", "parent", parent,
	                 "IPAM", "Driver", "default", "Config", cfgs, "Labels", "gpucloud.cluster",
	                 cluster, "gpucloud.kind", "network");
	return body;
}

static void set(json_t *env, const char *k, const char *v)
{
	json_object_set_new(env, k, json_string(v));
}

void ddp_env(json_t *env, const json_t *labels, const char *master_addr, int members, int rank)
{
	char num[16], key[80];
	const char *k, *ifname = "eth0";
	json_t *v;

	set(env, "MASTER_ADDR", master_addr);
	snprintf(num, sizeof(num), "%d", DDP_MASTER_PORT);
	set(env, "MASTER_PORT", num);
	snprintf(num, sizeof(num), "%d", members);
	set(env, "WORLD_SIZE", num);
	snprintf(num, sizeof(num), "%d", rank);
	set(env, "RANK", num);
	set(env, "NODE_RANK", num);
	set(env, "LOCAL_RANK", "0");
	set(env, "NPROC_PER_NODE", "1");
	set(env, "LOCAL_WORLD_SIZE", "1");
	json_object_foreach((json_t *)labels, k, v)
	{
		const char *s = json_string_value(v);
		size_t i, n;
		if (!s)
			continue;
		if (strcmp(k, "ib") == 0 && strcmp(s, "false") == 0) {
			set(env, "NCCL_IB_DISABLE", "1");
			continue;
		}
		if (strncmp(k, "nccl.", 5) != 0 || !k[5] || strlen(k) > 60)
			continue;
		n = strspn(k + 5, "abcdefghijklmnopqrstuvwxyz0123456789_");
		if (k[5 + n] || strchr(s, '\n'))
			continue;
		snprintf(key, sizeof(key), "NCCL_");
		for (i = 0; i < n; i++)
			key[5 + i] = (char)toupper((unsigned char)k[5 + i]);
		key[5 + n] = '\0';
		if (strcmp(key, "NCCL_SOCKET_IFNAME") == 0)
			ifname = s;
		else
			set(env, key, s);
	}
	set(env, "NCCL_SOCKET_IFNAME", ifname);
	set(env, "GLOO_SOCKET_IFNAME", ifname);
}
