#include "lib/clock.h"

static struct timespec now(void)
{
    struct timespec ts;
    /* CLOCK_MONOTONIC cannot fail on Linux for a valid pointer. */
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return ts;
}

uint64_t clock_now_usec(void)
{
    struct timespec ts = now();
    return (uint64_t)ts.tv_sec * 1000000u + (uint64_t)ts.tv_nsec / 1000u;
}

uint64_t clock_now_msec(void)
{
    struct timespec ts = now();
    return (uint64_t)ts.tv_sec * 1000u + (uint64_t)ts.tv_nsec / 1000000u;
}

double clock_now_sec(void)
{
    struct timespec ts = now();
    return (double)ts.tv_sec + (double)ts.tv_nsec / 1e9;
}

double clock_wall_sec(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_REALTIME, &ts);
    return (double)ts.tv_sec + (double)ts.tv_nsec / 1e9;
}

struct timespec clock_deadline_msec(uint64_t ms)
{
    struct timespec ts = now();
    ts.tv_sec += (time_t)(ms / 1000u);
    ts.tv_nsec += (long)(ms % 1000u) * 1000000L;
    if (ts.tv_nsec >= 1000000000L) {
        ts.tv_sec++;
        ts.tv_nsec -= 1000000000L;
    }
    return ts;
}
