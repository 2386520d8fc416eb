/* gpuqd's life: setting up (config, state, GPUs, cgroups, the API), recovering the jobs of an
 * earlier run, the main loop (scheduling passes, timers, ends of runs, signals), stopping. */
#include "gpuq/gpuqd/daemon.h"

#include <errno.h>
#include <fcntl.h>
#include <math.h>
#include <poll.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/eventfd.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include "gpuq/gpuqd/gpuqd.h"
#include "gpuq/spec/job-spec.h"
#include "gpuq/store/store.h"
#include "lib/audit.h"
#include "lib/cgroup.h"
#include "lib/gpu.h"
#include "lib/http-server.h"
#include "lib/log.h"
#include "lib/macro.h"
#include "lib/nvml.h"
#include "lib/roles.h"
#include "lib/service.h"

static int make_dir(const char *path, mode_t mode, struct errmsg *e)
{
    if (mkdir(path, mode) < 0 && errno != EEXIST)
        return errmsg_set(e, negative_errno(), "cannot make %s: %m", path);
    struct stat st;
    if (lstat(path, &st) < 0 || !S_ISDIR(st.st_mode) || st.st_uid != geteuid())
        return errmsg_set(e, -EPERM, "%s must be a directory of gpuqd's user", path);
    return 0;
}

static int make_dirs(struct gpuqd *d, struct errmsg *e)
{
    char path[4096];
    int r = make_dir(d->cfg.state_dir, 0755, e);
    snprintf(path, sizeof(path), "%s/jobs", d->cfg.state_dir);
    if (r == 0)
        r = make_dir(path, 0700, e);
    snprintf(path, sizeof(path), "%s/logs", d->cfg.state_dir);
    if (r == 0)
        r = make_dir(path, 0755, e);
    /* The folders of the socket and the audit log, as systemd's RuntimeDirectory= and
     * LogsDirectory= would make them. */
    const char *leaves[] = {d->cfg.socket, d->cfg.audit_log};
    for (size_t i = 0; r == 0 && i < ELEMENTSOF(leaves); i++) {
        if (!leaves[i] || !*leaves[i])
            continue;
        snprintf(path, sizeof(path), "%s", leaves[i]);
        char *slash = strrchr(path, '/');
        if (slash && slash != path) {
            *slash = '\0';
            if (mkdir(path, 0755) < 0 && errno != EEXIST)
                r = errmsg_set(e, negative_errno(), "cannot make %s: %m", path);
        }
    }
    return r;
}

/* The slots: every GPU and MIG instance NVML shows; none (CPU jobs only) without a driver. */
static int load_node(struct gpuqd *d, const char *nvml_library, struct errmsg *e)
{
    d->node.cpu_milli = d->cfg.node_cpu_milli ? (unsigned)d->cfg.node_cpu_milli
                                              : (unsigned)sysconf(_SC_NPROCESSORS_ONLN) * 1000u;
    d->node.mem_bytes = d->cfg.node_mem_bytes
                            ? d->cfg.node_mem_bytes
                            : (uint64_t)sysconf(_SC_PHYS_PAGES) * (uint64_t)sysconf(_SC_PAGESIZE);
    struct errmsg ne = {{0}};
    _cleanup_(nvml_closep) struct nvml *n = NULL;
    _cleanup_(gpu_list_freep) struct gpu_list *gpus = NULL;
    int r = nvml_open(nvml_library, &n, &ne);
    if (r == 0)
        r = gpu_list_load(n, &gpus, &ne);
    if (r < 0) {
        log_warning("no GPUs: %s; only jobs without GPUs will run", ne.text);
        return 0;
    }
    r = res_node_from_gpus(&d->node, gpus, e);
    if (r == 0)
        log_info("%u GPU(s) and MIG instance(s) to hand out, %u CPUs", d->node.n_slots,
                 d->node.cpu_milli / 1000);
    return r;
}

/* Where job scopes go, and whether they get CPU and memory limits. A cgroup that hands the cpu
 * and memory controllers to its children may hold no process itself, and a restarted gpuqd
 * could not enter it again: so limits need gpuqd started in a leaf "daemon" of its own cgroup
 * (systemd 254's DelegateSubgroup=daemon, quickstart's wrapper), whose parent then holds the
 * job scopes. Started elsewhere, scopes go below gpuqd's own cgroup, without limits. */
static void setup_cgroups(struct gpuqd *d)
{
    _cleanup_free_ char *self = NULL;
    int r = cgroup_self_dir(&self);
    char *slash = r == 0 ? strrchr(self, '/') : NULL;
    bool leaf = slash && strcmp(slash, "/daemon") == 0 && strcmp(self, cgroup_v2_path()) != 0;
    if (leaf)
        *slash = '\0';
    if (r < 0 || !cgroup_ours_to_change(self)) {
        log_warning("jobs run without a cgroup of their own (no limits, no scope for gpumon): %s",
                    r < 0 ? "no cgroup v2 in sight"
                          : "gpuqd's cgroup is not delegated to it "
                            "(systemd: Delegate=yes)");
        return;
    }
    if (!leaf)
        log_notice("job CPU and memory limits need gpuqd started in %s/daemon (systemd 254+: "
                   "DelegateSubgroup=daemon); jobs run without them",
                   self);
    else if (cgroup_attr_write(self, "cgroup.subtree_control", "+cpu +memory") < 0)
        log_notice("cpu and memory controllers not available below %s: no job limits", self);
    d->cgroup_parent = TAKE_PTR(self);
    log_info("job scopes go below %s", d->cgroup_parent);
}

static int load_job(struct job *j, const char *spec_json, void *userdata)
{
    struct gpuqd *d = userdata;
    struct qjob *q = calloc(1, sizeof(*q));
    json_t *sj = json_loads(spec_json, 0, NULL);
    bool held;
    if (!q || !sj || job_spec_from_json(sj, &j->spec, &held, NULL) < 0) {
        json_decref(sj);
        free(q);
        log_error("job %llu: its stored spec cannot be read; left out", (unsigned long long)j->id);
        return 0;
    }
    json_decref(sj);
    q->j = *j;
    memset(&j->spec, 0, sizeof(j->spec));
    q->pidfd = -1;
    const struct queue *qu =
        q->j.spec.queue ? sched_config_queue(&d->cfg.sched, q->j.spec.queue) : NULL;
    if (q->j.spec.queue && !qu)
        log_warning("job %llu: queue '%s' is gone from the config; the default queue takes it",
                    (unsigned long long)q->j.id, q->j.spec.queue);
    q->queue = qu ? (unsigned)(qu - d->cfg.sched.queues) : 0;
    if (q->j.id > d->last_id)
        d->last_id = q->j.id;
    int r = jobs_add(d, q);
    if (r < 0)
        qjob_free(q);
    return r;
}

static int load_usage(const char *queue, uid_t uid, double value, double time, void *userdata)
{
    struct gpuqd *d = userdata;
    const struct queue *q = sched_config_queue(&d->cfg.sched, queue);
    double *v = q ? schedule_usage(d, (unsigned)(q - d->cfg.sched.queues), uid, true) : NULL;
    if (v) {
        *v = value;
        d->usage[d->n_usage - 1].time = time;
    }
    return 0;
}

/* The state of an earlier run: the jobs, fair-share usage, the drain. */
static int load_state(struct gpuqd *d, struct errmsg *e)
{
    char path[4096];
    snprintf(path, sizeof(path), "%s/gpuq.db", d->cfg.state_dir);
    int r = store_open(path, &d->store, e);
    if (r == 0)
        r = store_jobs_each(d->store, true, 0, 0, load_job, d, e);
    if (r == 0)
        r = store_usage_each(d->store, load_usage, d, e);
    _cleanup_free_ char *drained = NULL;
    if (r == 0 && store_meta_get(d->store, "drained", &drained, NULL) == 0)
        d->drained = strcmp(drained, "1") == 0;
    uint64_t last = 0;
    if (r == 0 && store_last_job_id(d->store, &last, e) == 0 && last > d->last_id)
        d->last_id = last;
    return r;
}

static int alloc_stats(struct gpuqd *d)
{
    unsigned n = d->cfg.sched.n_queues;
    d->quotas = calloc(n, sizeof(*d->quotas));
    d->stats.preemptions = calloc(n, sizeof(uint64_t));
    d->stats.retries = calloc(n, sizeof(uint64_t));
    d->stats.wait_buckets = calloc((size_t)n * WAIT_BUCKETS, sizeof(uint64_t));
    d->stats.wait_sum = calloc(n, sizeof(double));
    d->stats.wait_count = calloc(n, sizeof(uint64_t));
    if (!d->quotas || !d->stats.preemptions || !d->stats.retries || !d->stats.wait_buckets ||
        !d->stats.wait_sum || !d->stats.wait_count)
        return -ENOMEM;
    for (unsigned i = 0; i < n; i++)
        d->quotas[i] = d->cfg.sched.queues[i].quota;
    return 0;
}

static int init_sync(struct gpuqd *d)
{
    pthread_condattr_t attr;
    pthread_condattr_init(&attr);
    pthread_condattr_setclock(&attr, CLOCK_MONOTONIC);
    pthread_mutex_init(&d->lock, NULL);
    pthread_cond_init(&d->changed, &attr);
    pthread_condattr_destroy(&attr);
    d->wake_fd = eventfd(0, EFD_CLOEXEC | EFD_NONBLOCK);
    return d->wake_fd < 0 ? negative_errno() : 0;
}

int gpuqd_new(const struct gpuqd_options *o, struct gpuqd **ret, struct errmsg *e)
{
    struct gpuqd *d = calloc(1, sizeof(*d));
    if (!d)
        return errmsg_set(e, -ENOMEM, "out of memory");
    d->wake_fd = -1;
    d->run_program = o->run_program;
    int r = gpuqd_config_load(o->config_path, &d->cfg, e);
    d->capsule_program = d->cfg.capsule ? d->cfg.capsule : o->capsule_program;
    if (r == 0 && (r = init_sync(d)) < 0)
        errmsg_set(e, r, "cannot make an eventfd: %s", strerror(-r));
    if (r == 0 && (r = alloc_stats(d)) < 0)
        errmsg_set(e, r, "out of memory");
    if (r == 0)
        r = make_dirs(d, e);
    if (r == 0 && (d->roles = calloc(1, sizeof(*d->roles))) == NULL)
        r = errmsg_set(e, -ENOMEM, "out of memory");
    if (r == 0 && (r = roles_init(d->roles, d->cfg.admin_group, e)) == 1) {
        log_warning("admin group '%s' does not exist: only root administers the queue",
                    d->cfg.admin_group);
        r = 0;
    }
    if (r == 0 && d->cfg.audit_log && *d->cfg.audit_log)
        r = audit_open(d->cfg.audit_log, &d->audit, e);
    if (r == 0)
        r = load_node(d, o->nvml_library, e);
    if (r == 0)
        r = load_state(d, e);
    if (r < 0) {
        gpuqd_free(d);
        return r;
    }
    setup_cgroups(d);
    *ret = d;
    return 0;
}

void gpuqd_free(struct gpuqd *d)
{
    if (!d)
        return;
    http_server_free(d->api);
    http_server_free(d->metrics);
    for (size_t i = 0; i < d->n_jobs; i++)
        qjob_free(d->jobs[i]);
    free(d->jobs);
    free(d->usage);
    free(d->quotas);
    free(d->stats.preemptions);
    free(d->stats.retries);
    free(d->stats.wait_buckets);
    free(d->stats.wait_sum);
    free(d->stats.wait_count);
    store_close(d->store);
    audit_close(d->audit);
    if (d->roles)
        roles_done(d->roles);
    free(d->roles);
    free(d->cgroup_parent);
    if (d->wake_fd >= 0)
        close(d->wake_fd);
    gpuqd_config_done(&d->cfg);
    free(d);
}
