/* XID events against the fake NVML (FAKE_NVML_LIB): counts per GPU and XID, last-seen times,
 * GPUs and drivers without XID events, and counts that outlive a stop. */
#include <errno.h>
#include <limits.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include <cmocka.h>

#include "events.h"
#include "lib/gpu.h"
#include "lib/nvml.h"

static char dir[] = "/tmp/test-events-XXXXXX";
static char fixture[PATH_MAX];

#define UUID0 "GPU-00000000-0000-0000-0000-000000000000"
#define UUID1 "GPU-11111111-1111-1111-1111-111111111111"
#define UUID2 "GPU-22222222-2222-2222-2222-222222222222"
/* The keys the fake requires of every GPU. */
#define ID(n)                                                                                      \
    "\"name\": \"NVIDIA A100\", \"uuid\": \"" UUID##n "\", \"pci_bus_id\": \"00000000:0" #n        \
                                                      ":00.0\""

/* Three GPUs: 0 and 1 report XIDs, 2 has no XID events. */
static const char three_gpus[] =
    "{\"driver_version\": \"580.95.05\", \"gpus\": ["
    " {" ID(0) ", \"xid_events\": true,"
               "  \"events\": [{\"at\": 0.2, \"xid\": 13}]},"
               " {" ID(1) ", \"xid_events\": true,"
                          "  \"events\": [{\"at\": 0.1, \"xid\": 48}, {\"at\": 0.3, \"xid\": 48}, "
                          "{\"at\": 0.4, \"xid\": "
                          "31}]},"
                          " {" ID(2) ", \"xid_events\": false,"
                                     "  \"events\": [{\"at\": 0.1, \"xid\": 13}]}"
                                     "]}";

static void write_fixture(const char *json)
{
    char tmp[PATH_MAX + 8];
    snprintf(tmp, sizeof(tmp), "%s.new", fixture);
    FILE *f = fopen(tmp, "we");
    assert_non_null(f);
    fputs(json, f);
    assert_int_equal(fclose(f), 0);
    /* A new inode, so that the fake sees a new file even within one mtime tick. */
    assert_int_equal(rename(tmp, fixture), 0);
}

static double unix_now(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_REALTIME, &ts);
    return (double)ts.tv_sec + ts.tv_nsec / 1e9;
}

struct env {
    struct nvml *nvml;
    struct gpu_list *list;
    struct events *ev;
};

static void env_open(struct env *t, const char *json)
{
    struct errmsg e = {""};
    write_fixture(json);
    assert_int_equal(nvml_open(getenv("FAKE_NVML_LIB"), &t->nvml, &e), 0);
    assert_int_equal(gpu_list_load(t->nvml, &t->list, &e), 0);
    assert_int_equal(events_new(&t->ev), 0);
}

static void env_close(struct env *t)
{
    events_free(t->ev);
    gpu_list_free(t->list);
    nvml_close(t->nvml);
}

/* The XID entry of g for xid, NULL if none. */
static const struct xid_count *find_xid(const struct gpu_sample *g, unsigned xid)
{
    for (unsigned i = 0; i < g->n_xid; i++)
        if (g->xid[i].xid == xid)
            return &g->xid[i];
    return NULL;
}

static void fill(struct events *ev, const char *uuid, struct gpu_sample *g)
{
    free(g->xid);
    memset(g, 0, sizeof(*g));
    assert_int_equal(events_fill(ev, uuid, g), 0);
}

/* Polls until every expected XID of the fixture was counted; 10 s at most. */
static void wait_for_all(struct events *ev)
{
    struct gpu_sample g0 = {0}, g1 = {0};
    for (int i = 0; i < 1000; i++) {
        fill(ev, UUID0, &g0);
        fill(ev, UUID1, &g1);
        const struct xid_count *a = find_xid(&g0, 13), *b = find_xid(&g1, 48),
                               *c = find_xid(&g1, 31);
        if (a && b && c && b->count == 2)
            break;
        usleep(10 * 1000);
    }
    free(g0.xid);
    free(g1.xid);
}

static void test_counts_and_times(void **state)
{
    struct env t;
    env_open(&t, three_gpus);
    double before = unix_now();
    assert_int_equal(events_start(t.ev, t.nvml, t.list, NULL), 0);
    wait_for_all(t.ev);
    double after = unix_now();

    struct gpu_sample g = {0};
    fill(t.ev, UUID0, &g);
    assert_true(g.xid_supported);
    assert_int_equal(g.last_xid, 13);
    assert_int_equal(g.n_xid, 1);
    assert_int_equal(g.xid[0].xid, 13);
    assert_int_equal(g.xid[0].count, 1);
    assert_true(g.xid[0].last_seen >= before && g.xid[0].last_seen <= after);

    /* Ordered by XID; the last one seen is the last delivered, not the highest. */
    fill(t.ev, UUID1, &g);
    assert_true(g.xid_supported);
    assert_int_equal(g.n_xid, 2);
    assert_int_equal(g.xid[0].xid, 31);
    assert_int_equal(g.xid[0].count, 1);
    assert_int_equal(g.xid[1].xid, 48);
    assert_int_equal(g.xid[1].count, 2);
    assert_int_equal(g.last_xid, 31);
    assert_true(g.xid[1].last_seen >= before && g.xid[1].last_seen <= after);

    /* A GPU without XID events: not supported, and its fixture events never arrive. */
    fill(t.ev, UUID2, &g);
    assert_false(g.xid_supported);
    assert_int_equal(g.n_xid, 0);
    assert_null(g.xid);
    assert_int_equal(events_errors(t.ev), 0);

    /* Stopping keeps the counts, and what is known about support. */
    events_stop(t.ev);
    fill(t.ev, UUID1, &g);
    assert_true(g.xid_supported);
    assert_int_equal(g.n_xid, 2);
    assert_int_equal(g.xid[1].count, 2);
    free(g.xid);
    env_close(&t);
}

static void test_unknown_gpu(void **state)
{
    struct env t;
    env_open(&t, three_gpus);
    assert_int_equal(events_start(t.ev, t.nvml, t.list, NULL), 0);
    struct gpu_sample g = {.last_xid = 99};
    assert_int_equal(events_fill(t.ev, "GPU-not-there", &g), 0);
    assert_false(g.xid_supported);
    assert_int_equal(g.last_xid, 0);
    assert_int_equal(g.n_xid, 0);
    assert_null(g.xid);
    /* A second start while running is refused, and the running one goes on. */
    assert_int_equal(events_start(t.ev, t.nvml, t.list, NULL), -EBUSY);
    fill(t.ev, UUID0, &g);
    assert_true(g.xid_supported);
    free(g.xid);
    env_close(&t);
}

/* A driver that cannot create event sets still gives a clean "not supported" for every GPU. */
static void test_no_event_sets(void **state)
{
    struct env t;
    env_open(&t, "{\"unsupported\": [\"nvmlEventSetCreate\"], \"gpus\": ["
                 " {" ID(0) ", \"xid_events\": true,"
                            "  \"events\": [{\"at\": 0, \"xid\": 13}]}]}");
    assert_int_equal(events_start(t.ev, t.nvml, t.list, NULL), 0);
    usleep(300 * 1000);
    struct gpu_sample g = {0};
    fill(t.ev, UUID0, &g);
    assert_false(g.xid_supported);
    assert_int_equal(g.n_xid, 0);
    /* NOT_SUPPORTED is an answer, not an error. */
    assert_int_equal(events_errors(t.ev), 0);
    /* Stop without a thread is harmless. */
    events_stop(t.ev);
    env_close(&t);
}

/* A registration that fails for another reason counts as an NVML error. */
static void test_register_error(void **state)
{
    struct env t;
    env_open(&t, "{\"gpus\": ["
                 " {" ID(0) ", \"xid_events\": true,"
                            "  \"errors\": {\"nvmlDeviceRegisterEvents\": \"UNKNOWN\"}},"
                            " {" ID(1) ", \"xid_events\": true,"
                                       "  \"events\": [{\"at\": 0, \"xid\": 94}]}]}");
    assert_int_equal(events_start(t.ev, t.nvml, t.list, NULL), 0);
    struct gpu_sample g = {0};
    for (int i = 0; i < 1000 && g.n_xid == 0; i++) {
        usleep(10 * 1000);
        fill(t.ev, UUID1, &g);
    }
    assert_int_equal(g.n_xid, 1);
    assert_int_equal(g.xid[0].xid, 94);
    fill(t.ev, UUID0, &g);
    assert_false(g.xid_supported);
    assert_int_equal(events_errors(t.ev), 1);
    free(g.xid);
    env_close(&t);
}

static int setup(void **state)
{
    if (!getenv("FAKE_NVML_LIB")) {
        fprintf(stderr, "FAKE_NVML_LIB is not set: run through meson test\n");
        return -1;
    }
    if (!mkdtemp(dir))
        return -1;
    snprintf(fixture, sizeof(fixture), "%s/fixture.json", dir);
    setenv("FAKE_NVML_FIXTURE", fixture, 1);
    return 0;
}

static int teardown(void **state)
{
    unlink(fixture);
    rmdir(dir);
    return 0;
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_counts_and_times),
        cmocka_unit_test(test_unknown_gpu),
        cmocka_unit_test(test_no_event_sets),
        cmocka_unit_test(test_register_error),
    };
    return cmocka_run_group_tests(tests, setup, teardown);
}
