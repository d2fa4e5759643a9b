/* api_class_sessions.c — lab sessions: time windows reserving slices of the class's pool for its members.
 */
#include "api/api.h"

const struct route api_class_sessions_routes[] = {
	{ 0, NULL, NULL, 0, 0, 0, NULL },
};
