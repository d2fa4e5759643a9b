/* api_assignments.c — assignments: release a class folder to students' homes, collect snapshots, hand back feedback.
 */
#include "api/api.h"

const struct route api_assignments_routes[] = {
	{ 0, NULL, NULL, 0, 0, 0, NULL },
};
