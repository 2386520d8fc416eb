/* The signals a daemon handles itself; see signals.h. */
#include "lib/signals.h"

#include <pthread.h>

void signals_block_daemon(sigset_t *ret)
{
    sigemptyset(ret);
    sigaddset(ret, SIGTERM);
    sigaddset(ret, SIGINT);
    sigaddset(ret, SIGHUP);
    pthread_sigmask(SIG_BLOCK, ret, NULL);
    signal(SIGPIPE, SIG_IGN);
}
