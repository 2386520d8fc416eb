/* The signals a daemon handles itself. */
#pragma once

#include <signal.h>

/* Blocks SIGTERM, SIGINT and SIGHUP in the calling thread and ignores SIGPIPE (a peer that
 * hangs up must not kill the daemon). Call it before any thread starts, so that every thread
 * inherits the mask and only the daemon's signalfd or sigtimedwait() sees those signals; the mask
 * is returned in *ret for that. */
void signals_block_daemon(sigset_t *ret);
