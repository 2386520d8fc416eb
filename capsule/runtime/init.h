/* The process side of a container: running the command (PATH lookup, exec, failures reported to
 * the capsule parent through a CLOEXEC pipe), and the small init that supervises it inside a pid
 * namespace or after a setns (capsule exec). Internal to the runtime. */
#pragma once

#include <signal.h>
#include <stdbool.h>
#include <sys/types.h>

#include "lib/errmsg.h"

/* What a failed container process writes to the report pipe before it exits. The parent reads
 * EOF (every copy of the write end closed, the last one by the command's execve) as success. */
struct init_report {
    int err;        /* negative errno */
    unsigned flags; /* INIT_REPORT_* */
    char msg[ERRMSG_MAX];
};

enum {
    /* The kernel refused every overlay mount: RUNTIME_ROOTFS_AUTO retries with a copy. */
    INIT_REPORT_OVERLAY_REFUSED = 1 << 0,
};

/* What the command process does once the root is in place. */
struct init_command {
    char *const *argv;
    char *const *env;     /* complete environment */
    const char *cwd;      /* NULL = "/" */
    const sigset_t *mask; /* the signal mask to restore before execve */
    int report_fd;        /* write end of the report pipe */
    /* Steps that need the final root but must happen before exec (runtime_run only). */
    bool run_ldconfig;
    const char *ld_library_dir;
    bool make_readonly;
    bool fake_ids; /* --remap-root: ownership and id changes succeed without effect (id-filter.h) */
    int tty_sock;  /* >= 0: give the command a terminal, its master sent here (tty.h) */
    bool tty_all;  /* the terminal on all of stdin, stdout, stderr, not only where they were ttys */
    int hold_fd;   /* >= 0: run nothing; stay until this fd reads end-of-file (run_spec.hold) */
    const int (*keep_fds)[2]; /* run_spec's */
    size_t n_keep_fds;
    int output_fd; /* -1: none */
};

/* The signals forwarded to the command, plus SIGCHLD: the set every supervising process blocks
 * and waits on. */
void init_signal_set(sigset_t *ret);
/* True for signals that the forwarder passes on (not SIGCHLD). */
bool init_signal_forwarded(int sig);

/* Whether a signal that a terminal sent (si_code SI_KERNEL) has reached pid by itself: it has
 * when pid is in the foreground process group of our controlling terminal (as capsule and its
 * command are, unless the command made its own session). Forwarding it then would deliver it
 * twice. */
bool init_terminal_reached(pid_t pid);

/* Exit code for a wait status: the exit status, or 128+N when killed by signal N. */
int init_exit_code(int status);

/* /dev/null on stdin, stdout and stderr: for a supervising process that must not keep the
 * caller's terminal. */
void init_null_stdio(void);

/* Sends a failure report (best effort: the pipe is large enough for one report). */
void init_report(int fd, int err, unsigned flags, const char *msg);

/* Runs the command in this process (or, with hold_fd, stays without one): finishing steps, chdir,
 * signal mask, PATH lookup of argv[0] in env's PATH, execve. Never returns: on failure it reports
 * "exec 'x': …" (-ENOENT when not found, -EACCES when not executable) or the finishing step's error
 * and exits (127/126/125). */
_Noreturn void init_exec_command(const struct init_command *c);

/* Forwards the forwarded signals to pid (a terminal's only when it did not reach pid by itself,
 * see init_terminal_reached()), reaps every child when
 * reap_all (pid-namespace init), and exits with pid's exit code once pid has exited. The
 * signals of init_signal_set() must be blocked. */
_Noreturn void init_supervise(pid_t pid, bool reap_all);

/* The pid-namespace init: forks the command (pid 2), closes its own copy of the report pipe,
 * then supervises the command and exits with its status. */
_Noreturn void init_run(const struct init_command *c);
