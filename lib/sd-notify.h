/* sd_notify() and sd_watchdog_enabled() from libsystemd, or stand-ins that do nothing when the
 * project is built without it (-Dsystemd=disabled): daemons call them either way. */
#pragma once

#include <stdint.h>

#ifdef HAVE_SYSTEMD
#include <systemd/sd-daemon.h>
#else
static inline int sd_notify(int unset_environment, const char *state)
{
    return 0;
}

static inline int sd_watchdog_enabled(int unset_environment, uint64_t *usec)
{
    return 0;
}
#endif
