/* Tests for gpuqd's state file: what gpuqd relies on to lose no job across a restart or a
 * kill -9, to never hand out an id twice, and to name a full disk or a damaged file. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>

#include <cmocka.h>

#include <limits.h>
#include <signal.h>
#include <sqlite3.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mount.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include "test-fs.h"
#include "test-main.h"
#include "test-ns.h"

#include "gpuq/store/store.h"
#include "lib/rm-tree.h"

struct fixture {
    char dir[PATH_MAX];
    char db[PATH_MAX + 16];
};

static int setup(void **state)
{
    struct fixture *f = calloc(1, sizeof(*f));
    const char *tmp = getenv("TMPDIR");
    snprintf(f->dir, sizeof(f->dir), "%s/test-gpuq-store-XXXXXX", tmp && *tmp ? tmp : "/tmp");
    if (!mkdtemp(f->dir))
        return -1;
    snprintf(f->db, sizeof(f->db), "%s/state.db", f->dir);
    *state = f;
    return 0;
}

static int teardown(void **state)
{
    struct fixture *f = *state;
    rm_tree(f->dir);
    free(f);
    return 0;
}

static struct store *open_ok(const char *path)
{
    struct errmsg e = {""};
    struct store *s = NULL;
    int r = store_open(path, &s, &e);
    if (r < 0)
        fail_msg("store_open: %d %s", r, e.text);
    return s;
}

/* A job with every field set to a value that shows a lost bit: ids above 2^31, negative numbers,
 * fractions of seconds, both halves of the slot bitmap full. */
static struct job full_job(void)
{
    struct job j = {
        .uid = 3000000000u,
        .gid = 4000000001u,
        .state = JOB_STOPPING,
        .stop_reason = JOB_STOP_DRAIN,
        .held = true,
        .priority = INT_MIN,
        .submit_time = 1700000000.125,
        .first_start_time = 1700000100.5,
        .start_time = 1700000200.25,
        .end_time = 1700000300.75,
        .stop_deadline = 1700000330.0625,
        .last_checkpoint = 1700000250.5,
        .eligible_time = 1700000050.375,
        .requeue_time = 1700000150.875,
        .failures = 3,
        .preemptions = 7,
        .runs = UINT_MAX,
        .exit_status = -1,
        .slots = {0x8000000000000001ull, UINT64_MAX},
        .pid = 4194303,
        .pid_start = UINT64_MAX - 1,
    };
    memset(j.reason, 'r', sizeof(j.reason) - 1);
    memcpy(j.reason, "quota 'gpu' is full: ", 21);
    return j;
}

static void assert_job_equal(const struct job *a, const struct job *b)
{
    assert_int_equal(a->id, b->id);
    assert_int_equal(a->uid, b->uid);
    assert_int_equal(a->gid, b->gid);
    assert_int_equal(a->state, b->state);
    assert_int_equal(a->stop_reason, b->stop_reason);
    assert_int_equal(a->held, b->held);
    assert_int_equal(a->priority, b->priority);
    assert_true(a->submit_time == b->submit_time);
    assert_true(a->first_start_time == b->first_start_time);
    assert_true(a->start_time == b->start_time);
    assert_true(a->end_time == b->end_time);
    assert_true(a->stop_deadline == b->stop_deadline);
    assert_true(a->last_checkpoint == b->last_checkpoint);
    assert_true(a->eligible_time == b->eligible_time);
    assert_true(a->requeue_time == b->requeue_time);
    assert_int_equal(a->failures, b->failures);
    assert_int_equal(a->preemptions, b->preemptions);
    assert_int_equal(a->runs, b->runs);
    assert_int_equal(a->exit_status, b->exit_status);
    assert_string_equal(a->reason, b->reason);
    assert_true(a->slots[0] == b->slots[0]);
    assert_true(a->slots[1] == b->slots[1]);
    assert_int_equal(a->pid, b->pid);
    assert_true(a->pid_start == b->pid_start);
}

/* What the store's callbacks hand over, copied. */
struct collected {
    struct job jobs[256];
    char *specs[256];
    size_t n;
    int stop_after; /* > 0: return -ECANCELED after this many */
};

static int collect(struct job *j, const char *spec_json, void *userdata)
{
    struct collected *c = userdata;
    /* the callback gets no spec to own */
    assert_null(j->spec.name);
    assert_null(j->spec.argv);
    assert_true(c->n < ELEMENTSOF(c->jobs));
    c->jobs[c->n] = *j;
    c->specs[c->n] = strdup(spec_json);
    c->n++;
    return c->stop_after && (int)c->n >= c->stop_after ? -ECANCELED : 0;
}

static void collected_done(struct collected *c)
{
    for (size_t i = 0; i < c->n; i++)
        free(c->specs[i]);
    c->n = 0;
}

static struct job get_ok(struct store *s, uint64_t id, char **ret_spec)
{
    struct collected c = {0};
    struct errmsg e = {""};
    int r = store_job_get(s, id, collect, &c, &e);
    if (r < 0)
        fail_msg("store_job_get(%llu): %d %s", (unsigned long long)id, r, e.text);
    assert_int_equal(c.n, 1);
    if (ret_spec)
        *ret_spec = strdup(c.specs[0]);
    struct job j = c.jobs[0];
    collected_done(&c);
    return j;
}

static uint64_t insert_ok(struct store *s, struct job *j, const char *spec)
{
    struct errmsg e = {""};
    int r = store_job_insert(s, j, spec, &e);
    if (r < 0)
        fail_msg("store_job_insert: %d %s", r, e.text);
    return j->id;
}

static size_t count_jobs(struct store *s, bool active_only)
{
    struct collected c = {0};
    struct errmsg e = {""};
    int r = store_jobs_each(s, active_only, 0, 0, collect, &c, &e);
    if (r < 0)
        fail_msg("store_jobs_each: %d %s", r, e.text);
    size_t n = c.n;
    collected_done(&c);
    return n;
}

static void test_job_round_trip(void **state)
{
    struct fixture *f = *state;
    static const char spec[] = "{\"name\":\"train \\\"big\\\"\",\"argv\":[\"python3\",\"-c\","
                               "\"print('\xc3\xa9')\"],\"env\":[]}";
    struct store *s = open_ok(f->db);
    struct job j = full_job(), none = {.exit_status = -1};
    struct errmsg e = {""};

    /* no spec: refused, and j->id left alone */
    j.id = 99;
    assert_int_equal(store_job_insert(s, &j, NULL, &e), -EINVAL);
    assert_int_equal(j.id, 99);

    /* what could not be read back is not written: a negative pid, a state out of range */
    struct job bad = j;
    bad.pid = -1;
    assert_int_equal(store_job_insert(s, &bad, spec, &e), -EINVAL);
    bad.pid = 1;
    bad.state = JOB_STATE_COUNT;
    assert_int_equal(store_job_insert(s, &bad, spec, &e), -EINVAL);

    assert_int_equal(insert_ok(s, &j, spec), 1);
    assert_int_equal(insert_ok(s, &none, "{}"), 2);
    char *got_spec = NULL;
    struct job got = get_ok(s, 1, &got_spec);
    assert_job_equal(&got, &j);
    assert_string_equal(got_spec, spec);
    free(got_spec);
    got = get_ok(s, 2, NULL);
    assert_job_equal(&got, &none);

    /* every mutable field changes; uid, gid and the spec stay */
    struct job u = none;
    u.state = JOB_FAILED;
    u.stop_reason = JOB_STOP_TIMEOUT;
    u.held = true;
    u.priority = INT_MAX;
    u.submit_time = 1.5, u.first_start_time = 2.5, u.start_time = 3.5, u.end_time = 4.5;
    u.stop_deadline = 5.5, u.last_checkpoint = 6.5, u.eligible_time = 7.5, u.requeue_time = 8.5;
    u.failures = 1, u.preemptions = 2, u.runs = 3;
    u.exit_status = 139; /* killed by SIGSEGV, core dumped */
    u.slots[0] = UINT64_MAX, u.slots[1] = 1ull << 63;
    u.pid = 1, u.pid_start = 1ull << 63;
    /* a reason that fills its array with no NUL is stored cut, not read past its end */
    memset(u.reason, 'x', sizeof(u.reason));
    u.uid = 1, u.gid = 1; /* not mutable: ignored */
    if (store_job_update(s, &u, &e) < 0)
        fail_msg("store_job_update: %s", e.text);
    store_close(s);

    s = open_ok(f->db);
    got = get_ok(s, 2, &got_spec);
    assert_string_equal(got_spec, "{}");
    free(got_spec);
    assert_int_equal(got.uid, 0);
    assert_int_equal(got.gid, 0);
    assert_int_equal(strlen(got.reason), sizeof(got.reason) - 1);
    u.uid = 0, u.gid = 0;
    u.reason[sizeof(u.reason) - 1] = '\0';
    assert_job_equal(&got, &u);
    got = get_ok(s, 1, NULL);
    assert_job_equal(&got, &j);
    store_close(s);
}

static void make_ended(struct store *s, uint64_t id, enum job_state state, double end)
{
    struct job j = get_ok(s, id, NULL);
    j.state = state;
    j.end_time = end;
    struct errmsg e = {""};
    assert_int_equal(store_job_update(s, &j, &e), 0);
}

static int count_event(double time, const char *text, void *userdata)
{
    (*(size_t *)userdata)++;
    return 0;
}

static size_t count_events(struct store *s, uint64_t id)
{
    size_t n = 0;
    struct errmsg e = {""};
    assert_int_equal(store_events_each(s, id, count_event, &n, &e), 0);
    return n;
}

static void test_ids_never_reused(void **state)
{
    struct fixture *f = *state;
    struct store *s = open_ok(f->db);
    struct errmsg e = {""};
    struct job j = {.exit_status = -1};
    for (uint64_t i = 1; i <= 5; i++)
        assert_int_equal(insert_ok(s, &j, "{}"), i);
    make_ended(s, 2, JOB_COMPLETED, 100);
    make_ended(s, 4, JOB_CANCELLED, 150);
    make_ended(s, 5, JOB_FAILED, 300); /* ended after the cut */
    struct job running = get_ok(s, 3, NULL);
    running.state = JOB_RUNNING; /* never purged, whatever its end_time */
    assert_int_equal(store_job_update(s, &running, &e), 0);
    assert_int_equal(store_event_add(s, 4, 140, "cancelled by alice", &e), 0);

    unsigned n = 99;
    assert_int_equal(store_jobs_purge(s, 200, &n, &e), 0);
    assert_int_equal(n, 2);
    struct collected c = {0};
    assert_int_equal(store_job_get(s, 2, collect, &c, &e), -ENOENT);
    assert_int_equal(store_job_get(s, 4, collect, &c, &e), -ENOENT);
    assert_int_equal(c.n, 0);
    assert_int_equal(count_events(s, 4), 0); /* the events went with the job */
    assert_int_equal(count_jobs(s, false), 3);

    /* the largest id (5) is there; purge it too, then the next id is still 6, also after a
     * reopen */
    assert_int_equal(store_jobs_purge(s, 400, &n, &e), 0);
    assert_int_equal(n, 1);
    uint64_t last = 0;
    assert_int_equal(store_last_job_id(s, &last, &e), 0);
    assert_int_equal(last, 5);
    assert_int_equal(insert_ok(s, &j, "{}"), 6);
    make_ended(s, 6, JOB_TIMEOUT, 10);
    assert_int_equal(store_jobs_purge(s, 400, NULL, &e), 0);
    store_close(s);
    s = open_ok(f->db);
    assert_int_equal(insert_ok(s, &j, "{}"), 7);
    assert_int_equal(count_jobs(s, false), 3); /* 1, 3, 7 */
    store_close(s);
}

static void test_active_filter_and_paging(void **state)
{
    struct fixture *f = *state;
    struct store *s = open_ok(f->db);
    struct errmsg e = {""};
    for (int st = 0; st < JOB_STATE_COUNT; st++) {
        struct job j = {.state = (enum job_state)st, .exit_status = -1};
        insert_ok(s, &j, "{}"); /* ids 1..7, state id - 1 */
    }
    struct collected c = {0};
    assert_int_equal(store_jobs_each(s, true, 0, 0, collect, &c, &e), 0);
    assert_int_equal(c.n, 3);
    for (size_t i = 0; i < 3; i++) {
        assert_int_equal(c.jobs[i].id, i + 1);
        assert_int_equal(c.jobs[i].state, (enum job_state)i); /* PENDING, RUNNING, STOPPING */
    }
    collected_done(&c);

    /* pages: after an id, a few at a time */
    assert_int_equal(store_jobs_each(s, false, 2, 2, collect, &c, &e), 0);
    assert_int_equal(c.n, 2);
    assert_int_equal(c.jobs[0].id, 3);
    assert_int_equal(c.jobs[1].id, 4);
    collected_done(&c);
    assert_int_equal(store_jobs_each(s, true, 2, 10, collect, &c, &e), 0);
    assert_int_equal(c.n, 1);
    assert_int_equal(c.jobs[0].id, 3);
    collected_done(&c);
    assert_int_equal(store_jobs_each(s, false, 7, 0, collect, &c, &e), 0);
    assert_int_equal(c.n, 0);

    /* a negative return stops the iteration and comes back as it is */
    c.stop_after = 2;
    assert_int_equal(store_jobs_each(s, false, 0, 0, collect, &c, &e), -ECANCELED);
    assert_int_equal(c.n, 2);
    collected_done(&c);
    store_close(s);
}

/* gpuqd's restart pass: for each active job, read it again and write it back, from inside the
 * iteration (nested use of the same statements, writes while reading). */
struct nested {
    struct store *s;
    unsigned seen;
};

static int requeue_each(struct job *j, const char *spec_json, void *userdata)
{
    struct nested *n = userdata;
    struct errmsg e = {""};
    struct job again = get_ok(n->s, j->id, NULL);
    assert_int_equal(again.id, j->id);
    size_t active = count_jobs(n->s, true); /* the same statement, nested */
    assert_true(active >= 1);
    j->state = JOB_PENDING;
    j->pid = 0;
    snprintf(j->reason, sizeof(j->reason), "requeued after restart");
    if (store_job_update(n->s, j, &e) < 0)
        fail_msg("%s", e.text);
    n->seen++;
    return 0;
}

static void test_nested_use_from_callback(void **state)
{
    struct fixture *f = *state;
    struct store *s = open_ok(f->db);
    struct errmsg e = {""};
    for (int i = 0; i < 4; i++) {
        struct job j = {.state = i % 2 ? JOB_RUNNING : JOB_COMPLETED, .pid = 100 + i};
        insert_ok(s, &j, "{}");
    }
    struct nested n = {.s = s};
    assert_int_equal(store_begin(s, &e), 0);
    assert_int_equal(store_jobs_each(s, true, 0, 0, requeue_each, &n, &e), 0);
    assert_int_equal(store_commit(s, &e), 0);
    assert_int_equal(n.seen, 2);
    struct job j = get_ok(s, 2, NULL);
    assert_int_equal(j.state, JOB_PENDING);
    assert_int_equal(j.pid, 0);
    assert_string_equal(j.reason, "requeued after restart");
    assert_int_equal(get_ok(s, 1, NULL).pid, 100);
    store_close(s);
}

static void test_missing_job(void **state)
{
    struct fixture *f = *state;
    struct store *s = open_ok(f->db);
    struct errmsg e = {""};
    struct job j = {.id = 42, .exit_status = -1};
    assert_int_equal(store_job_update(s, &j, &e), -ENOENT);
    assert_non_null(strstr(e.text, "job 42 does not exist"));
    j.id = UINT64_MAX;
    assert_int_equal(store_job_update(s, &j, &e), -ENOENT);
    struct collected c = {0};
    assert_int_equal(store_job_get(s, 42, collect, &c, &e), -ENOENT);
    assert_int_equal(store_job_get(s, UINT64_MAX, collect, &c, &e), -ENOENT);
    assert_int_equal(c.n, 0);
    assert_int_equal(store_event_add(s, 42, 1, "started", &e), -ENOENT);
    assert_non_null(strstr(e.text, "job 42 does not exist"));
    assert_int_equal(store_jobs_each(s, false, UINT64_MAX, 0, collect, &c, &e), 0);
    store_close(s);
}

struct usage_row {
    char queue[16];
    uid_t uid;
    double value, time;
};

struct usage_rows {
    struct usage_row rows[8];
    size_t n;
};

static int collect_usage(const char *queue, uid_t uid, double value, double time, void *userdata)
{
    struct usage_rows *u = userdata;
    assert_true(u->n < ELEMENTSOF(u->rows));
    struct usage_row *row = &u->rows[u->n++];
    snprintf(row->queue, sizeof(row->queue), "%s", queue);
    row->uid = uid;
    row->value = value;
    row->time = time;
    return 0;
}

static void test_meta_and_usage(void **state)
{
    struct fixture *f = *state;
    struct store *s = open_ok(f->db);
    struct errmsg e = {""};
    char *v = NULL;
    assert_int_equal(store_meta_get(s, "drained", &v, &e), -ENOENT);
    assert_null(v);
    assert_int_equal(store_meta_set(s, "drained", "1", &e), 0);
    assert_int_equal(store_meta_set(s, "drained", "0", &e), 0);
    assert_int_equal(store_meta_set(s, "calendar", "night", &e), 0);
    assert_int_equal(store_meta_set(s, NULL, "x", &e), -EINVAL);

    double value = -1, time = -1;
    assert_int_equal(store_usage_get(s, "gpu", 1000, &value, &time, &e), 0);
    assert_true(value == 0 && time == 0);
    assert_int_equal(store_usage_set(s, "gpu", 3000000000u, 99, 1, &e), 0);
    assert_int_equal(store_usage_set(s, "gpu", 3000000000u, 12.5, 1000.25, &e), 0); /* replaces */
    assert_int_equal(store_usage_set(s, "gpu", 1000, 7.75, 1000.5, &e), 0);
    assert_int_equal(store_usage_set(s, "cpu", 1000, 3, 999, &e), 0);
    store_close(s);

    s = open_ok(f->db);
    assert_int_equal(store_meta_get(s, "drained", &v, &e), 0);
    assert_string_equal(v, "0");
    free(v);
    assert_int_equal(store_meta_delete(s, "drained", &e), 0);
    assert_int_equal(store_meta_delete(s, "drained", &e), 0);
    assert_int_equal(store_meta_get(s, "drained", &v, &e), -ENOENT);
    assert_int_equal(store_meta_get(s, "calendar", &v, &e), 0);
    assert_string_equal(v, "night");
    free(v);

    assert_int_equal(store_usage_get(s, "gpu", 3000000000u, &value, &time, &e), 0);
    assert_true(value == 12.5 && time == 1000.25);
    assert_int_equal(store_usage_get(s, "gpu", 1001, &value, &time, &e), 0);
    assert_true(value == 0 && time == 0);
    struct usage_rows u = {0};
    assert_int_equal(store_usage_each(s, collect_usage, &u, &e), 0);
    assert_int_equal(u.n, 3);
    assert_string_equal(u.rows[0].queue, "cpu");
    assert_string_equal(u.rows[1].queue, "gpu");
    assert_int_equal(u.rows[1].uid, 1000);
    assert_true(u.rows[1].value == 7.75 && u.rows[1].time == 1000.5);
    assert_int_equal(u.rows[2].uid, 3000000000u);
    store_close(s);
}

struct event_list {
    char first[64], last[64];
    double first_time;
    size_t n;
};

static int collect_event(double time, const char *text, void *userdata)
{
    struct event_list *l = userdata;
    if (l->n++ == 0) {
        snprintf(l->first, sizeof(l->first), "%s", text);
        l->first_time = time;
    }
    snprintf(l->last, sizeof(l->last), "%s", text);
    return 0;
}

static void test_events(void **state)
{
    struct fixture *f = *state;
    struct store *s = open_ok(f->db);
    struct errmsg e = {""};
    struct job a = {.exit_status = -1}, b = {.exit_status = -1};
    insert_ok(s, &a, "{}");
    insert_ok(s, &b, "{}");
    assert_int_equal(store_event_add(s, a.id, 10.5, "submitted by alice", &e), 0);
    assert_int_equal(store_event_add(s, b.id, 11, "submitted by bob", &e), 0);
    /* times are the caller's; the order is the order added */
    assert_int_equal(store_event_add(s, a.id, 9, "started on GPU 0", &e), 0);
    assert_int_equal(store_event_add(s, a.id, 1, NULL, &e), -EINVAL);
    struct event_list l = {0};
    assert_int_equal(store_events_each(s, a.id, collect_event, &l, &e), 0);
    assert_int_equal(l.n, 2);
    assert_string_equal(l.first, "submitted by alice");
    assert_true(l.first_time == 10.5);
    assert_string_equal(l.last, "started on GPU 0");

    /* a job preempted over and over keeps a short history: the newest STORE_EVENTS_MAX
     * ("submitted by bob" and the first five preemptions go) */
    char text[32];
    for (int i = 0; i < STORE_EVENTS_MAX + 5; i++) {
        snprintf(text, sizeof(text), "preempted %d", i);
        assert_int_equal(store_event_add(s, b.id, 100 + i, text, &e), 0);
    }
    l = (struct event_list){0};
    assert_int_equal(store_events_each(s, b.id, collect_event, &l, &e), 0);
    assert_int_equal(l.n, STORE_EVENTS_MAX);
    assert_string_equal(l.first, "preempted 5");
    snprintf(text, sizeof(text), "preempted %d", STORE_EVENTS_MAX + 4);
    assert_string_equal(l.last, text);
    assert_int_equal(count_events(s, a.id), 2);
    store_close(s);
}

static void test_transactions(void **state)
{
    struct fixture *f = *state;
    struct store *s = open_ok(f->db);
    struct errmsg e = {""};
    struct job keep = {.exit_status = -1};
    insert_ok(s, &keep, "{}");

    assert_int_equal(store_commit(s, &e), -EINVAL);
    assert_int_equal(store_begin(s, &e), 0);
    assert_int_equal(store_begin(s, &e), -EINVAL); /* not nested */
    struct job j = {.exit_status = -1};
    insert_ok(s, &j, "{}");
    keep.state = JOB_CANCELLED;
    assert_int_equal(store_job_update(s, &keep, &e), 0);
    assert_int_equal(store_meta_set(s, "drained", "1", &e), 0);
    assert_int_equal(store_usage_set(s, "gpu", 1000, 5, 5, &e), 0);
    assert_int_equal(store_event_add(s, j.id, 1, "submitted", &e), 0);
    store_rollback(s);

    /* nothing of it is left, in this process or the next */
    for (int round = 0; round < 2; round++) {
        assert_int_equal(count_jobs(s, false), 1);
        assert_int_equal(get_ok(s, keep.id, NULL).state, JOB_PENDING);
        char *v = NULL;
        assert_int_equal(store_meta_get(s, "drained", &v, &e), -ENOENT);
        double value = -1;
        assert_int_equal(store_usage_get(s, "gpu", 1000, &value, NULL, &e), 0);
        assert_true(value == 0);
        store_close(s);
        s = open_ok(f->db);
    }

    /* a committed one is all there */
    assert_int_equal(store_begin(s, &e), 0);
    for (int i = 0; i < 10; i++) {
        struct job n = {.exit_status = -1};
        insert_ok(s, &n, "{}");
    }
    assert_int_equal(store_meta_set(s, "drained", "1", &e), 0);
    assert_int_equal(store_commit(s, &e), 0);
    store_rollback(s); /* harmless with none open */
    store_close(s);
    s = open_ok(f->db);
    assert_int_equal(count_jobs(s, false), 11);
    store_close(s);
}

/* The child of the kill -9 case: reports a failure by its exit status, since a cmocka assertion
 * in a forked child would report in the wrong process. */
static void write_and_die(const char *path)
{
    struct store *s = NULL;
    struct job j = full_job(), pending = {.exit_status = -1};
    if (store_open(path, &s, NULL) < 0)
        _exit(10);
    if (store_job_insert(s, &j, "{\"told\":true}", NULL) < 0 || j.id != 1)
        _exit(11);
    if (store_event_add(s, 1, 5, "submitted", NULL) < 0)
        _exit(12);
    /* a scheduling pass that is killed before its commit */
    if (store_begin(s, NULL) < 0 || store_job_insert(s, &pending, "{}", NULL) < 0)
        _exit(13);
    j.state = JOB_COMPLETED;
    if (store_job_update(s, &j, NULL) < 0)
        _exit(14);
    kill(getpid(), SIGKILL);
    _exit(15);
}

static void test_killed_writer(void **state)
{
    struct fixture *f = *state;
    fflush(NULL);
    pid_t pid = fork();
    assert_true(pid >= 0);
    if (pid == 0)
        write_and_die(f->db);
    int status;
    assert_int_equal(waitpid(pid, &status, 0), pid);
    if (!WIFSIGNALED(status))
        fail_msg("the writer exited with %d instead of being killed", WEXITSTATUS(status));
    assert_int_equal(WTERMSIG(status), SIGKILL);
    /* no close ran: what was committed is in the WAL, which the next open recovers */
    char wal[PATH_MAX + 32];
    snprintf(wal, sizeof(wal), "%s-wal", f->db);
    assert_true(exists(wal));

    struct store *s = open_ok(f->db);
    struct job want = full_job();
    want.id = 1;
    char *spec = NULL;
    struct job got = get_ok(s, 1, &spec);
    assert_job_equal(&got, &want); /* STOPPING: the uncommitted COMPLETED is gone */
    assert_string_equal(spec, "{\"told\":true}");
    free(spec);
    assert_int_equal(count_jobs(s, false), 1);
    assert_int_equal(count_events(s, 1), 1);
    store_close(s);
}

static void test_file_mode_and_wal(void **state)
{
    struct fixture *f = *state;
    mode_t old = umask(0);
    struct store *s = open_ok(f->db);
    umask(old);
    struct stat st;
    assert_int_equal(lstat(f->db, &st), 0);
    assert_int_equal(st.st_mode & 07777, 0600);
    assert_string_equal(store_path(s), f->db);

    /* another connection (an admin's sqlite3) sees a WAL file and what was written */
    struct job j = {.exit_status = -1};
    insert_ok(s, &j, "{}");
    sqlite3 *db = NULL;
    assert_int_equal(sqlite3_open_v2(f->db, &db, SQLITE_OPEN_READONLY, NULL), SQLITE_OK);
    sqlite3_stmt *q = NULL;
    assert_int_equal(sqlite3_prepare_v2(db, "PRAGMA journal_mode", -1, &q, NULL), SQLITE_OK);
    assert_int_equal(sqlite3_step(q), SQLITE_ROW);
    assert_string_equal((const char *)sqlite3_column_text(q, 0), "wal");
    sqlite3_finalize(q);
    assert_int_equal(sqlite3_prepare_v2(db, "SELECT count(*) FROM jobs", -1, &q, NULL), SQLITE_OK);
    assert_int_equal(sqlite3_step(q), SQLITE_ROW);
    assert_int_equal(sqlite3_column_int(q, 0), 1);
    sqlite3_finalize(q);
    sqlite3_close(db);
    store_close(s);
}

static void test_symlink_refused(void **state)
{
    struct fixture *f = *state;
    char target[PATH_MAX + 16], dir[PATH_MAX + 16];
    snprintf(target, sizeof(target), "%s/elsewhere.db", f->dir);
    struct errmsg e = {""};
    struct store *s = NULL;

    /* dangling: nothing is created at the target */
    assert_int_equal(symlink(target, f->db), 0);
    assert_int_equal(store_open(f->db, &s, &e), -ELOOP);
    assert_non_null(strstr(e.text, f->db));
    assert_non_null(strstr(e.text, "symbolic link"));
    assert_false(exists(target));
    /* to a real database: still refused */
    store_close(open_ok(target));
    assert_int_equal(store_open(f->db, &s, &e), -ELOOP);
    assert_null(s);

    snprintf(dir, sizeof(dir), "%s/adir", f->dir);
    assert_int_equal(mkdir(dir, 0700), 0);
    assert_int_equal(store_open(dir, &s, &e), -EINVAL);
    assert_non_null(strstr(e.text, "not a regular file"));
}

static void set_user_version(const char *path, const char *sql)
{
    sqlite3 *db = NULL;
    assert_int_equal(sqlite3_open(path, &db), SQLITE_OK);
    assert_int_equal(sqlite3_exec(db, sql, NULL, NULL, NULL), SQLITE_OK);
    sqlite3_close(db);
}

static void test_newer_or_foreign_refused(void **state)
{
    struct fixture *f = *state;
    struct errmsg e = {""};
    struct store *s = open_ok(f->db);
    struct job j = {.exit_status = -1};
    insert_ok(s, &j, "{}");
    store_close(s);
    s = NULL;
    set_user_version(f->db, "PRAGMA user_version = 2");
    assert_int_equal(store_open(f->db, &s, &e), -ENOTSUP);
    assert_null(s);
    assert_non_null(strstr(e.text, f->db));
    assert_non_null(strstr(e.text, "newer gpuqd (schema version 2, this one knows up to 1)"));

    /* another program's database is not taken over */
    char other[PATH_MAX + 16];
    snprintf(other, sizeof(other), "%s/other.db", f->dir);
    set_user_version(other, "CREATE TABLE photos (id INTEGER)");
    assert_int_equal(store_open(other, &s, &e), -EINVAL);
    assert_non_null(strstr(e.text, "not gpuqd's"));
}

static void test_corrupt_file(void **state)
{
    struct fixture *f = *state;
    struct errmsg e = {""};
    struct store *s = NULL;

    write_file(f->db, "this is a text file, not a database; it is long enough to have a header "
                      "that SQLite reads and rejects................................");
    assert_int_equal(store_open(f->db, &s, &e), -EUCLEAN);
    assert_null(s);
    assert_non_null(strstr(e.text, f->db));
    assert_non_null(strstr(e.text, "move the file"));
    unlink(f->db);

    /* a real state file whose pages after the first were overwritten */
    s = open_ok(f->db);
    struct job j = full_job();
    char spec[2048];
    memset(spec, 's', sizeof(spec) - 1);
    spec[sizeof(spec) - 1] = '\0';
    for (int i = 0; i < 40; i++)
        insert_ok(s, &j, spec);
    store_close(s); /* checkpoints the WAL into the file */
    s = NULL;
    struct stat st;
    assert_int_equal(stat(f->db, &st), 0);
    assert_true(st.st_size > 8 * 4096);
    int fd = open(f->db, O_WRONLY | O_CLOEXEC);
    assert_true(fd >= 0);
    char junk[4096];
    memset(junk, 0x5a, sizeof(junk));
    for (off_t off = 4096; off < st.st_size; off += (off_t)sizeof(junk))
        assert_int_equal(pwrite(fd, junk, sizeof(junk), off), (ssize_t)sizeof(junk));
    close(fd);
    assert_int_equal(store_open(f->db, &s, &e), -EUCLEAN);
    assert_null(s);
    assert_non_null(strstr(e.text, "is corrupt"));
    assert_non_null(strstr(e.text, f->db));
}

/* Fills a 1 MiB tmpfs (in a mount namespace of this case's own process) until the disk is full:
 * the error is -ENOSPC with a message that says so, and every job written before is kept. */
static void test_disk_full(void **state)
{
    struct fixture *f = *state;
    char mnt[PATH_MAX + 16], path[PATH_MAX + 32];
    snprintf(mnt, sizeof(mnt), "%s/small", f->dir);
    snprintf(path, sizeof(path), "%s/state.db", mnt);
    assert_int_equal(mkdir(mnt, 0700), 0);
    assert_int_equal(enter_mount_namespace(), 0);
    assert_int_equal(mount("tmpfs", mnt, "tmpfs", 0, "size=1m,mode=0700"), 0);

    struct store *s = open_ok(path);
    struct errmsg e = {""};
    static char spec[16384];
    memset(spec, 'x', sizeof(spec) - 1);
    size_t written = 0;
    int r;
    for (;;) {
        struct job j = {.exit_status = -1};
        r = store_job_insert(s, &j, spec, &e);
        if (r < 0)
            break;
        written++;
        assert_true(written < 1000);
    }
    assert_int_equal(r, -ENOSPC);
    assert_non_null(strstr(e.text, path));
    assert_non_null(strstr(e.text, "full"));
    assert_true(written > 5);
    assert_int_equal(count_jobs(s, false), written);

    /* the same inside a transaction: the commit fails, nothing of it stays, the store goes on */
    static char big[65536];
    memset(big, 'y', sizeof(big) - 1);
    assert_int_equal(store_begin(s, &e), 0);
    struct job j = {.exit_status = -1};
    r = store_job_insert(s, &j, big, &e);
    if (r == 0)
        r = store_commit(s, &e);
    assert_int_equal(r, -ENOSPC);
    store_rollback(s);
    assert_int_equal(count_jobs(s, false), written);
    struct job first = get_ok(s, 1, NULL);
    assert_int_equal(first.id, 1);
    store_close(s);

    s = open_ok(path);
    assert_int_equal(count_jobs(s, false), written);
    store_close(s);
    assert_int_equal(umount2(mnt, MNT_DETACH), 0);
}

#define T(f) cmocka_unit_test_setup_teardown(f, setup, teardown)

int main(void)
{
    const struct CMUnitTest tests[] = {
        T(test_job_round_trip),
        T(test_ids_never_reused),
        T(test_active_filter_and_paging),
        T(test_nested_use_from_callback),
        T(test_missing_job),
        T(test_meta_and_usage),
        T(test_events),
        T(test_transactions),
        T(test_killed_writer),
        T(test_file_mode_and_wal),
        T(test_symlink_refused),
        T(test_newer_or_foreign_refused),
        T(test_corrupt_file),
        T(test_disk_full),
    };
    return test_run_cases(tests);
}
