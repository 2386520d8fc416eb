/* Hook scripts for coold's shutdown, and the child-process runner the shutdown command uses too.
 *
 * Hooks are the executable regular files in a directory (hooks_dir), run all at once in lexical
 * order of their names, apccontrol-style: argv[1] is the event ("precritical" or "drill"), the
 * environment carries COOLD_EVENT, COOLD_REASON, COOLD_DEADLINE_SECONDS and COOLD_DRILL, stdin
 * is /dev/null and every line they print goes to the caller's line callback. Each hook runs in its
 * own process group, so that a hook's children die with it when the stage budget runs out.
 *
 * All times are CLOCK_MONOTONIC microseconds (clock_now_usec() of lib/clock.h). The functions are
 * reentrant, but they reap only the children they started (waitpid() on those pids), so the
 * daemon must not set SIGCHLD to SIG_IGN. */
#pragma once

#include <stdatomic.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <sys/types.h>

#include "lib/errmsg.h"

/* Called for each line a child prints (without the newline). name is the job's name. Lines longer
 * than HOOKS_LINE_MAX arrive in pieces. Called on the thread that runs hooks_exec(). */
typedef void (*hooks_line_fn)(const char *name, const char *line, void *userdata);

#define HOOKS_LINE_MAX 1024

/* One program to start. argv[0] is what the program sees as its name; path is what is executed
 * (no PATH search). */
struct hooks_job {
    const char *name;
    const char *path;
    char *const *argv;
};

/* How hooks_exec() runs its jobs. Zero-initialise and set what is needed. */
struct hooks_exec_opts {
    char *const *envp;         /* NULL: the daemon's own environment */
    uint64_t deadline_us;      /* stop waiting at this monotonic time; 0: wait until all exit */
    bool kill_at_deadline;     /* SIGKILL the process groups still running at the deadline;
                                  false: leave them running (and unreaped) */
    bool inherit_output;       /* true: children write to the daemon's stdout/stderr instead of
                                  line_fn */
    const atomic_bool *cancel; /* NULL, or treated as an early deadline once it becomes true */
    hooks_line_fn line_fn;     /* NULL: output is read and dropped */
    void *userdata;
};

/* What became of one job. */
struct hooks_outcome {
    int spawn_error; /* 0, or the -errno posix_spawn() gave (the job never ran) */
    pid_t pid;       /* the child's pid (its process group too); 0 if it never ran */
    bool exited;     /* reaped; status holds the wait status */
    int status;
    bool killed;    /* still running at the deadline and killed */
    bool running;   /* still running at the deadline and left alone */
    double seconds; /* from start to exit or to the deadline */
};

/* Starts all jobs at once and waits until every one has exited or the deadline (or cancel) came,
 * forwarding their output line by line. ret must have room for n outcomes; each is filled even
 * when the function fails part-way (jobs not started then carry spawn_error). Returns 0 when
 * every job was dealt with (whatever their exit statuses), or -errno when the runner itself could
 * not work (pipe or poll failure), with e set. */
int hooks_exec(const struct hooks_job *jobs, size_t n, const struct hooks_exec_opts *o,
               struct hooks_outcome *ret, struct errmsg *e);

/* True when a directory entry name is never run as a hook whatever its mode: dotfiles, editor
 * backups ("*~") and the package manager's leftovers ("*.dpkg-old", "*.dpkg-dist", ...). */
bool hooks_name_ignored(const char *name);

/* Lists the hooks of dir: the names (not paths) of executable regular files (symlinks followed)
 * that hooks_name_ignored() does not exclude, in lexical (byte) order. A missing directory is
 * not an error: *ret_n is 0. Returns 0 and a malloc'd array of malloc'd names (free with
 * hooks_names_free()), or -errno with e set (e.g. -ENOTDIR, -EACCES). */
int hooks_list(const char *dir, char ***ret_names, size_t *ret_n, struct errmsg *e);

void hooks_names_free(char **names, size_t n);

/* What the hooks are told. */
struct hooks_event {
    const char *event;     /* "precritical" or "drill" */
    const char *reason;    /* e.g. "pump_stopped" */
    uint64_t power_cut_us; /* monotonic time of the power cut; COOLD_DEADLINE_SECONDS counts
                              down to it (whole seconds, 0 once past) */
    bool drill;
};

/* Summary of a hooks run, for the stage report. */
struct hooks_summary {
    unsigned total;
    unsigned ok;
    unsigned failed;  /* exited non-zero, died of a signal, or could not be started */
    unsigned killed;  /* killed at the budget */
    char detail[256]; /* e.g. "3 hooks: 2 ok, 1 killed at budget (50-slow)" */
};

/* Runs the hooks of dir as described at the top of this file, with o's deadline as the stage
 * budget (o->envp is ignored: the environment is built here; kill_at_deadline should be set).
 * Returns 0 with *ret filled (also when some hooks failed: see ret->failed), or -errno with e
 * set when the directory could not be read or the runner failed. */
int hooks_run(const char *dir, const struct hooks_event *ev, const struct hooks_exec_opts *o,
              struct hooks_summary *ret, struct errmsg *e);
