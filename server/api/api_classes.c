/* api_classes.c — classes: the class object, its allocation and limits, the roster (CSV import, invites, roles, suspension).
 */
#include "api/api.h"

const struct route api_classes_routes[] = {
	{ 0, NULL, NULL, 0, 0, 0, NULL },
};
