#include "lib/log.h"

#include <errno.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

static const char *log_ident = "gpunode";
static enum log_level log_max = LOG_LEVEL_INFO;
static int log_to_journal = -1;
/* Set by log_enable_journal() (log-journal.c): only daemons link libsystemd, so that a CLI such
 * as capsule, whose start-up time is measured in milliseconds, does not load it. */
static log_journal_fn journal_sink;
/* A host program's own (log_set_sink), which wins over both. */
static log_sink_fn host_sink;
static void *host_userdata;

static const char *const level_names[] = {"err", "warning", "notice", "info", "debug"};

void log_set_journal_sink(log_journal_fn sink)
{
    journal_sink = sink;
}

void log_set_sink(log_sink_fn sink, void *userdata)
{
    host_sink = sink;
    host_userdata = userdata;
}

const char *log_get_ident(void)
{
    return log_ident;
}

void log_setup(const char *ident, enum log_level max)
{
    log_ident = ident;
    log_max = max;
}

int log_level_from_string(const char *s)
{
    for (size_t i = 0; i < sizeof(level_names) / sizeof(level_names[0]); i++)
        if (strcmp(s, level_names[i]) == 0)
            return (int)i;
    return -EINVAL;
}

static int journal_wanted(void)
{
    if (log_to_journal < 0)
        log_to_journal = getenv("JOURNAL_STREAM") != NULL;
    return log_to_journal;
}

static void log_write(enum log_level level, const char *file, int line, const char *text)
{
    if (host_sink) {
        host_sink(level, file, line, text, host_userdata);
        return;
    }
    if (journal_sink && journal_wanted()) {
        journal_sink(level, file, line, text);
        return;
    }
    struct timespec ts;
    struct tm tm;
    char stamp[32];
    clock_gettime(CLOCK_REALTIME, &ts);
    gmtime_r(&ts.tv_sec, &tm);
    strftime(stamp, sizeof(stamp), "%Y-%m-%dT%H:%M:%S", &tm);
    fprintf(stderr, "%s.%03ldZ %s[%s]: %s\n", stamp, ts.tv_nsec / 1000000, log_ident,
            level_names[level], text);
}

static void log_vemit(enum log_level level, const char *file, int line, const char *fmt, va_list ap,
                      int r) __attribute__((format(printf, 4, 0)));
static void log_vemit(enum log_level level, const char *file, int line, const char *fmt, va_list ap,
                      int r)
{
    if (level > log_max)
        return;
    char text[2048];
    int n = vsnprintf(text, sizeof(text), fmt, ap);
    if (r < 0 && n >= 0 && (size_t)n < sizeof(text))
        snprintf(text + n, sizeof(text) - (size_t)n, ": %s", strerror(-r));
    log_write(level, file, line, text);
}

void log_emit(enum log_level level, const char *file, int line, const char *fmt, ...)
{
    /* A caller may log between a failing call and its look at errno (%m included). */
    int saved = errno;
    va_list ap;
    va_start(ap, fmt);
    log_vemit(level, file, line, fmt, ap, 0);
    va_end(ap);
    errno = saved;
}

int log_emit_errno(enum log_level level, int r, const char *file, int line, const char *fmt, ...)
{
    int saved = errno;
    va_list ap;
    va_start(ap, fmt);
    log_vemit(level, file, line, fmt, ap, r);
    va_end(ap);
    errno = saved;
    return r;
}
