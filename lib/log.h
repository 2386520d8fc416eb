/* Program logging: one small API with levels. Under systemd (JOURNAL_STREAM set and libsystemd
 * available) records go to journald with structured fields, else one line each to stderr, unless
 * the host program hands them to a function of its own (log_set_sink: a Slurm plugin logs
 * through slurmstepd, a test collects them). Library code logs at debug level only and returns
 * errors instead. */
#pragma once

enum log_level {
    LOG_LEVEL_ERR,
    LOG_LEVEL_WARNING,
    LOG_LEVEL_NOTICE,
    LOG_LEVEL_INFO,
    LOG_LEVEL_DEBUG,
};

/* Sets the program name shown on stderr lines and the threshold; records above it are dropped.
 * Records go to stderr unless the program also calls log_enable_journal(). */
void log_setup(const char *ident, enum log_level max);

/* Under systemd (JOURNAL_STREAM set), sends records to journald with their level, file and line
 * instead of stderr. In log-journal.c, so that only programs that call it link libsystemd. */
void log_enable_journal(void);
typedef void (*log_journal_fn)(enum log_level level, const char *file, int line, const char *text);
/* For log-journal.c: where records go under systemd. */
void log_set_journal_sink(log_journal_fn sink);
const char *log_get_ident(void);

/* Where records go instead of journald or stderr: sink gets each record at or below the
 * threshold (log_setup's), formatted, with userdata. NULL restores the default. Set it before
 * any thread logs; the sink itself must be thread-safe when threads log. */
typedef void (*log_sink_fn)(enum log_level level, const char *file, int line, const char *text,
                            void *userdata);
void log_set_sink(log_sink_fn sink, void *userdata);

/* Parses "err", "warning", "notice", "info" or "debug"; returns the level or -EINVAL. */
int log_level_from_string(const char *s);

void log_emit(enum log_level level, const char *file, int line, const char *fmt, ...)
    __attribute__((format(printf, 4, 5)));

/* Logs and returns r, for `return log_error_errno(r, "...")` in programs. */
int log_emit_errno(enum log_level level, int r, const char *file, int line, const char *fmt, ...)
    __attribute__((format(printf, 5, 6)));

#define log_error(...)          log_emit(LOG_LEVEL_ERR, __FILE__, __LINE__, __VA_ARGS__)
#define log_warning(...)        log_emit(LOG_LEVEL_WARNING, __FILE__, __LINE__, __VA_ARGS__)
#define log_notice(...)         log_emit(LOG_LEVEL_NOTICE, __FILE__, __LINE__, __VA_ARGS__)
#define log_info(...)           log_emit(LOG_LEVEL_INFO, __FILE__, __LINE__, __VA_ARGS__)
#define log_debug(...)          log_emit(LOG_LEVEL_DEBUG, __FILE__, __LINE__, __VA_ARGS__)
#define log_error_errno(r, ...) log_emit_errno(LOG_LEVEL_ERR, r, __FILE__, __LINE__, __VA_ARGS__)
#define log_warning_errno(r, ...)                                                                  \
    log_emit_errno(LOG_LEVEL_WARNING, r, __FILE__, __LINE__, __VA_ARGS__)
