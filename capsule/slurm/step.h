/* A Slurm step's container, seen from slurmstepd: `capsule hold` started as the job's user,
 * its line read (held.h), the tasks joining it, and its end. No Slurm types here, so that it is
 * tested without Slurm (capsule/tests/test-slurm-step.c); spank-capsule.c wires it to SPANK.
 *
 * The holder is a child of slurmstepd that talks over a socket pair: capsule writes its line on
 * it and keeps the container until the plugin's end closes, which happens when the step ends or
 * when slurmstepd dies (kill -9 included), so a container never outlives its step. */
#pragma once

#include <stdbool.h>
#include <sys/types.h>

#include "capsule/slurm/held.h"
#include "lib/errmsg.h"

struct step_spawn {
    const char *program; /* the capsule program */
    char *const *argv;   /* its whole argv; step_hold's socket is fd 3 ("--fd 3") */
    char *const *env;    /* its whole environment */
    uid_t uid;           /* the job's user: capsule runs with exactly these ids */
    gid_t gid;
};

struct step_holder {
    pid_t pid; /* capsule's; 0: none */
    int pidfd; /* -1: none */
    int sock;  /* the plugin's end; -1 once released */
    struct held held;
};
#define STEP_HOLDER_NULL                                                                           \
    {                                                                                              \
        0, -1, -1,                                                                                 \
        {                                                                                          \
            0                                                                                      \
        }                                                                                          \
    }

/* Starts capsule and waits for its line. 0 and *ret (the container is held), or a negative
 * errno with a message: capsule's own ("capsule: image 'x' is not in the cache ..."), its last
 * lines joined when there are several, or what went wrong around it. Nothing is left running
 * on failure. The caller must be able to take the ids (root, or already them). */
int step_hold(const struct step_spawn *s, struct step_holder *ret, struct errmsg *e);

/* Runs a program as the job's user to its end (capsule save), its stderr kept for the message.
 * 0 when it exited 0, else -EIO with its last lines (as step_hold's). */
int step_run(const struct step_spawn *s, struct errmsg *e);

/* Ends the hold: closes the socket, waits up to timeout_ms for capsule to clean up and exit,
 * then kills it. Returns 0, or -ETIMEDOUT when it had to be killed. Idempotent. */
int step_release(struct step_holder *h, int timeout_ms);

/* For a task, in its own process, just before its exec: into the container (runtime_join), to
 * workdir (NULL: the container's working directory), and under the id filter when the container
 * remaps root. 0 or -errno with a message ("couldn't chdir to /x: No such file or directory"). */
int step_join(const struct held *h, const char *workdir, struct errmsg *e);
