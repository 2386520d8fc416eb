/* Tests for gpumon/snapshot.c: reference counting and that the last reference frees everything a
 * snapshot holds (ASan's leak check verifies the latter). */
#include <pthread.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>

#include "test-main.h"

#include "snapshot.h"

static void test_new_is_empty(void **state)
{
    struct snapshot *s = snapshot_new();
    assert_non_null(s);
    assert_int_equal(atomic_load(&s->refs), 1);
    assert_int_equal(s->n_gpu, 0);
    assert_null(s->gpu);
    assert_false(s->up);
    assert_string_equal(s->hostname, "");
    snapshot_unref(s);
}

/* A snapshot as the sampler fills it: GPUs with MIG devices, processes and XIDs. */
static struct snapshot *full_snapshot(void)
{
    struct snapshot *s = snapshot_new();
    assert_non_null(s);
    s->n_gpu = 2;
    s->gpu = calloc(s->n_gpu, sizeof(*s->gpu));
    assert_non_null(s->gpu);
    for (unsigned i = 0; i < s->n_gpu; i++) {
        struct gpu_sample *g = &s->gpu[i];
        g->n_mig = 2;
        g->mig = calloc(g->n_mig, sizeof(*g->mig));
        g->n_proc = 3;
        g->proc = calloc(g->n_proc, sizeof(*g->proc));
        g->n_xid = 1;
        g->xid = calloc(g->n_xid, sizeof(*g->xid));
        assert_true(g->mig && g->proc && g->xid);
        g->xid[0].xid = 79;
    }
    return s;
}

static void test_last_unref_frees(void **state)
{
    struct snapshot *s = full_snapshot();
    /* A scrape holds its own reference: the sampler dropping the published one must not free the
     * snapshot under it. */
    struct snapshot *scrape = snapshot_ref(s);
    assert_ptr_equal(scrape, s);
    assert_int_equal(atomic_load(&s->refs), 2);
    snapshot_unref(s);
    assert_int_equal(atomic_load(&scrape->refs), 1);
    assert_int_equal(scrape->gpu[1].xid[0].xid, 79); /* still readable (ASan: no use after free) */
    snapshot_unref(scrape);                          /* frees all (ASan: no leak) */
    snapshot_unref(NULL);
}

static void test_cleanup_attribute(void **state)
{
    _cleanup_(snapshot_unrefp) struct snapshot *s = full_snapshot();
    /* The cleanup of a NULL snapshot is a no-op (ASan would see a bad free). */
    _cleanup_(snapshot_unrefp) __attribute__((unused)) struct snapshot *none = NULL;
    assert_int_equal(atomic_load(&s->refs), 1);
}

#define THREADS 4
#define ROUNDS  100000

static void *ref_unref_loop(void *arg)
{
    struct snapshot *s = arg;
    for (int i = 0; i < ROUNDS; i++) {
        snapshot_ref(s);
        snapshot_unref(s);
    }
    return NULL;
}

/* Scrape threads take and drop references concurrently; the count must come out exact, or a
 * snapshot would be freed while in use or leak. */
static void test_concurrent_refs(void **state)
{
    struct snapshot *s = full_snapshot();
    pthread_t t[THREADS];
    for (int i = 0; i < THREADS; i++)
        assert_int_equal(pthread_create(&t[i], NULL, ref_unref_loop, s), 0);
    for (int i = 0; i < THREADS; i++)
        assert_int_equal(pthread_join(t[i], NULL), 0);
    assert_int_equal(atomic_load(&s->refs), 1);
    snapshot_unref(s);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_new_is_empty),
        cmocka_unit_test(test_last_unref_frees),
        cmocka_unit_test(test_cleanup_attribute),
        cmocka_unit_test(test_concurrent_refs),
    };
    return test_run_cases(tests);
}
