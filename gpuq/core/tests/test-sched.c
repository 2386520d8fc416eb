/* Tests for one scheduling pass: order, quotas and service classes, preemption (who, how few,
 * waiting for capacity being freed), starvation reservations with backfill, drains, holds,
 * backoff, fair share, MIG slots and start estimates. Each case builds a node, queues and jobs
 * by hand and checks the decisions. */
#include <math.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>

#include "test-main.h"

#include "gpuq/core/sched.h"

#define MAX_JOBS 16

struct world {
    struct res_node node;
    struct queue queues[4];
    struct quota quotas[4];
    struct sched_config config;
    struct job jobs[MAX_JOBS];
    struct sched_job sj[MAX_JOBS];
    size_t n;
    struct sched_input in;
    struct sched_result res;
};

/* n whole H100s, then MIG instances of 1g.10gb. */
static void node_init(struct world *w, unsigned whole, unsigned mig)
{
    memset(&w->node, 0, sizeof(w->node));
    for (unsigned i = 0; i < whole + mig; i++) {
        struct res_slot *s = &w->node.slots[w->node.n_slots++];
        s->gpu_index = i < whole ? i : whole;
        s->mig = i >= whole;
        snprintf(s->model, sizeof(s->model), "NVIDIA H100 80GB HBM3");
        snprintf(s->uuid, sizeof(s->uuid), "%s-%u", s->mig ? "MIG" : "GPU", i);
        if (s->mig)
            snprintf(s->profile, sizeof(s->profile), "1g.10gb");
    }
    w->node.cpu_milli = 64000;
    w->node.mem_bytes = 1ull << 40;
}

static struct world *world_new(unsigned whole, unsigned mig, unsigned n_queues)
{
    struct world *w = calloc(1, sizeof(*w));
    assert_non_null(w);
    node_init(w, whole, mig);
    for (unsigned q = 0; q < n_queues; q++) {
        snprintf(w->queues[q].name, sizeof(w->queues[q].name), "q%u", q);
        w->queues[q].class = SERVICE_BURSTABLE;
    }
    w->config.queues = w->queues;
    w->config.n_queues = n_queues;
    w->config.starve_after_s = 0;
    return w;
}

static size_t add_job(struct world *w, unsigned queue, unsigned gpus, enum job_state state)
{
    size_t i = w->n++;
    struct job *j = &w->jobs[i];
    j->id = i + 1;
    j->uid = 1000;
    j->state = state;
    j->submit_time = (double)i;
    j->spec.res.gpu_kind = gpus ? JOB_GPU_WHOLE : JOB_GPU_NONE;
    j->spec.res.gpus = gpus;
    j->spec.grace_s = 30;
    w->sj[i] = (struct sched_job){.job = j, .queue = queue};
    return i;
}

/* A running job on the given slots. */
static size_t add_running(struct world *w, unsigned queue, unsigned first, unsigned gpus,
                          double start)
{
    size_t i = add_job(w, queue, gpus, JOB_RUNNING);
    for (unsigned k = first; k < first + gpus; k++)
        w->jobs[i].slots[k / 64] |= 1ull << (k % 64);
    w->jobs[i].start_time = start;
    return i;
}

static void quota(struct world *w, unsigned q, uint64_t gpus)
{
    assert_int_equal(quota_set(&w->quotas[q], QUOTA_GPUS, "", gpus), 0);
}

static void pass(struct world *w, double now)
{
    sched_result_done(&w->res);
    w->in = (struct sched_input){.node = &w->node,
                                 .config = &w->config,
                                 .quotas = w->quotas,
                                 .jobs = w->sj,
                                 .n_jobs = w->n,
                                 .now = now};
    assert_int_equal(sched_pass(&w->in, &w->res), 0);
}

static void world_free(struct world *w)
{
    sched_result_done(&w->res);
    free(w);
}

static bool started(const struct world *w, size_t i)
{
    for (size_t k = 0; k < w->res.n_actions; k++)
        if (w->res.actions[k].kind == SCHED_START && w->res.actions[k].job == i)
            return true;
    return false;
}

static bool preempted(const struct world *w, size_t i)
{
    for (size_t k = 0; k < w->res.n_actions; k++)
        if (w->res.actions[k].kind == SCHED_PREEMPT && w->res.actions[k].job == i)
            return true;
    return false;
}

static size_t count(const struct world *w, enum sched_action_kind kind)
{
    size_t n = 0;
    for (size_t k = 0; k < w->res.n_actions; k++)
        n += w->res.actions[k].kind == kind;
    return n;
}

static void test_higher_queue_priority_first(void **state)
{
    struct world *w = world_new(1, 0, 2);
    w->queues[1].priority = 10;
    size_t low = add_job(w, 0, 1, JOB_PENDING);
    size_t high = add_job(w, 1, 1, JOB_PENDING);
    size_t lower = add_job(w, 0, 1, JOB_PENDING);
    pass(w, 100);
    assert_true(started(w, high));
    assert_false(started(w, low));
    /* The first in line waits for capacity, the one behind it for the one ahead. */
    assert_string_equal(w->res.reasons[low], "Resources");
    assert_string_equal(w->res.reasons[lower], "Priority");
    world_free(w);
}

static void test_interactive_before_priority(void **state)
{
    struct world *w = world_new(1, 0, 2);
    w->queues[1].priority = 10;
    size_t batch = add_job(w, 1, 1, JOB_PENDING);
    size_t inter = add_job(w, 0, 1, JOB_PENDING);
    w->jobs[inter].spec.interactive = true;
    pass(w, 100);
    assert_true(started(w, inter));
    assert_false(started(w, batch));
    world_free(w);
}

static void test_guaranteed_stays_within_quota(void **state)
{
    struct world *w = world_new(4, 0, 1);
    w->queues[0].class = SERVICE_GUARANTEED;
    quota(w, 0, 1);
    size_t a = add_job(w, 0, 1, JOB_PENDING);
    size_t b = add_job(w, 0, 1, JOB_PENDING);
    pass(w, 100);
    assert_true(started(w, a));
    assert_false(started(w, b));
    assert_string_equal(w->res.reasons[b], "QuotaExceeded");
    world_free(w);
}

static void test_burstable_borrows_then_gives_back(void **state)
{
    struct world *w = world_new(2, 0, 2);
    quota(w, 0, 1);
    quota(w, 1, 1);
    /* q0 runs two: the later one borrows q1's idle GPU. */
    size_t own = add_running(w, 0, 0, 1, 10);
    size_t borrower = add_running(w, 0, 1, 1, 20);
    size_t claim = add_job(w, 1, 1, JOB_PENDING);
    pass(w, 1000);
    assert_true(preempted(w, borrower));
    assert_false(preempted(w, own));
    assert_false(started(w, claim));
    assert_string_equal(w->res.reasons[claim], "Preempting");
    assert_int_equal(w->res.actions[0].for_job, claim);
    world_free(w);
}

static void test_guaranteed_never_preempted(void **state)
{
    struct world *w = world_new(1, 0, 2);
    w->queues[0].class = SERVICE_GUARANTEED;
    w->queues[1].priority = 100;
    add_running(w, 0, 0, 1, 10);
    size_t p = add_job(w, 1, 1, JOB_PENDING);
    w->jobs[p].priority = 1000;
    pass(w, 1000);
    assert_int_equal(count(w, SCHED_PREEMPT), 0);
    assert_false(started(w, p));
    world_free(w);
}

static void test_besteffort_goes_first_then_least_lost_work(void **state)
{
    struct world *w = world_new(3, 0, 3);
    w->queues[0].class = SERVICE_BESTEFFORT;
    quota(w, 1, 0); /* q1 runs only by borrowing */
    quota(w, 2, 3);
    size_t be = add_running(w, 0, 0, 1, 10);
    size_t borrow_old_ckpt = add_running(w, 1, 1, 1, 10);
    size_t borrow_new_ckpt = add_running(w, 1, 2, 1, 10);
    w->jobs[borrow_old_ckpt].last_checkpoint = 100;
    w->jobs[borrow_new_ckpt].last_checkpoint = 900;
    size_t p = add_job(w, 2, 2, JOB_PENDING);
    pass(w, 1000);
    /* Two GPUs: the BestEffort job, then the borrower that loses least since its checkpoint. */
    assert_true(preempted(w, be));
    assert_true(preempted(w, borrow_new_ckpt));
    assert_false(preempted(w, borrow_old_ckpt));
    assert_int_equal(count(w, SCHED_PREEMPT), 2);
    assert_string_equal(w->res.reasons[p], "Preempting");
    world_free(w);
}

static void test_fewest_victims(void **state)
{
    struct world *w = world_new(3, 0, 2);
    w->queues[0].class = SERVICE_BESTEFFORT;
    quota(w, 1, 3);
    size_t small = add_running(w, 0, 0, 1, 10);
    size_t big = add_running(w, 0, 1, 2, 20);
    w->jobs[small].last_checkpoint = 999; /* cheapest, so considered first */
    add_job(w, 1, 2, JOB_PENDING);
    pass(w, 1000);
    assert_true(preempted(w, big));
    assert_false(preempted(w, small));
    world_free(w);
}

static void test_min_runtime_protects(void **state)
{
    struct world *w = world_new(1, 0, 2);
    w->queues[0].class = SERVICE_BESTEFFORT;
    w->queues[0].min_runtime_s = 600;
    size_t be = add_running(w, 0, 0, 1, 900);
    add_job(w, 1, 1, JOB_PENDING);
    pass(w, 1000);
    assert_false(preempted(w, be));
    pass(w, 1500);
    assert_true(preempted(w, be));
    world_free(w);
}

static void test_same_queue_lower_priority_preempted(void **state)
{
    struct world *w = world_new(1, 0, 1);
    size_t low = add_running(w, 0, 0, 1, 10);
    w->jobs[low].priority = 1;
    size_t high = add_job(w, 0, 1, JOB_PENDING);
    w->jobs[high].priority = 5;
    size_t same = add_job(w, 0, 1, JOB_PENDING);
    w->jobs[same].priority = 1;
    pass(w, 1000);
    assert_true(preempted(w, low));
    assert_int_equal(count(w, SCHED_PREEMPT), 1);
    world_free(w);
}

static void test_waits_for_stopping_jobs_instead_of_more_victims(void **state)
{
    struct world *w = world_new(2, 0, 2);
    w->queues[0].class = SERVICE_BESTEFFORT;
    size_t stopping = add_running(w, 0, 0, 1, 10);
    w->jobs[stopping].state = JOB_STOPPING;
    w->jobs[stopping].stop_deadline = 1030;
    size_t other = add_running(w, 0, 1, 1, 10);
    size_t p = add_job(w, 1, 1, JOB_PENDING);
    pass(w, 1000);
    assert_int_equal(count(w, SCHED_PREEMPT), 0);
    assert_false(preempted(w, other));
    assert_string_equal(w->res.reasons[p], "Preempting");
    world_free(w);
}

static void test_besteffort_preempts_nothing(void **state)
{
    struct world *w = world_new(1, 0, 2);
    w->queues[1].class = SERVICE_BESTEFFORT;
    w->queues[1].priority = 100;
    quota(w, 0, 0);
    add_running(w, 0, 0, 1, 10); /* borrowing */
    add_job(w, 1, 1, JOB_PENDING);
    pass(w, 1000);
    assert_int_equal(count(w, SCHED_PREEMPT), 0);
    world_free(w);
}

static void test_starving_job_reserved_and_backfill(void **state)
{
    struct world *w = world_new(2, 0, 1);
    w->config.starve_after_s = 3600;
    size_t r1 = add_running(w, 0, 0, 1, 0);
    w->jobs[r1].spec.time_limit_s = 100;
    w->jobs[r1].priority = 10; /* so that big cannot preempt it */
    size_t big = add_job(w, 0, 2, JOB_PENDING);
    w->jobs[big].priority = 10;
    w->jobs[big].submit_time = -5000; /* waited past starve_after */
    size_t short_job = add_job(w, 0, 1, JOB_PENDING);
    w->jobs[short_job].spec.time_limit_s = 50;
    size_t long_job = add_job(w, 0, 1, JOB_PENDING);
    w->jobs[long_job].spec.time_limit_s = 500;
    pass(w, 10);
    assert_false(started(w, big));
    assert_string_equal(w->res.reasons[big], "Reserved");
    assert_true(w->res.reserved_at[big] == 100);
    assert_true(started(w, short_job)); /* ends at 60, before 100 */
    assert_false(started(w, long_job)); /* would delay the reserved job */
    world_free(w);
}

static void test_reservations_never_share_a_slot(void **state)
{
    struct world *w = world_new(2, 0, 1);
    w->config.starve_after_s = 10;
    for (unsigned g = 0; g < 2; g++) {
        size_t r = add_running(w, 0, g, 1, 0);
        w->jobs[r].spec.time_limit_s = 100 * (g + 1);
        w->jobs[r].priority = 10;
    }
    size_t s[4];
    for (unsigned k = 0; k < 4; k++) {
        s[k] = add_job(w, 0, 1, JOB_PENDING);
        w->jobs[s[k]].submit_time = -1000;
    }
    pass(w, 50);
    /* Two slots, two reservations: at 100 and at 200; the others wait without one. */
    assert_true(w->res.reserved_at[s[0]] == 100);
    assert_true(w->res.reserved_at[s[1]] == 200);
    assert_string_equal(w->res.reasons[s[2]], "Resources");
    assert_string_equal(w->res.reasons[s[3]], "Resources");
    world_free(w);
}

static void test_without_starvation_no_reservation(void **state)
{
    struct world *w = world_new(2, 0, 1);
    w->config.starve_after_s = 3600;
    size_t r1 = add_running(w, 0, 0, 1, 0);
    w->jobs[r1].spec.time_limit_s = 100;
    w->jobs[r1].priority = 10;
    size_t big = add_job(w, 0, 2, JOB_PENDING);
    w->jobs[big].priority = 10;
    w->jobs[big].submit_time = 5;
    size_t long_job = add_job(w, 0, 1, JOB_PENDING);
    pass(w, 10);
    assert_true(started(w, long_job));
    assert_string_equal(w->res.reasons[big], "Resources");
    world_free(w);
}

static void test_drained_held_backoff(void **state)
{
    struct world *w = world_new(4, 0, 1);
    size_t held = add_job(w, 0, 1, JOB_PENDING);
    w->jobs[held].held = true;
    size_t backoff = add_job(w, 0, 1, JOB_PENDING);
    w->jobs[backoff].eligible_time = 200;
    size_t never = add_job(w, 0, 9, JOB_PENDING);
    size_t ok = add_job(w, 0, 1, JOB_PENDING);
    pass(w, 100);
    assert_string_equal(w->res.reasons[held], "JobHeldUser");
    assert_string_equal(w->res.reasons[backoff], "BackOff");
    assert_string_equal(w->res.reasons[never], "NeverFits");
    assert_true(started(w, ok));
    w->in.drained = true;
    sched_result_done(&w->res);
    assert_int_equal(sched_pass(&w->in, &w->res), 0);
    assert_int_equal(w->res.n_actions, 0);
    assert_string_equal(w->res.reasons[ok], "Drained");
    world_free(w);
}

static void test_fair_share_and_requeue_order(void **state)
{
    struct world *w = world_new(1, 0, 1);
    size_t heavy = add_job(w, 0, 1, JOB_PENDING);
    w->sj[heavy].usage = 1000;
    size_t light = add_job(w, 0, 1, JOB_PENDING);
    w->sj[light].usage = 10;
    pass(w, 100);
    assert_true(started(w, light));
    size_t requeued = add_job(w, 0, 1, JOB_PENDING);
    w->jobs[requeued].requeue_time = 50;
    w->sj[requeued].usage = 5000;
    pass(w, 100);
    assert_true(started(w, requeued));
    world_free(w);
}

static void test_user_limit(void **state)
{
    struct world *w = world_new(4, 0, 1);
    assert_int_equal(quota_set(&w->queues[0].user_limit, QUOTA_GPUS, "", 2), 0);
    add_running(w, 0, 0, 2, 10);
    size_t more = add_job(w, 0, 1, JOB_PENDING);
    size_t other = add_job(w, 0, 1, JOB_PENDING);
    w->jobs[other].uid = 2000;
    pass(w, 100);
    assert_string_equal(w->res.reasons[more], "UserLimit");
    assert_true(started(w, other));
    world_free(w);
}

static void test_mig_slots(void **state)
{
    struct world *w = world_new(1, 3, 1);
    size_t j = add_job(w, 0, 0, JOB_PENDING);
    w->jobs[j].spec.res.gpu_kind = JOB_GPU_MIG;
    w->jobs[j].spec.res.gpus = 2;
    snprintf(w->jobs[j].spec.res.profile, JOB_PROFILE_MAX, "1g.10gb");
    pass(w, 100);
    assert_true(started(w, j));
    /* Slots 1 and 2: the first two MIG instances, not the whole GPU 0. */
    assert_int_equal(w->res.actions[0].slots.w[0], 0x6);
    char buf[256];
    assert_string_equal(res_uuids(&w->node, &w->res.actions[0].slots, buf, sizeof(buf)),
                        "MIG-1,MIG-2");
    world_free(w);
}

static void test_estimate(void **state)
{
    struct world *w = world_new(1, 0, 1);
    size_t r = add_running(w, 0, 0, 1, 0);
    w->jobs[r].spec.time_limit_s = 100;
    size_t a = add_job(w, 0, 1, JOB_PENDING);
    w->jobs[a].spec.time_limit_s = 50;
    size_t b = add_job(w, 0, 1, JOB_PENDING);
    size_t c = add_job(w, 0, 1, JOB_PENDING);
    w->in = (struct sched_input){.node = &w->node,
                                 .config = &w->config,
                                 .quotas = w->quotas,
                                 .jobs = w->sj,
                                 .n_jobs = w->n,
                                 .now = 10};
    double t[MAX_JOBS];
    assert_int_equal(sched_estimate(&w->in, 100, t), 0);
    assert_true(t[a] == 100);
    assert_true(t[b] == 150);
    assert_true(isinf(t[c])); /* b has no limit */
    world_free(w);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_higher_queue_priority_first),
        cmocka_unit_test(test_interactive_before_priority),
        cmocka_unit_test(test_guaranteed_stays_within_quota),
        cmocka_unit_test(test_burstable_borrows_then_gives_back),
        cmocka_unit_test(test_guaranteed_never_preempted),
        cmocka_unit_test(test_besteffort_goes_first_then_least_lost_work),
        cmocka_unit_test(test_fewest_victims),
        cmocka_unit_test(test_min_runtime_protects),
        cmocka_unit_test(test_same_queue_lower_priority_preempted),
        cmocka_unit_test(test_waits_for_stopping_jobs_instead_of_more_victims),
        cmocka_unit_test(test_besteffort_preempts_nothing),
        cmocka_unit_test(test_starving_job_reserved_and_backfill),
        cmocka_unit_test(test_without_starvation_no_reservation),
        cmocka_unit_test(test_reservations_never_share_a_slot),
        cmocka_unit_test(test_drained_held_backoff),
        cmocka_unit_test(test_fair_share_and_requeue_order),
        cmocka_unit_test(test_user_limit),
        cmocka_unit_test(test_mig_slots),
        cmocka_unit_test(test_estimate),
    };
    return test_run_cases(tests);
}
