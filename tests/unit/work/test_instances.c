/* test_instances.c — the pure parts of the instance modules: the state
 * machine's edges, the exit code in an engine listing's Status, and CPU use
 * from an engine stats document.
 */
#include <jansson.h>

#include "harness.h"
#include "work/reclaim.h"
#include "work/reconcile.h"
#include "work/workload.h"

/* The edge between two stored state names (unknown names have none). */
static int instances_transition_ok(const char *from, const char *to)
{
	int f = workload_state_parse(from), t = workload_state_parse(to);

	return f >= 0 && t >= 0 && workload_edge_ok((enum workload_state)f, (enum workload_state)t);
}

TEST(edges)
{
	CHECK(instances_transition_ok("queued", "pulling"));
	CHECK(instances_transition_ok("pulling", "creating"));
	CHECK(instances_transition_ok("creating", "running"));
	CHECK(instances_transition_ok("running", "stopping"));
	CHECK(instances_transition_ok("stopping", "stopped"));
	CHECK(instances_transition_ok("running", "failed"));
	CHECK(instances_transition_ok("running", "lost"));
	CHECK(instances_transition_ok("stopped", "queued"));
	CHECK(instances_transition_ok("lost", "queued"));
	CHECK(instances_transition_ok("failed", "deleted"));
	/* no shortcuts around the engine work */
	CHECK(!instances_transition_ok("queued", "running"));
	CHECK(!instances_transition_ok("stopped", "running"));
	CHECK(!instances_transition_ok("pulling", "stopped"));
	CHECK(!instances_transition_ok("deleted", "queued"));
	CHECK(!instances_transition_ok("deleted", "running"));
	CHECK(!instances_transition_ok("running", "queued"));
	CHECK(!instances_transition_ok("", "queued"));
	CHECK(!instances_transition_ok("queued", "nonsense"));
	/* jobs: queued → starting → running → succeeded | failed | cancelled |
	 * lost, cancel and the runtime limit through stopping */
	CHECK(instances_transition_ok("queued", "starting"));
	CHECK(instances_transition_ok("queued", "cancelled"));
	CHECK(instances_transition_ok("starting", "running"));
	CHECK(instances_transition_ok("starting", "failed"));
	CHECK(instances_transition_ok("running", "succeeded"));
	CHECK(instances_transition_ok("running", "stopping"));
	CHECK(instances_transition_ok("stopping", "cancelled"));
	CHECK(instances_transition_ok("stopping", "failed"));
	/* a job's end is final; nothing succeeds before it ran */
	CHECK(!instances_transition_ok("succeeded", "queued"));
	CHECK(!instances_transition_ok("cancelled", "running"));
	CHECK(!instances_transition_ok("queued", "succeeded"));
	CHECK(!instances_transition_ok("starting", "succeeded"));
	CHECK(!instances_transition_ok("running", "cancelled"));
}

TEST(exit_codes)
{
	CHECK(reconcile_exit_code("Exited (0) 3 seconds ago") == 0);
	CHECK(reconcile_exit_code("Exited (137) About a minute ago") == 137);
	CHECK(reconcile_exit_code("Exited (1) 2 hours ago") == 1);
	CHECK(reconcile_exit_code("Up 3 seconds") == -1);
	CHECK(reconcile_exit_code("Created") == -1);
	CHECK(reconcile_exit_code("") == -1);
	CHECK(reconcile_exit_code(NULL) == -1);
	CHECK(reconcile_exit_code("Exited (") == -1);
}

static double pct(const char *doc)
{
	json_t *j = json_loads(doc, 0, NULL);
	double v = reclaim_cpu_percent(j);

	json_decref(j);
	return v;
}

TEST(cpu_percent)
{
	/* half of one core's worth over the interval on a 2-CPU machine */
	double v = pct("{\"cpu_stats\":{\"cpu_usage\":{\"total_usage\":1500000000},"
	               "\"system_cpu_usage\":20000000000,\"online_cpus\":2},"
	               "\"precpu_stats\":{\"cpu_usage\":{\"total_usage\":1000000000},"
	               "\"system_cpu_usage\":18000000000}}");
	CHECK(v > 49.9 && v < 50.1);
	/* a busy core */
	v = pct("{\"cpu_stats\":{\"cpu_usage\":{\"total_usage\":2000000000},"
	        "\"system_cpu_usage\":20000000000,\"online_cpus\":2},"
	        "\"precpu_stats\":{\"cpu_usage\":{\"total_usage\":1000000000},"
	        "\"system_cpu_usage\":18000000000}}");
	CHECK(v > 99.9 && v < 100.1);
	/* online_cpus missing: the per-CPU list counts */
	v = pct("{\"cpu_stats\":{\"cpu_usage\":{\"total_usage\":2000000000,"
	        "\"percpu_usage\":[1,1,1,1]},\"system_cpu_usage\":20000000000},"
	        "\"precpu_stats\":{\"cpu_usage\":{\"total_usage\":1000000000},"
	        "\"system_cpu_usage\":18000000000}}");
	CHECK(v > 199.9 && v < 200.1);
	/* the first sample of a container: no previous one */
	CHECK(pct("{\"cpu_stats\":{\"cpu_usage\":{\"total_usage\":5},\"system_cpu_usage\":9,"
	          "\"online_cpus\":2},\"precpu_stats\":{\"cpu_usage\":{}}}") < 0);
	CHECK(pct("{}") < 0);
	CHECK(pct("[]") < 0);
	CHECK(reclaim_cpu_percent(NULL) < 0);
	/* counters going backwards (a restarted container) */
	CHECK(pct("{\"cpu_stats\":{\"cpu_usage\":{\"total_usage\":1},\"system_cpu_usage\":30,"
	          "\"online_cpus\":2},\"precpu_stats\":{\"cpu_usage\":{\"total_usage\":5},"
	          "\"system_cpu_usage\":20}}") < 0);
}

/* The table holds the 35 edges that were written out by hand, no more. */
TEST(edge_count)
{
	int n = 0;

	for (int f = 0; f < WL__COUNT; f++)
		for (int t = 0; t < WL__COUNT; t++)
			n += workload_edge_ok((enum workload_state)f, (enum workload_state)t);
	CHECK(n == 35 + 11); /* instances, then jobs (starting, succeeded, cancelled) */
	CHECK(!workload_edge_ok(WL_DELETED, WL_QUEUED));
	CHECK(!workload_edge_ok(WL__COUNT, WL_QUEUED));
	CHECK_STR(workload_state_name(WL_CREATING), "creating");
	CHECK(workload_state_parse("lost") == WL_LOST);
	CHECK(workload_state_parse("Lost") == -1);
	CHECK(workload_state_parse(NULL) == -1);
}

int main(void)
{
	RUN(edges);
	RUN(edge_count);
	RUN(exit_codes);
	RUN(cpu_percent);
	return harness_done("test_instances");
}
