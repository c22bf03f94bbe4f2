/* Sleep-based delays for the wait-state test programs: a sleeping rank leaves
 * its core to the ranks that spin in MPI, so the waits do not depend on free cores. */
#include <stdlib.h>
#include <time.h>

static void sleep_ms(double ms)
{
    struct timespec ts = {(time_t)(ms / 1000), (long)((ms - 1000.0 * (time_t)(ms / 1000)) * 1e6)};
    while (nanosleep(&ts, &ts) != 0) {
    }
}

/* argv[i] as a number, or the default */
static double arg(int argc, char **argv, int i, double fallback)
{
    return argc > i ? atof(argv[i]) : fallback;
}
