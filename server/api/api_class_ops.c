/* api_class_ops.c — teacher reach: the class's work, notices, the class dashboard, end of term.
 */
#include "api/api.h"

const struct route api_class_ops_routes[] = {
	{ 0, NULL, NULL, 0, 0, 0, NULL },
};
