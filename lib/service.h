/* What every gpunode daemon does around its own work, written once: the signals it handles
 * (SIGTERM and SIGINT stop it, SIGHUP asks for a reload), systemd's notifications (READY,
 * STOPPING, STATUS; nothing without systemd) and its watchdog. The daemon's loop polls the
 * signalfd beside its own descriptors and sleeps no longer than service_watchdog_timeout_ms(). */
#pragma once

#include <stdint.h>

/* Blocks SIGTERM, SIGINT and SIGHUP in the calling thread and ignores SIGPIPE (a peer that hangs
 * up must not kill the daemon); call it before any thread starts, so that every thread inherits
 * the mask and only the returned signalfd (O_CLOEXEC, O_NONBLOCK) sees them. Returns the fd or
 * -errno. */
int service_signals_open(void);

enum service_signal {
    SERVICE_SIGNAL_NONE,
    SERVICE_SIGNAL_RELOAD, /* SIGHUP */
    SERVICE_SIGNAL_STOP,   /* SIGTERM or SIGINT, logged as "Received ..., stopping" */
};
/* Reads every signal pending on fd; a stop wins over a reload. */
enum service_signal service_signals_read(int fd);

/* systemd's watchdog (WatchdogSec=): interval_usec 0 when there is none. */
struct service_watchdog {
    uint64_t interval_usec;
    uint64_t last_ping_usec;
};
void service_watchdog_init(struct service_watchdog *w);
/* Tells systemd the daemon is alive, once half the interval has passed since the last time. A
 * daemon calls it only while its work is healthy, so that a stuck one gets restarted. */
void service_watchdog_ping(struct service_watchdog *w, uint64_t now_usec);
/* How long the loop may sleep (ms) to ping in time; -1 without a watchdog. 0 once a ping is
 * due: a loop that withholds pings on purpose (its work is stuck) must not bound its sleep by
 * this, or it spins. */
int service_watchdog_timeout_ms(const struct service_watchdog *w, uint64_t now_usec);

/* READY=1 with a STATUS line, once the daemon serves; STOPPING=1 when it begins to stop. */
void service_ready(const char *status);
void service_stopping(void);
