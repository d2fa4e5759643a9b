/* clock.c — monotonic time for timeouts and durations (see clock.h).  It owns
 * no state; wall-clock time is not its business.
 */
#include "base/clock.h"

#include <time.h>

double clock_now_s(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (double)ts.tv_sec + (double)ts.tv_nsec / 1e9;
}

double clock_now_ms(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (double)ts.tv_sec * 1e3 + (double)ts.tv_nsec / 1e6;
}
