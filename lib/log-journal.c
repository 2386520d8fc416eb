/* journald output for lib/log.h, kept apart from log.c so that only daemons link libsystemd. */
#include "lib/log.h"

#ifdef HAVE_SYSTEMD
#include <syslog.h>
#include <systemd/sd-journal.h>

static void journal_send(enum log_level level, const char *file, int line, const char *text)
{
    static const int prio[] = {LOG_ERR, LOG_WARNING, LOG_NOTICE, LOG_INFO, LOG_DEBUG};
    sd_journal_send("MESSAGE=%s", text, "PRIORITY=%d", prio[level], "CODE_FILE=%s", file,
                    "CODE_LINE=%d", line, "SYSLOG_IDENTIFIER=%s", log_get_ident(), NULL);
}

void log_enable_journal(void)
{
    log_set_journal_sink(journal_send);
}
#else
void log_enable_journal(void)
{
}
#endif
