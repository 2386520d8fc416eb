/* Pages: each snapshot rendered once per kind, shared by every scrape, gzip made from the plain
 * page, and ahead-of-time rendering only for the kinds scrapers ask for. */
#include <pthread.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <zlib.h>

#include <cmocka.h>

#include "pages.h"
#include "tests/unit/test-main.h"

/* A snapshot with one GPU and a few values: enough for a page of some size. */
static struct snapshot *some_snapshot(void)
{
    struct snapshot *s = snapshot_new();
    assert_non_null(s);
    s->up = true;
    s->taken_at = 1764680000.5;
    snprintf(s->hostname, sizeof(s->hostname), "node1");
    snprintf(s->driver_version, sizeof(s->driver_version), "580.95.05");
    s->gpu = calloc(1, sizeof(*s->gpu));
    assert_non_null(s->gpu);
    s->n_gpu = s->n_nvml_gpu = 1;
    snprintf(s->gpu[0].id.uuid, sizeof(s->gpu[0].id.uuid), "GPU-1");
    snprintf(s->gpu[0].id.name, sizeof(s->gpu[0].id.name), "NVIDIA H100 80GB HBM3");
    snprintf(s->gpu[0].id.pci_bus_id, sizeof(s->gpu[0].id.pci_bus_id), "00000000:1B:00.0");
    for (int f = 0; f < GF_COUNT; f++)
        gpu_values_set(&s->gpu[0].values, f, f + 0.5);
    return s;
}

static struct pages *new_pages(void)
{
    struct expose_opts o = {.version = "1.2.3"};
    struct pages *p = pages_new(&o);
    assert_non_null(p);
    return p;
}

static void test_kinds(void **state)
{
    (void)state;
    for (int f = 0; f < 2; f++)
        for (int z = 0; z < 2; z++) {
            enum page_kind k = page_kind_of((enum prom_format)f, z);
            assert_int_equal(page_format(k), f);
            assert_int_equal(page_gzipped(k), z);
        }
}

/* The second scrape of a snapshot gets the very bytes of the first, equal to a fresh render. */
static void test_rendered_once(void **state)
{
    (void)state;
    _cleanup_(pages_freep) struct pages *p = new_pages();
    _cleanup_(snapshot_unrefp) struct snapshot *s = some_snapshot();
    const struct page *a, *b;
    assert_int_equal(pages_get(p, s, PAGE_TEXT, &a), 0);
    assert_int_equal(pages_get(p, s, PAGE_TEXT, &b), 0);
    assert_ptr_equal(a, b);
    struct expose_opts o = {.format = PROM_FORMAT_TEXT, .version = "1.2.3"};
    _cleanup_free_ char *text = NULL;
    size_t len;
    assert_int_equal(expose_render(s, &o, &text, &len), 0);
    assert_int_equal(a->len, len);
    assert_memory_equal(a->body, text, len);
    assert_non_null(strstr(text, "DCGM_FI_DEV_GPU_TEMP{"));
}

/* The gzip page is the plain page compressed, and making it makes the plain page too. */
static void test_gzip_of_plain(void **state)
{
    (void)state;
    _cleanup_(pages_freep) struct pages *p = new_pages();
    _cleanup_(snapshot_unrefp) struct snapshot *s = some_snapshot();
    const struct page *z, *plain;
    assert_int_equal(pages_get(p, s, PAGE_OPENMETRICS_GZIP, &z), 0);
    assert_non_null(atomic_load(&s->pages[PAGE_OPENMETRICS]));
    assert_int_equal(pages_get(p, s, PAGE_OPENMETRICS, &plain), 0);
    assert_true(z->len < plain->len);
    z_stream zs = {0};
    assert_int_equal(inflateInit2(&zs, 15 + 16), Z_OK);
    _cleanup_free_ char *out = malloc(plain->len + 1);
    zs.next_in = (Bytef *)z->body;
    zs.avail_in = (uInt)z->len;
    zs.next_out = (Bytef *)out;
    zs.avail_out = (uInt)plain->len + 1;
    assert_int_equal(inflate(&zs, Z_FINISH), Z_STREAM_END);
    assert_int_equal(zs.total_out, plain->len);
    inflateEnd(&zs);
    assert_memory_equal(out, plain->body, plain->len);
    assert_non_null(strstr(plain->body, "# EOF\n"));
}

/* Ahead of time only what was asked for: nothing before the first scrape, then that kind. */
static void test_prepare_renders_asked_kinds(void **state)
{
    (void)state;
    _cleanup_(pages_freep) struct pages *p = new_pages();
    _cleanup_(snapshot_unrefp) struct snapshot *first = some_snapshot();
    pages_prepare(first, p);
    for (int k = 0; k < PAGE_KINDS; k++)
        assert_null(atomic_load(&first->pages[k]));
    const struct page *pg;
    assert_int_equal(pages_get(p, first, PAGE_TEXT_GZIP, &pg), 0);
    _cleanup_(snapshot_unrefp) struct snapshot *next = some_snapshot();
    pages_prepare(next, p);
    assert_non_null(atomic_load(&next->pages[PAGE_TEXT_GZIP]));
    assert_non_null(atomic_load(&next->pages[PAGE_TEXT])); /* what the gzip is made of */
    assert_null(atomic_load(&next->pages[PAGE_OPENMETRICS]));
    assert_null(atomic_load(&next->pages[PAGE_OPENMETRICS_GZIP]));
}

struct racer {
    struct pages *p;
    struct snapshot *s;
    const struct page *got;
};

static void *race(void *arg)
{
    struct racer *r = arg;
    assert_int_equal(pages_get(r->p, r->s, PAGE_TEXT_GZIP, &r->got), 0);
    return NULL;
}

/* Scrapes that find a kind missing at the same moment all get the one page that was kept. */
static void test_concurrent_first_scrapes(void **state)
{
    (void)state;
    _cleanup_(pages_freep) struct pages *p = new_pages();
    _cleanup_(snapshot_unrefp) struct snapshot *s = some_snapshot();
    enum { N = 8 };
    pthread_t t[N];
    struct racer r[N];
    for (int i = 0; i < N; i++) {
        r[i] = (struct racer){.p = p, .s = s};
        assert_int_equal(pthread_create(&t[i], NULL, race, &r[i]), 0);
    }
    for (int i = 0; i < N; i++)
        assert_int_equal(pthread_join(t[i], NULL), 0);
    for (int i = 1; i < N; i++)
        assert_ptr_equal(r[i].got, r[0].got);
    assert_ptr_equal(r[0].got, atomic_load(&s->pages[PAGE_TEXT_GZIP]));
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_kinds),
        cmocka_unit_test(test_rendered_once),
        cmocka_unit_test(test_gzip_of_plain),
        cmocka_unit_test(test_prepare_renders_asked_kinds),
        cmocka_unit_test(test_concurrent_first_scrapes),
    };
    return test_run_cases(tests);
}
