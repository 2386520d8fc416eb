/* Starting a program: posix_spawn with what every caller in gpunode needs, written once. The child
 * starts with no signal blocked and every signal at its default (a daemon blocks the signals it
 * reads from a signalfd, capsule those it forwards, and neither is the child's business), and
 * with stdin, stdout and stderr as asked. Nothing else is set up: the environment is the caller's
 * choice, and the child is not waited for here. */
#pragma once

#include <stdbool.h>
#include <sys/types.h>

/* For process_opts' descriptors: /dev/null, or this process's own descriptor of that number. */
#define PROCESS_NULL (-1)
#define PROCESS_KEEP (-2)

struct process_opts {
    /* What the child's 0, 1 and 2 are: a descriptor of the caller's, PROCESS_NULL or PROCESS_KEEP.
     * A zeroed struct would make all three the caller's stdin: callers set all three. */
    int in, out, err;
    /* Close every other descriptor in the child, also those a library opened without
     * O_CLOEXEC (a daemon's threads hold such ones). */
    bool close_others;
    /* A process group of its own (pgid = its pid), so that killing the group ends its children
     * too. */
    bool new_pgroup;
    /* The environment; NULL: this process's. */
    char *const *envp;
};

/* Starts path with argv. Returns 0 and *ret_pid, or -errno: also when path cannot be executed
 * (glibc's posix_spawn reports the exec's failure), so a caller can say why at once. */
int process_spawn(const char *path, char *const *argv, const struct process_opts *o,
                  pid_t *ret_pid);
