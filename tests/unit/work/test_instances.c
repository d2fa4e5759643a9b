/* test_instances.c — the pure parts of the instance modules: the state
 * machine's edges, the exit code in an engine listing's Status, and CPU use
 * from an engine stats document.
 */
#include <jansson.h>

#include "harness.h"
#include "work/instances.h"
#include "work/reclaim.h"
#include "work/reconcile.h"

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

int main(void)
{
	RUN(edges);
	RUN(exit_codes);
	RUN(cpu_percent);
	return harness_done("test_instances");
}
