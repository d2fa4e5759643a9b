/* fuzz_ddp.c — libFuzzer target for what a distributed job reads from node
 * labels (admin input): the ddp.subnet range and the nccl.* labels.
 *
 * The input is "range\nlabels-json" (either part may be garbage).
 * Checked: ddp_addresses() either refuses or gives a /27 whose gateway is
 * its first address and whose member addresses are the 2+r-th, all inside
 * the /27 and, as text, dotted quads; ddp_net_body() is made exactly when
 * the range is accepted, with at most DDP_SLOTS subnets; ddp_env() sets
 * only NCCL_* and the fixed names, each a valid variable name (no '=',
 * no newline in a value from a label).
 */
#include "work/ddp.c"

#include <arpa/inet.h>
#include <assert.h>
#include <stdint.h>
#include <stdlib.h>

static unsigned long ip_of(const char *s)
{
	struct in_addr a;

	assert(inet_pton(AF_INET, s, &a) == 1);
	return (unsigned long)ntohl(a.s_addr);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	char buf[512], sub[40], gw[20], addr[20], net[40];
	const char *nl;
	size_t n = size < sizeof(buf) - 1 ? size : sizeof(buf) - 1;
	long long id;
	json_t *labels, *env, *body, *v;
	const char *k;

	memcpy(buf, data, n);
	buf[n] = '\0';
	nl = strchr(buf, '\n');
	if (nl)
		buf[nl - buf] = '\0';
	id = n ? (long long)data[0] * 977 : 0;
	for (int r = -1; r <= DDP_MAX_MEMBERS; r++) {
		if (ddp_addresses(buf, id, r, sub, sizeof(sub), gw, sizeof(gw), addr,
		                  sizeof(addr)) < 0) {
			assert(r < 0 || r >= DDP_MAX_MEMBERS ||
			       ddp_net_body("n", "p", buf, "c") == NULL);
			continue;
		}
		assert(r >= 0 && r < DDP_MAX_MEMBERS);
		snprintf(net, sizeof(net), "%s", sub);
		assert(strlen(net) > 3 && strcmp(net + strlen(net) - 3, "/27") == 0);
		net[strlen(net) - 3] = '\0';
		assert((ip_of(net) & 31) == 0);
		assert(ip_of(gw) == ip_of(net) + 1);
		assert(ip_of(addr) == ip_of(net) + 2 + (unsigned long)r);
		if (r == 0) {
			body = ddp_net_body("n", "p", buf, "c");
			assert(body);
			assert(json_array_size(json_object_get(json_object_get(body, "IPAM"),
			                                       "Config")) <= DDP_SLOTS);
			json_decref(body);
		}
	}
	labels = nl ? json_loads(nl + 1, 0, NULL) : NULL;
	env = json_object();
	ddp_env(env, json_is_object(labels) ? labels : NULL, "10.0.0.2", 2, 1);
	json_object_foreach(env, k, v)
	{
		assert(*k && !strchr(k, '='));
		assert(strspn(k, "ABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789_") == strlen(k));
		assert(json_is_string(v) && !strchr(json_string_value(v), '\n'));
	}
	json_decref(env);
	json_decref(labels);
	return 0;
}
