/* test_storage.c — what storage says of its own enforcement. Project quotas
 * are detected on the data root's filesystem but never set by gpucloudd, so
 * the answer must say software alone even where the kernel could enforce
 * (it said "kernel+software" and the admin page promised limits inside
 * containers that nothing applied). */
#include "storage/storage.c"

#include <stdlib.h>

#include "harness.h"

TEST(detected_project_quotas_are_not_claimed_as_enforced)
{
	json_t *j;

	prj_supported = 1; /* a filesystem mounted with prjquota, a kernel that answers */
	j = storage_support_json();
	CHECK(j != NULL);
	CHECK(json_is_true(json_object_get(j, "project_quotas")));
	CHECK_STR(json_string_value(json_object_get(j, "enforcement")), "software");
	json_decref(j);
	prj_supported = 0;
	j = storage_support_json();
	CHECK_STR(json_string_value(json_object_get(j, "enforcement")), "software");
	json_decref(j);
}

/* The class areas a container gets: read-only for students, read-write
 * for teachers, at /class/<code or id>, each class's group added; the
 * directory made 02770 with its private collected/ and feedback/ 0700. */
TEST(class_binds)
{
	char tmpl[] = "/tmp/gc-storage-XXXXXX", p[1200], sig[100] = "";
	char err[300] = "";
	json_t *classes =
	        json_pack("[{s:i, s:s, s:i, s:b}, {s:i, s:n, s:i, s:b}]", "id", 3, "code", "DL101",
	                  "teacher", 9, "write", 0, "id", 5, "code", "teacher", 9, "write", 1);
	json_t *binds = json_array(), *groups = json_array();
	struct stat st;

	CHECK(mkdtemp(tmpl) != NULL);
	cfg.data_root = tmpl;
	CHECK(storage_class_binds(classes, binds, groups, sig, sizeof(sig), err, sizeof(err)) == 0);
	snprintf(p, sizeof(p), "%s/classes/3:/class/DL101:ro", tmpl);
	CHECK_STR(json_string_value(json_array_get(binds, 0)), p);
	snprintf(p, sizeof(p), "%s/classes/5:/class/5:rw", tmpl);
	CHECK_STR(json_string_value(json_array_get(binds, 1)), p);
	snprintf(p, sizeof(p), "%lld", storage_class_gid(3));
	CHECK_STR(json_string_value(json_array_get(groups, 0)), p);
	CHECK_STR(sig, "3r,5w");
	snprintf(p, sizeof(p), "%s/classes/3", tmpl);
	CHECK(stat(p, &st) == 0 && (st.st_mode & 07777) == 02770);
	CHECK(st.st_gid == (gid_t)storage_class_gid(3) && st.st_uid == (uid_t)storage_uid(9));
	snprintf(p, sizeof(p), "%s/classes/3/collected", tmpl);
	CHECK(stat(p, &st) == 0 && (st.st_mode & 07777) == 0700);
	snprintf(p, sizeof(p), "%s/classes/3/feedback", tmpl);
	CHECK(stat(p, &st) == 0 && (st.st_mode & 07777) == 0700);
	CHECK(storage_class_private_path("collected"));
	CHECK(storage_class_private_path("feedback/hw1/bob"));
	CHECK(!storage_class_private_path("collectedX"));
	CHECK(!storage_class_private_path("hw1/collected"));
	cfg.data_root = NULL;
	json_decref(classes);
	json_decref(binds);
	json_decref(groups);
	{
		const char *made[] = { "classes/3/collected",
			               "classes/3/feedback",
			               "classes/3",
			               "classes/5/collected",
			               "classes/5/feedback",
			               "classes/5",
			               "classes",
			               "" };
		for (size_t i = 0; i < sizeof(made) / sizeof(made[0]); i++) {
			snprintf(p, sizeof(p), "%s/%s", tmpl, made[i]);
			CHECK(rmdir(p) == 0);
		}
	}
}

int main(void)
{
	RUN(class_binds);
	RUN(detected_project_quotas_are_not_claimed_as_enforced);
	return harness_done("test_storage");
}
