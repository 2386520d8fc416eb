/* The monotonic clock, read in the units the components count in. One place, so that every
 * deadline, interval and timestamp in gpunode comes from the same clock (CLOCK_MONOTONIC: it
 * never jumps with the wall clock, and it stops while the machine is suspended).
 *
 * Pure logic takes the time as an argument instead (coold's safety.c, coolsim's controller);
 * these are for the code that feeds it. Thread-safe; none can fail. */
#pragma once

#include <stdint.h>
#include <time.h>

/* Microseconds of CLOCK_MONOTONIC. */
uint64_t clock_now_usec(void);
/* Milliseconds of CLOCK_MONOTONIC. */
uint64_t clock_now_msec(void);
/* Seconds of CLOCK_MONOTONIC, with the fraction. */
double clock_now_sec(void);
/* The wall clock (CLOCK_REALTIME) in UNIX seconds with the fraction: for times that users read
 * and that must survive a reboot (a job's submit and start times), never for deadlines. */
double clock_wall_sec(void);
/* CLOCK_MONOTONIC ms milliseconds from now, as pthread_cond_timedwait() takes a deadline on a
 * condition variable whose clock is CLOCK_MONOTONIC (pthread_condattr_setclock). */
struct timespec clock_deadline_msec(uint64_t ms);
