/* api_usage.c — /usage (issue 15; being built). */
#include "api/api.h"

const struct route api_usage_routes[] = {
	{ 0, NULL, NULL, 0, 0, 0, NULL },
};
