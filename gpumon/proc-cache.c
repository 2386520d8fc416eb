/* The sampler's cache of process attributions; see proc-cache.h. */
#include "proc-cache.h"

#include <errno.h>
#include <fcntl.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "procs.h"

/* A process already described; valid while its pid and start time stay the same. */
struct proc_entry {
    pid_t pid;
    unsigned long long starttime; /* 0: unknown (no stat when it was read) */
    bool seen;                    /* filled since the last sweep */
    bool described;               /* procs_describe() succeeded */
    unsigned tries;               /* procs_describe() calls for this process */
    struct proc_sample desc;
};

/* A description that failed (a /proc entry not yet readable, EMFILE, ENOMEM) is tried again on
 * the next passes, this many times in all; a /proc that never answers (hidepid) costs no more. */
#define DESCRIBE_TRIES 5

struct proc_cache {
    char *proc_root;
    struct proc_entry *procs;
    unsigned n, cap;
};

int proc_cache_new(const char *proc_root, struct proc_cache **ret)
{
    _cleanup_free_ struct proc_cache *c = calloc(1, sizeof(*c));
    if (!c)
        return -ENOMEM;
    c->proc_root = strdup(proc_root ? proc_root : "/proc");
    if (!c->proc_root)
        return -ENOMEM;
    *ret = TAKE_PTR(c);
    return 0;
}

void proc_cache_free(struct proc_cache *c)
{
    if (!c)
        return;
    free(c->procs);
    free(c->proc_root);
    free(c);
}

/* Reads field 22 (starttime) of <proc_root>/<pid>/stat; 0 if unreadable (the process is gone).
 * Together with the pid it names a process: a pid reused by a new process gets a new start time. */
static unsigned long long read_starttime(const char *proc_root, pid_t pid)
{
    char path[4096], buf[1024];
    int n = snprintf(path, sizeof(path), "%s/%d/stat", proc_root, (int)pid);
    if (n < 0 || (size_t)n >= sizeof(path))
        return 0;
    _cleanup_close_ int fd = open(path, O_RDONLY | O_CLOEXEC);
    if (fd < 0)
        return 0;
    ssize_t len = read(fd, buf, sizeof(buf) - 1);
    if (len <= 0)
        return 0;
    buf[len] = '\0';
    /* comm may hold blanks and parentheses; the fields after the last ')' are plain. */
    const char *p = strrchr(buf, ')');
    if (!p)
        return 0;
    p++;
    for (int field = 3; field < 22 && p; field++)
        p = strchr(p + 1, ' ');
    return p ? strtoull(p + 1, NULL, 10) : 0;
}

static void describe(const struct proc_cache *c, struct proc_entry *pe)
{
    struct proc_sample d = {.pid = pe->pid};
    /* On failure procs_describe() leaves uid (uid_t)-1 and empty strings: the process is still
     * shown with the memory NVML gives, only without owner labels. */
    pe->described = procs_describe(c->proc_root, pe->pid, &d) >= 0;
    pe->tries++;
    pe->desc = d;
}

static struct proc_entry *find(struct proc_cache *c, pid_t pid)
{
    for (unsigned i = 0; i < c->n; i++)
        if (c->procs[i].pid == pid)
            return &c->procs[i];
    return NULL;
}

static struct proc_entry *add(struct proc_cache *c, pid_t pid)
{
    if (c->n == c->cap) {
        unsigned cap = c->cap ? 2 * c->cap : 16;
        struct proc_entry *p = reallocarray(c->procs, cap, sizeof(*p));
        if (!p)
            return NULL;
        c->procs = p;
        c->cap = cap;
    }
    struct proc_entry *pe = &c->procs[c->n++];
    *pe = (struct proc_entry){.pid = pid, .starttime = read_starttime(c->proc_root, pid)};
    describe(c, pe);
    return pe;
}

/* A cached pid, checked once per pass: a new start time means a new process under the old pid. */
static void revalidate(struct proc_cache *c, struct proc_entry *pe)
{
    unsigned long long st = read_starttime(c->proc_root, pe->pid);
    if (st != 0 && st != pe->starttime) {
        pe->starttime = st;
        pe->tries = 0;
        describe(c, pe);
    } else if (!pe->described && pe->tries < DESCRIBE_TRIES)
        describe(c, pe);
}

int proc_cache_fill(struct proc_cache *c, struct proc_sample *p)
{
    struct proc_entry *pe = find(c, p->pid);
    if (!pe) {
        pe = add(c, p->pid);
        if (!pe)
            return -ENOMEM;
    } else if (!pe->seen) {
        /* A pid on several GPUs is checked on the first only. */
        revalidate(c, pe);
    }
    pe->seen = true;
    p->uid = pe->desc.uid;
    memcpy(p->user, pe->desc.user, sizeof(p->user));
    memcpy(p->comm, pe->desc.comm, sizeof(p->comm));
    memcpy(p->container, pe->desc.container, sizeof(p->container));
    memcpy(p->job, pe->desc.job, sizeof(p->job));
    return 0;
}

void proc_cache_sweep(struct proc_cache *c)
{
    unsigned kept = 0;
    for (unsigned i = 0; i < c->n; i++) {
        if (!c->procs[i].seen)
            continue;
        c->procs[i].seen = false;
        c->procs[kept++] = c->procs[i];
    }
    c->n = kept;
}
