/* test_storage.c — what storage says of its own enforcement. Project quotas
 * are detected on the data root's filesystem but never set by gpucloudd, so
 * the answer must say software alone even where the kernel could enforce
 * (it said "kernel+software" and the admin page promised limits inside
 * containers that nothing applied). */
#include "storage/storage.c"

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

int main(void)
{
	RUN(detected_project_quotas_are_not_claimed_as_enforced);
	return harness_done("test_storage");
}
