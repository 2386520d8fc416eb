/* Tests for gpuqd's config file: the defaults without one, a full file, the example in deploy/,
 * and each mistake an administrator makes, named by file:line, section and key. */
#include <errno.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>

#include "test-main.h"

#include "gpuq/policy/calendar.h"
#include "gpuq/policy/gpuq-config.h"
#include "lib/macro.h"

static int load(const char *text, struct gpuqd_config *c, struct errmsg *e)
{
    return gpuqd_config_load_string("gpuqd.conf", text, strlen(text), c, e);
}

static void test_defaults(void **state)
{
    struct gpuqd_config c;
    struct errmsg e = {""};
    assert_int_equal(gpuqd_config_load(NULL, &c, &e), 0);
    assert_string_equal(c.socket, "/run/gpuq/gpuq.sock");
    assert_string_equal(c.state_dir, "/var/lib/gpuq");
    assert_string_equal(c.metrics_listen, "127.0.0.1:9430");
    assert_null(c.admin_group);
    assert_string_equal(c.audit_log, "/var/log/gpunode/gpuq-audit.log");
    assert_null(c.capsule);
    assert_true(c.drain_grace_max_s == 0);
    assert_null(c.sched.time_zone);
    assert_true(c.sched.fairshare_half_life_s == 7 * 86400.0);
    assert_true(c.sched.starve_after_s == 3600.0);
    assert_true(c.sched.backoff_base_s == 10.0);
    assert_true(c.sched.backoff_max_s == 360.0);
    assert_int_equal(c.sched.n_queues, 1);
    assert_string_equal(c.sched.queues[0].name, "default");
    assert_int_equal(c.sched.queues[0].class, SERVICE_BURSTABLE);
    assert_int_equal(c.sched.queues[0].priority, 0);
    assert_int_equal(c.sched.queues[0].quota.n, 0);
    assert_int_equal(c.sched.queues[0].n_windows, 0);
    assert_int_equal(c.sched.n_classes, 0);
    assert_null(c.sched.default_class);
    gpuqd_config_done(&c);
    gpuqd_config_done(&c); /* a second time is harmless */
}

static const char full[] = "[gpuqd]\n"
                           "socket = /tmp/q.sock\n"
                           "metrics_listen =\n"
                           "admin_group = gpuadmin\n"
                           "capsule = /usr/bin/capsule\n"
                           "drain_grace_max = 90s\n"
                           "[scheduler]\n"
                           "time_zone = America/New_York\n"
                           "backoff_base = 5s\n"
                           "backoff_max = 1m\n"
                           "default_priority_class = normal\n"
                           "[queue.batch]\n"
                           "priority = -5\n"
                           "class = BestEffort\n"
                           "gpus = 2\n"
                           "gpus.H100 = 1\n"
                           "mig.1g.10gb = 7\n"
                           "cpus = 0.5\n"
                           "memory = 32Gi\n"
                           "user.gpus = 1\n"
                           "user.cpus = 250m\n"
                           "jobs = 10\n"
                           "default_time = 1:00:00\n"
                           "max_time = 2-00:00\n"
                           "min_runtime = 5m\n"
                           "[priority-class.normal]\n"
                           "value = -3\n"
                           "[window.nights]\n"
                           "queue = batch, second\n"
                           "days = Mon-Fri\n"
                           "start = 20:00\n"
                           "end = 8:00\n"
                           "gpus = 4\n"
                           "[queue.second]\n"
                           "priority = 7\n"
                           "[window.xmas]\n"
                           "queue = second\n"
                           "dates = 2026-12-24..2026-12-26, 2027-01-01\n"
                           "days = fri-mon\n"
                           "end = 24:00\n"
                           "start = 12:00\n"
                           "jobs = 0\n";

static void test_full(void **state)
{
    struct gpuqd_config c;
    struct errmsg e = {""};
    if (load(full, &c, &e) < 0)
        fail_msg("%s", e.text);
    assert_string_equal(c.socket, "/tmp/q.sock");
    assert_string_equal(c.state_dir, "/var/lib/gpuq");
    assert_string_equal(c.metrics_listen, "");
    assert_string_equal(c.admin_group, "gpuadmin");
    assert_string_equal(c.capsule, "/usr/bin/capsule");
    assert_true(c.drain_grace_max_s == 90.0);
    assert_string_equal(c.sched.time_zone, "America/New_York");
    assert_true(c.sched.backoff_base_s == 5.0 && c.sched.backoff_max_s == 60.0);
    assert_string_equal(c.sched.default_class, "normal");
    assert_int_equal(c.sched.n_classes, 1);
    assert_int_equal(c.sched.classes[0].value, -3);

    /* queues in file order: the first is the default */
    assert_int_equal(c.sched.n_queues, 2);
    const struct queue *b = &c.sched.queues[0], *s = &c.sched.queues[1];
    assert_string_equal(b->name, "batch");
    assert_string_equal(s->name, "second");
    assert_int_equal(b->priority, -5);
    assert_int_equal(b->class, SERVICE_BESTEFFORT);
    assert_int_equal(s->class, SERVICE_BURSTABLE);
    assert_int_equal(quota_get(&b->quota, QUOTA_GPUS, ""), 2);
    assert_int_equal(quota_get(&b->quota, QUOTA_GPU_MODEL, "H100"), 1);
    assert_int_equal(quota_get(&b->quota, QUOTA_MIG, "1g.10gb"), 7);
    assert_int_equal(quota_get(&b->quota, QUOTA_CPUS, ""), 500);
    assert_int_equal(quota_get(&b->quota, QUOTA_MEMORY, ""), 32ull << 30);
    assert_int_equal(quota_get(&b->quota, QUOTA_JOBS, ""), 10);
    assert_int_equal(b->user_limit.n, 2);
    assert_int_equal(quota_get(&b->user_limit, QUOTA_GPUS, ""), 1);
    assert_int_equal(quota_get(&b->user_limit, QUOTA_CPUS, ""), 250);
    assert_true(b->default_time_s == 3600 && b->max_time_s == 172800 && b->min_runtime_s == 300);

    /* a window naming two queues is in each */
    assert_int_equal(b->n_windows, 1);
    assert_int_equal(s->n_windows, 2);
    const struct window *n = &b->windows[0];
    assert_string_equal(n->name, "nights");
    assert_int_equal(n->days, 0x1f);
    assert_int_equal(n->start_min, 20 * 60);
    assert_int_equal(n->end_min, 8 * 60);
    assert_int_equal(quota_get(&n->quota, QUOTA_GPUS, ""), 4);
    assert_memory_equal(&s->windows[0], n, sizeof(*n));
    const struct window *x = &s->windows[1];
    assert_string_equal(x->name, "xmas");
    assert_int_equal(x->days, 0x71); /* fri, sat, sun, mon */
    assert_int_equal(x->n_dates, 2);
    assert_int_equal(x->from[0].year, 2026);
    assert_int_equal(x->to[0].day, 26);
    assert_int_equal(x->from[1].month, 1);
    assert_int_equal(x->to[1].day, 1);
    assert_int_equal(x->start_min, 12 * 60);
    assert_int_equal(x->end_min, 24 * 60);
    assert_int_equal(quota_get(&x->quota, QUOTA_JOBS, ""), 0);
    assert_ptr_equal(sched_config_queue(&c.sched, "second"), s);
    gpuqd_config_done(&c);
}

/* deploy/gpuq/gpuqd.conf loads, and says what its comments say. */
static void test_example(void **state)
{
    const char *dir = getenv("GPUQ_TEST_DEPLOY_DIR");
    assert_non_null(dir);
    char path[4096];
    snprintf(path, sizeof(path), "%s/gpuqd.conf", dir);
    struct gpuqd_config c;
    struct errmsg e = {""};
    if (gpuqd_config_load(path, &c, &e) < 0)
        fail_msg("%s", e.text);
    assert_int_equal(c.sched.n_queues, 3);
    const struct queue *i = sched_config_queue(&c.sched, "interactive");
    const struct queue *b = sched_config_queue(&c.sched, "batch");
    const struct queue *bg = sched_config_queue(&c.sched, "background");
    assert_ptr_equal(i, &c.sched.queues[0]);
    assert_int_equal(i->class, SERVICE_GUARANTEED);
    assert_int_equal(i->priority, 100);
    assert_int_equal(b->class, SERVICE_BURSTABLE);
    assert_int_equal(bg->class, SERVICE_BESTEFFORT);
    assert_int_equal(b->n_windows, 3);
    assert_int_equal(i->n_windows, 1);
    assert_int_equal(bg->n_windows, 0);
    assert_string_equal(c.sched.default_class, "normal");

    /* batch has 2 GPUs on a weekday afternoon, 3 at night, 4 on Saturday (Rome time) */
    struct quota q;
    static const struct {
        time_t t;
        uint64_t gpus;
    } at[] = {
        {1774962000, 2}, /* Tuesday 2026-03-31 15:00 CEST */
        {1774983600, 3}, /* Tuesday 2026-03-31 21:00 CEST */
        {1774677600, 4}, /* Saturday 2026-03-28 07:00 CET: the night and the weekend */
    };
    for (size_t k = 0; k < ELEMENTSOF(at); k++) {
        assert_int_equal(calendar_quota_at(b, c.sched.time_zone, at[k].t, &q, NULL), 0);
        assert_int_equal(quota_get(&q, QUOTA_GPUS, ""), at[k].gpus);
    }
    gpuqd_config_done(&c);
}

struct bad {
    const char *text;
    const char *error; /* the message, whole */
};

#define Q "[queue.batch]\ngpus = 1\n"

static const struct bad bad[] = {
    {Q "gpsu = 2\n", "gpuqd.conf:3: unknown key 'gpsu' in [queue.batch]"},
    {"[gpuqd]\nsockett = /x\n" Q, "gpuqd.conf:2: unknown key 'sockett' in [gpuqd]"},
    {Q "[queues.x]\ngpus = 1\n",
     "gpuqd.conf:4: [queues.x]: unknown section (gpuqd, scheduler, priority-class.NAME, "
     "queue.NAME, window.NAME)"},
    {"gpus = 1\n" Q, "gpuqd.conf:1: 'gpus' is set before any [section]"},
    {Q "class = gold\n",
     "gpuqd.conf:3: [queue.batch] class: 'gold' is not a service class (guaranteed, burstable, "
     "besteffort)"},
    {Q "priority = high\n", "gpuqd.conf:3: [queue.batch] priority: 'high' is not an integer"},
    {Q "cpus = 1.2345\n",
     "gpuqd.conf:3: [queue.batch] cpus: '1.2345' is not a number of CPUs (like 8, 0.5, 500m)"},
    {Q "memory = lots\n", "gpuqd.conf:3: [queue.batch] memory: 'lots' is not an amount of memory "
                          "(like 64G, 512M, 32Gi)"},
    {Q "gpus.h100 = 1\ngpus.H100 = 2\n",
     "gpuqd.conf:4: [queue.batch] gpus.H100: sets the same limit as 'gpus.h100' on line 3"},
    {Q "max_time = 1:70:00\n",
     "gpuqd.conf:3: [queue.batch] max_time: '1:70:00' is not a time (like 30m, 2h, 1.5d, or "
     "Slurm's HH:MM:SS, D-HH:MM:SS)"},
    {Q "max_time = 1h\ndefault_time = 2h\n",
     "gpuqd.conf:4: [queue.batch] default_time: longer than max_time (1h)"},
    {"[queue.a b]\ngpus = 1\n",
     "gpuqd.conf:2: [queue.a b]: 'a b' is not a queue name (1..63 of A-Z a-z 0-9 . _ -)"},
    {"[gpuqd]\nsocket = /x\n", "gpuqd.conf: no [queue.NAME] section: at least one queue is "
                               "needed (a section counts once it sets a key)"},
    {Q "[window.w]\nqueue = batch, nope\ndays = daily\ngpus = 2\n",
     "gpuqd.conf:4: [window.w] queue: 'nope' is not a queue (no [queue.nope])"},
    {Q "[window.w]\ndays = daily\ngpus = 2\n", "gpuqd.conf:4: [window.w]: queue = NAME is missing"},
    {Q "[window.w]\nqueue = batch\ndays = mon-fry\ngpus = 2\n",
     "gpuqd.conf:5: [window.w] days: 'mon-fry' is not a day or a range of days (like mon-fri, "
     "sat-sun, mon,wed,fri, fri-mon, daily)"},
    {Q "[window.w]\nqueue = batch\ndays = mon-fri, wed\ngpus = 2\n",
     "gpuqd.conf:5: [window.w] days: 'wed' names a day a second time (like mon-fri, sat-sun, "
     "mon,wed,fri, fri-mon, daily)"},
    {Q "[window.w]\nqueue = batch\ndates = 2026-02-30\ngpus = 2\n",
     "gpuqd.conf:5: [window.w] dates: '2026-02-30' is not a date (YYYY-MM-DD) or a range of "
     "dates"},
    {Q "[window.w]\nqueue = batch\ndates = 2026-12-26..2026-12-24\ngpus = 2\n",
     "gpuqd.conf:5: [window.w] dates: '2026-12-26..2026-12-24' ends before it starts"},
    {Q "[window.w]\nqueue = batch\ndates = 2026-12-24..2026-12-26, 2026-12-25\ngpus = 2\n",
     "gpuqd.conf:5: [window.w] dates: '2026-12-25' repeats dates named before it"},
    {Q "[window.nights]\nqueue = batch\ndays = daily\nstart = 25:00\nend = 08:00\ngpus = 2\n",
     "gpuqd.conf:6: [window.nights] start: '25:00' is not a time of day (HH:MM)"},
    {Q "[window.w]\nqueue = batch\ndays = daily\nstart = 24:00\nend = 08:00\ngpus = 2\n",
     "gpuqd.conf:6: [window.w] start: '24:00' is not a time of day (HH:MM)"},
    {Q "[window.w]\nqueue = batch\ndays = daily\nstart = 20:00\nend = 8:5\ngpus = 2\n",
     "gpuqd.conf:7: [window.w] end: '8:5' is not a time of day (HH:MM, or 24:00)"},
    {Q "[window.w]\nqueue = batch\ndays = daily\nstart = 20:00\ngpus = 2\n",
     "gpuqd.conf:6: [window.w] start: needs end as well (or neither, for whole days)"},
    {Q "[window.w]\nqueue = batch\ngpus = 2\n", "gpuqd.conf:4: [window.w]: needs days, dates or "
                                                "both"},
    {Q "[window.w]\nqueue = batch\ndays = daily\n",
     "gpuqd.conf:4: [window.w]: sets no limit (gpus, gpus.MODEL, mig.PROFILE, cpus, memory, "
     "jobs)"},
    {Q "[window.w]\nqueue = batch\ndays = daily\ngpus = 2\nuser.gpus = 1\n",
     "gpuqd.conf:7: unknown key 'user.gpus' in [window.w]"},
    {Q "[scheduler]\ndefault_priority_class = high\n[priority-class.low]\nvalue = -1\n",
     "gpuqd.conf:4: [scheduler] default_priority_class: 'high' is not a priority class (no "
     "[priority-class.high])"},
    {Q "[priority-class.low]\nvalu = -1\n", "gpuqd.conf:4: [priority-class.low]: value = "
                                            "INTEGER is missing"},
    {Q "[scheduler]\ntime_zone = Europe/Atlantis\n",
     "gpuqd.conf:4: [scheduler] time_zone: 'Europe/Atlantis' is not a time zone known here "
     "(like Europe/Rome, UTC)"},
    {Q "[scheduler]\nbackoff_max = 5s\n",
     "gpuqd.conf:4: [scheduler] backoff_max: backoff_max (5s) is shorter than backoff_base (10s)"},
    {Q "[gpuqd]\nstate_dir = var/lib/gpuq\n",
     "gpuqd.conf:4: [gpuqd] state_dir: 'var/lib/gpuq' is not an absolute path"},
    {Q "[gpuqd]\nmetrics_listen = 9430\n",
     "gpuqd.conf:4: [gpuqd] metrics_listen: listen address '9430': expected host:port"},
    {Q "[gpuqd]\ndrain_grace_max = soon\n",
     "gpuqd.conf:4: [gpuqd] drain_grace_max: 'soon' is not a duration (like 30, 1.5s, 500ms, 2m, "
     "1h)"},
    {Q "[window.w]\nqueue = batch\ndays = daily\ngpus = 2\n[queue.batch]\nbogus = 1\n",
     "gpuqd.conf:8: unknown key 'bogus' in [queue.batch]"},
};

static void test_errors(void **state)
{
    for (size_t i = 0; i < ELEMENTSOF(bad); i++) {
        struct gpuqd_config c = {.socket = (char *)"untouched"};
        struct errmsg e = {""};
        int r = load(bad[i].text, &c, &e);
        if (r >= 0)
            fail_msg("case %zu loaded:\n%s", i, bad[i].text);
        if (strcmp(e.text, bad[i].error) != 0)
            fail_msg("case %zu:\n got: %s\nwant: %s", i, e.text, bad[i].error);
        assert_string_equal(c.socket, "untouched");
    }
}

static void test_missing_file(void **state)
{
    struct gpuqd_config c;
    struct errmsg e = {""};
    assert_int_equal(gpuqd_config_load("/nonexistent/gpuqd.conf", &c, &e), -ENOENT);
    assert_non_null(strstr(e.text, "/nonexistent/gpuqd.conf"));
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_defaults),     cmocka_unit_test(test_full),
        cmocka_unit_test(test_example),      cmocka_unit_test(test_errors),
        cmocka_unit_test(test_missing_file),
    };
    return test_run_cases(tests);
}
