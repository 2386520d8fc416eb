/* gpuqd's /metrics: jobs by queue and state, waits, GPUs, preemptions, retries, quotas. */
#include <errno.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "gpuq/gpuqd/gpuqd.h"
#include "lib/http-server.h"
#include "lib/macro.h"
#include "lib/prom.h"

static const double wait_bounds[WAIT_BUCKETS] = {1,   2,   5,    10,    30,    60,
                                                 300, 900, 3600, 14400, 86400, INFINITY};

static int render_jobs(struct prom_writer *w, const struct gpuqd *d)
{
    int r = prom_family(w, "gpuq_jobs", PROM_TYPE_GAUGE,
                        "Active jobs by queue and state (PENDING, RUNNING, STOPPING).");
    for (unsigned q = 0; r >= 0 && q < d->cfg.sched.n_queues; q++)
        for (int s = JOB_PENDING; r >= 0 && s <= JOB_STOPPING; s++) {
            unsigned n = 0;
            for (size_t i = 0; i < d->n_jobs; i++)
                n += d->jobs[i]->queue == q && (int)d->jobs[i]->j.state == s;
            const char *labels[] = {"queue", d->cfg.sched.queues[q].name, "state",
                                    job_state_name((enum job_state)s), NULL};
            r = prom_sample(w, labels, n);
        }
    return r;
}

static int render_per_queue(struct prom_writer *w, const struct gpuqd *d)
{
    int r = prom_family(w, "gpuq_job_wait_seconds", PROM_TYPE_HISTOGRAM,
                        "Time jobs waited from submit (or requeue, or backoff end) to start.");
    for (unsigned q = 0; r >= 0 && q < d->cfg.sched.n_queues; q++) {
        uint64_t cum[WAIT_BUCKETS], sum = 0;
        for (unsigned b = 0; b < WAIT_BUCKETS; b++)
            cum[b] = sum += d->stats.wait_buckets[q * WAIT_BUCKETS + b];
        const char *labels[] = {"queue", d->cfg.sched.queues[q].name, NULL};
        r = prom_histogram(w, labels, wait_bounds, cum, WAIT_BUCKETS, d->stats.wait_sum[q],
                           d->stats.wait_count[q]);
    }
    if (r >= 0)
        r = prom_family(w, "gpuq_preemptions", PROM_TYPE_COUNTER,
                        "Runs ended by a preemption or a drain and requeued.");
    for (unsigned q = 0; r >= 0 && q < d->cfg.sched.n_queues; q++)
        r = prom_sample(w, (const char *[]){"queue", d->cfg.sched.queues[q].name, NULL},
                        (double)d->stats.preemptions[q]);
    if (r >= 0)
        r = prom_family(w, "gpuq_retries", PROM_TYPE_COUNTER,
                        "Failed runs retried within the job's backoffLimit.");
    for (unsigned q = 0; r >= 0 && q < d->cfg.sched.n_queues; q++)
        r = prom_sample(w, (const char *[]){"queue", d->cfg.sched.queues[q].name, NULL},
                        (double)d->stats.retries[q]);
    return r;
}

static int render_quotas(struct prom_writer *w, const struct gpuqd *d)
{
    int r = prom_family(w, "gpuq_quota", PROM_TYPE_GAUGE,
                        "Each queue's quota in effect now (after its calendar's windows).");
    for (unsigned q = 0; r >= 0 && q < d->cfg.sched.n_queues; q++) {
        const struct quota *quota = &d->quotas[q];
        for (unsigned k = 0; r >= 0 && k < quota->n; k++) {
            char key[64];
            const char *labels[] = {"queue", d->cfg.sched.queues[q].name, "resource",
                                    quota_key(&quota->l[k], key, sizeof(key)), NULL};
            r = prom_sample(w, labels, (double)quota->l[k].limit);
        }
    }
    return r;
}

static int render_node(struct prom_writer *w, const struct gpuqd *d)
{
    unsigned allocated = jobs_gpus_allocated(d);
    int r = prom_family(w, "gpuq_gpus_allocated", PROM_TYPE_GAUGE,
                        "GPUs and MIG instances held by running jobs.");
    if (r >= 0)
        r = prom_sample(w, NULL, allocated);
    if (r >= 0)
        r = prom_family(w, "gpuq_gpus", PROM_TYPE_GAUGE,
                        "GPUs and MIG instances gpuq hands out on this node.");
    if (r >= 0)
        r = prom_sample(w, NULL, d->node.n_slots);
    if (r >= 0)
        r = prom_family(w, "gpuq_drained", PROM_TYPE_GAUGE,
                        "1 while the node is drained (nothing starts until gpuq resume).");
    if (r >= 0)
        r = prom_sample(w, NULL, d->drained);
    return r;
}

static void handle(const struct http_request *req, struct http_reply *reply, void *userdata)
{
    struct gpuqd *d = userdata;
    if (strcmp(req->path, "/metrics") != 0 || strcmp(req->method, "GET") != 0) {
        http_reply_error(reply, 404, "only GET /metrics is served here");
        return;
    }
    enum prom_format f = prom_format_from_accept(http_request_header(req, "Accept"));
    struct prom_writer *w = NULL;
    int r = prom_writer_new(f, &w);
    pthread_mutex_lock(&d->lock);
    if (r >= 0)
        r = render_jobs(w, d);
    if (r >= 0)
        r = render_per_queue(w, d);
    if (r >= 0)
        r = render_quotas(w, d);
    if (r >= 0)
        r = render_node(w, d);
    pthread_mutex_unlock(&d->lock);
    char *text = NULL;
    size_t len = 0;
    if (r >= 0)
        r = prom_writer_finish(TAKE_PTR(w), &text, &len);
    prom_writer_free(w);
    if (r < 0) {
        http_reply_error(reply, 500, "rendering the metrics failed: %s", strerror(-r));
        return;
    }
    http_reply_take(reply, 200, prom_content_type(f), text, len, true);
}

int metrics_start(struct gpuqd *d, struct errmsg *e)
{
    if (!d->cfg.metrics_listen || !*d->cfg.metrics_listen)
        return 0;
    return http_server_new_tcp(d->cfg.metrics_listen, handle, d, &d->metrics, e);
}
