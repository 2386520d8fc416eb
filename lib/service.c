#include "lib/service.h"

#include <errno.h>
#include <pthread.h>
#include <signal.h>
#include <stdio.h>
#include <string.h>
#include <sys/signalfd.h>
#include <unistd.h>

#include "lib/log.h"
#include "lib/macro.h"
#include "lib/sd-notify.h"

int service_signals_open(void)
{
    sigset_t mask;
    sigemptyset(&mask);
    sigaddset(&mask, SIGTERM);
    sigaddset(&mask, SIGINT);
    sigaddset(&mask, SIGHUP);
    pthread_sigmask(SIG_BLOCK, &mask, NULL);
    signal(SIGPIPE, SIG_IGN);
    int fd = signalfd(-1, &mask, SFD_CLOEXEC | SFD_NONBLOCK);
    return fd < 0 ? negative_errno() : fd;
}

enum service_signal service_signals_read(int fd)
{
    enum service_signal got = SERVICE_SIGNAL_NONE;
    struct signalfd_siginfo si;
    while (read(fd, &si, sizeof(si)) == (ssize_t)sizeof(si)) {
        if (si.ssi_signo == SIGHUP) {
            if (got == SERVICE_SIGNAL_NONE)
                got = SERVICE_SIGNAL_RELOAD;
            continue;
        }
        log_info("Received %s, stopping", strsignal((int)si.ssi_signo));
        got = SERVICE_SIGNAL_STOP;
    }
    return got;
}

void service_watchdog_init(struct service_watchdog *w)
{
    *w = (struct service_watchdog){0};
    if (sd_watchdog_enabled(0, &w->interval_usec) <= 0)
        w->interval_usec = 0;
}

void service_watchdog_ping(struct service_watchdog *w, uint64_t now_usec)
{
    if (!w->interval_usec || now_usec - w->last_ping_usec < w->interval_usec / 2)
        return;
    sd_notify(0, "WATCHDOG=1");
    w->last_ping_usec = now_usec;
}

int service_watchdog_timeout_ms(const struct service_watchdog *w, uint64_t now_usec)
{
    if (!w->interval_usec)
        return -1;
    uint64_t due = w->last_ping_usec + w->interval_usec / 2;
    return due <= now_usec ? 0 : (int)((due - now_usec + 999) / 1000);
}

void service_ready(const char *status)
{
    char text[512];
    snprintf(text, sizeof(text), "READY=1\nSTATUS=%s", status);
    sd_notify(0, text);
}

void service_stopping(void)
{
    sd_notify(0, "STOPPING=1");
}
