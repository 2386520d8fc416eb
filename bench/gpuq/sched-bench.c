/* sched-bench: times one scheduling pass of gpuq (gpuq/core/sched.h) over many pending jobs on a
 * node of whole GPUs, without gpuqd around it: the pure pass, as gpuqd calls it on every change.
 *
 *   sched-bench [-n JOBS] [-g GPUS] [-r RUNS]     (defaults: 10000 jobs, 8 GPUs, 15 runs)
 *
 * The node: GPUS whole H100s, 2 CPUs per GPU, 128 GiB per GPU. Three queues as a lab would set
 * them up (deploy/gpuq/gpuqd.conf), and a fourth for the last scenario: interactive (Guaranteed, 1
 * GPU, one job per user), batch (Burstable, half the GPUs, 4 GPUs per user, 10 minutes of
 * min_runtime) and background (BestEffort). starve_after is 2 h; submit times are spread over the
 * last 3 h, so about a third of the jobs are starving. The jobs, from a fixed seed: 64 users with
 * fair-share usage, 5 % in the interactive queue (flagged interactive), 70 % batch, 25 %
 * background; 65 % ask 1 GPU, 20 % 2, 10 % 4, 5 % all of them (every job asks for GPUs); some ask
 * CPUs and memory; time limits from 10 minutes to a day, or none (the queue's default); priority
 * classes -100, 0 and 1000.
 *
 * Scenarios, each timed RUNS times after one warm-up (min and median of sched_pass alone; the
 * result is freed outside the timing):
 *   idle  nothing runs: the pass fills the node from the head of the order;
 *   busy  every GPU runs a 1-GPU job (batch and background, some within min_runtime): nothing
 *         fits, so every job looks for victims and every starving one reserves;
 *   held  every pending job held (what gpuqd passes over while jobs are submitted held);
 *   uniform  the end-to-end case of gpuqbench.py (and Slurm's): every job asks 1 GPU in one
 *         Burstable queue without limits ("plain"), none starving, nothing runs.
 * One line per scenario, words "key=value", for bench/gpuq/gpuqbench.py and for people. */
#include <errno.h>
#include <getopt.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "gpuq/core/sched.h"
#include "lib/clock.h"
#include "lib/macro.h"

#define NOW       1800000000.0 /* a fixed wall clock: the pass only compares times */
#define N_USERS   64
#define N_QUEUES  4
#define MAX_RUNS  1000
#define GIB       (UINT64_C(1) << 30)
#define SECS_HOUR 3600.0

struct world {
    struct res_node node;
    struct queue queues[N_QUEUES];
    struct quota quotas[N_QUEUES];
    struct sched_config config;
    struct job *jobs;
    struct sched_job *sj;
    size_t n_jobs;
    unsigned n_running;
};

/* xorshift64*: the same jobs on every machine and every run. */
static uint64_t rng_state = UINT64_C(0x9e3779b97f4a7c15);

static uint64_t rng_next(void)
{
    rng_state ^= rng_state >> 12;
    rng_state ^= rng_state << 25;
    rng_state ^= rng_state >> 27;
    return rng_state * UINT64_C(2685821657736338717);
}

/* A number in [0, n). */
static unsigned rng_below(unsigned n)
{
    return (unsigned)(rng_next() % n);
}

static double rng_unit(void)
{
    return (double)(rng_next() >> 11) / (double)(UINT64_C(1) << 53);
}

static void node_init(struct res_node *node, unsigned gpus)
{
    memset(node, 0, sizeof(*node));
    for (unsigned i = 0; i < gpus; i++) {
        struct res_slot *s = &node->slots[node->n_slots++];
        s->gpu_index = i;
        snprintf(s->model, sizeof(s->model), "NVIDIA H100 80GB HBM3");
        snprintf(s->uuid, sizeof(s->uuid), "GPU-%08x-0000-0000-0000-%012x", i, i);
    }
    node->cpu_milli = 2000 * gpus;
    node->mem_bytes = 128 * GIB * gpus;
}

static void queue_init(struct queue *q, const char *name, int priority, enum service_class c)
{
    memset(q, 0, sizeof(*q));
    snprintf(q->name, sizeof(q->name), "%s", name);
    q->priority = priority;
    q->class = c;
}

/* The queues of the header comment; their quotas are the ones in effect. */
static int config_init(struct world *w, unsigned gpus)
{
    struct queue *q = w->queues;
    queue_init(&q[0], "interactive", 100, SERVICE_GUARANTEED);
    queue_init(&q[1], "batch", 50, SERVICE_BURSTABLE);
    queue_init(&q[2], "background", 0, SERVICE_BESTEFFORT);
    queue_init(&q[3], "plain", 50, SERVICE_BURSTABLE);
    int r = quota_set(&q[0].quota, QUOTA_GPUS, "", 1);
    if (r == 0)
        r = quota_set(&q[0].user_limit, QUOTA_JOBS, "", 1);
    if (r == 0)
        r = quota_set(&q[1].quota, QUOTA_GPUS, "", gpus / 2 ? gpus / 2 : 1);
    if (r == 0)
        r = quota_set(&q[1].user_limit, QUOTA_GPUS, "", 4);
    if (r == 0)
        r = quota_set(&q[2].user_limit, QUOTA_JOBS, "", 8);
    if (r < 0)
        return r;
    q[0].default_time_s = 2 * SECS_HOUR;
    q[1].default_time_s = 12 * SECS_HOUR;
    q[1].min_runtime_s = 600;
    for (unsigned i = 0; i < N_QUEUES; i++)
        w->quotas[i] = q[i].quota;
    w->config = (struct sched_config){.fairshare_half_life_s = 7 * 24 * SECS_HOUR,
                                      .starve_after_s = 2 * SECS_HOUR,
                                      .n_queues = N_QUEUES,
                                      .queues = q};
    return 0;
}

static unsigned pick_gpus(unsigned gpus)
{
    unsigned x = rng_below(100);
    unsigned n = x < 65 ? 1 : x < 85 ? 2 : x < 95 ? 4 : gpus;
    return n > gpus ? gpus : n;
}

/* One pending job i (id i + 1) of the mix in the header comment. */
static void job_init(struct world *w, size_t i, unsigned gpus)
{
    static const int classes[] = {-100, 0, 0, 0, 1000};
    static const double limits[] = {0, 600, 3600, 4 * 3600, 24 * 3600};
    struct job *j = &w->jobs[i];
    unsigned x = rng_below(100), queue = x < 5 ? 0 : x < 75 ? 1 : 2;
    memset(j, 0, sizeof(*j));
    j->id = i + 1;
    j->uid = 1000 + rng_below(N_USERS);
    j->gid = 100;
    j->state = JOB_PENDING;
    j->exit_status = -1;
    j->priority = classes[rng_below(ELEMENTSOF(classes))];
    j->submit_time = NOW - 3 * SECS_HOUR * rng_unit();
    j->spec.interactive = queue == 0;
    j->spec.grace_s = 30;
    j->spec.checkpoint_signal = 15;
    j->spec.time_limit_s = limits[rng_below(ELEMENTSOF(limits))];
    unsigned n = queue == 0 ? 1 : pick_gpus(gpus);
    j->spec.res.gpu_kind = JOB_GPU_WHOLE;
    j->spec.res.gpus = n;
    if (rng_below(4) == 0)
        j->spec.res.cpu_milli = 500 * (1 + rng_below(8));
    if (rng_below(4) == 0)
        j->spec.res.mem_bytes = GIB * (1 + rng_below(64));
    w->sj[i] = (struct sched_job){
        .job = j, .queue = queue, .usage = rng_unit() * 8 * SECS_HOUR * (j->uid % 8)};
}

/* Turns job i into a 1-GPU job running on slot. */
static void make_running(struct world *w, size_t i, unsigned slot)
{
    struct job *j = &w->jobs[i];
    j->state = JOB_RUNNING;
    j->spec.interactive = false;
    j->spec.res = (struct job_resources){.gpu_kind = JOB_GPU_WHOLE, .gpus = 1};
    j->slots[slot / 64] |= UINT64_C(1) << (slot % 64);
    j->start_time = NOW - (slot % 3 == 0 ? 300 : SECS_HOUR * (1 + slot));
    j->first_start_time = j->start_time;
    j->runs = 1;
    w->sj[i].queue = slot % 2 ? 1 : 2;
}

static int world_init(struct world *w, size_t n_jobs, unsigned gpus)
{
    memset(w, 0, sizeof(*w));
    node_init(&w->node, gpus);
    int r = config_init(w, gpus);
    if (r < 0)
        return r;
    w->n_jobs = n_jobs;
    w->jobs = calloc(n_jobs + gpus, sizeof(*w->jobs));
    w->sj = calloc(n_jobs + gpus, sizeof(*w->sj));
    if (!w->jobs || !w->sj)
        return -ENOMEM;
    rng_state = UINT64_C(0x9e3779b97f4a7c15);
    for (size_t i = 0; i < n_jobs + gpus; i++)
        job_init(w, i, gpus);
    return 0;
}

static void world_done(struct world *w)
{
    free(w->jobs);
    free(w->sj);
}

static int cmp_double(const void *a, const void *b)
{
    double x = *(const double *)a, y = *(const double *)b;
    return x < y ? -1 : x > y;
}

struct timing {
    double min_us, median_us;
    size_t starts, preempts, reserved;
};

static void count_result(const struct sched_result *res, size_t n_jobs, struct timing *t)
{
    t->starts = t->preempts = t->reserved = 0;
    for (size_t k = 0; k < res->n_actions; k++) {
        if (res->actions[k].kind == SCHED_START)
            t->starts++;
        else
            t->preempts++;
    }
    for (size_t i = 0; i < n_jobs; i++)
        t->reserved += res->reserved_at[i] > 0;
}

/* Times sched_pass over the world's jobs runs times after one warm-up. 0 or -ENOMEM. */
static int time_pass(const struct world *w, unsigned runs, struct timing *ret)
{
    size_t n = w->n_jobs + w->n_running;
    struct sched_input in = {.node = &w->node,
                             .config = &w->config,
                             .quotas = w->quotas,
                             .jobs = w->sj,
                             .n_jobs = n,
                             .now = NOW};
    double us[MAX_RUNS];
    for (unsigned k = 0; k <= runs; k++) {
        struct sched_result res;
        double t0 = clock_now_sec();
        int r = sched_pass(&in, &res);
        double t1 = clock_now_sec();
        if (r < 0)
            return r;
        if (k > 0)
            us[k - 1] = (t1 - t0) * 1e6;
        count_result(&res, n, ret);
        sched_result_done(&res);
    }
    qsort(us, runs, sizeof(us[0]), cmp_double);
    ret->min_us = us[0];
    ret->median_us = runs % 2 ? us[runs / 2] : (us[runs / 2 - 1] + us[runs / 2]) / 2;
    return 0;
}

static int scenario(const char *name, const struct world *w, unsigned runs)
{
    struct timing t;
    int r = time_pass(w, runs, &t);
    if (r < 0) {
        fprintf(stderr, "sched-bench: %s: sched_pass failed: %s\n", name, strerror(-r));
        return r;
    }
    printf("scenario=%s jobs=%zu running=%u gpus=%u runs=%u min_us=%.1f median_us=%.1f "
           "starts=%zu preempts=%zu reserved=%zu\n",
           name, w->n_jobs, w->n_running, w->node.n_slots, runs, t.min_us, t.median_us, t.starts,
           t.preempts, t.reserved);
    fflush(stdout);
    return 0;
}

/* idle, then busy (the extra jobs run), then held: the same pending jobs throughout. */
static int run_all(struct world *w, unsigned gpus, unsigned runs)
{
    int r = scenario("idle", w, runs);
    if (r < 0)
        return r;
    /* The running jobs sit after the pending ones, so that pending indices stay the same. */
    for (unsigned s = 0; s < gpus; s++)
        make_running(w, w->n_jobs + s, s);
    w->n_running = gpus;
    r = scenario("busy", w, runs);
    if (r < 0)
        return r;
    w->n_running = 0;
    for (size_t i = 0; i < w->n_jobs; i++)
        w->jobs[i].held = true;
    r = scenario("held", w, runs);
    if (r < 0)
        return r;
    /* As bench/gpuq/gpuqbench.py's gpuqd and Slurm's partition: one queue without limits, 1
     * GPU each, all submitted in the last minute (none starving), in submission order. */
    for (size_t i = 0; i < w->n_jobs; i++) {
        struct job *j = &w->jobs[i];
        j->held = false;
        j->spec.interactive = false;
        j->priority = 0;
        j->submit_time = NOW - 60 + 60.0 * (double)i / (double)w->n_jobs;
        j->spec.res = (struct job_resources){.gpu_kind = JOB_GPU_WHOLE, .gpus = 1};
        w->sj[i].queue = 3;
        w->sj[i].usage = 0;
    }
    return scenario("uniform", w, runs);
}

static int parse_count(const char *s, unsigned long lo, unsigned long hi, unsigned long *ret)
{
    char *end;
    errno = 0;
    unsigned long v = strtoul(s, &end, 10);
    if (errno || end == s || *end || v < lo || v > hi)
        return -EINVAL;
    *ret = v;
    return 0;
}

int main(int argc, char *argv[])
{
    unsigned long n_jobs = 10000, gpus = 8, runs = 15;
    int opt;
    while ((opt = getopt(argc, argv, "n:g:r:h")) != -1) {
        int r = 0;
        if (opt == 'n')
            r = parse_count(optarg, 1, 10000000, &n_jobs);
        else if (opt == 'g')
            r = parse_count(optarg, 1, 64, &gpus);
        else if (opt == 'r')
            r = parse_count(optarg, 1, MAX_RUNS, &runs);
        if (opt == 'h' || opt == '?' || r < 0) {
            fprintf(opt == 'h' ? stdout : stderr,
                    "Usage: sched-bench [-n JOBS (1..10000000)] [-g GPUS (1..64)] "
                    "[-r RUNS (1..%d)]\n",
                    MAX_RUNS);
            return opt == 'h' ? 0 : 2;
        }
    }
    struct world w;
    int r = world_init(&w, n_jobs, (unsigned)gpus);
    if (r == 0)
        r = run_all(&w, (unsigned)gpus, (unsigned)runs);
    else
        fprintf(stderr, "sched-bench: setting up: %s\n", strerror(-r));
    world_done(&w);
    return r < 0 ? 1 : 0;
}
