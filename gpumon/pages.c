/* Pages; see pages.h. */
#include "pages.h"

#include <errno.h>
#include <stdatomic.h>
#include <stdlib.h>
#include <time.h>

#include "lib/gzip.h"

struct pages {
    struct expose_opts base;
    /* CLOCK_MONOTONIC milliseconds each kind was last asked for; 0 never. */
    atomic_llong asked_ms[PAGE_KINDS];
};

struct pages *pages_new(const struct expose_opts *base)
{
    struct pages *p = calloc(1, sizeof(*p));
    if (!p)
        return NULL;
    p->base = *base;
    for (size_t k = 0; k < PAGE_KINDS; k++)
        atomic_init(&p->asked_ms[k], 0);
    return p;
}

void pages_free(struct pages *p)
{
    free(p);
}

enum page_kind page_kind_of(enum prom_format format, bool gzip)
{
    if (format == PROM_FORMAT_OPENMETRICS)
        return gzip ? PAGE_OPENMETRICS_GZIP : PAGE_OPENMETRICS;
    return gzip ? PAGE_TEXT_GZIP : PAGE_TEXT;
}

enum prom_format page_format(enum page_kind k)
{
    return k == PAGE_OPENMETRICS || k == PAGE_OPENMETRICS_GZIP ? PROM_FORMAT_OPENMETRICS
                                                               : PROM_FORMAT_TEXT;
}

bool page_gzipped(enum page_kind k)
{
    return k == PAGE_TEXT_GZIP || k == PAGE_OPENMETRICS_GZIP;
}

static long long now_ms(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (long long)ts.tv_sec * 1000 + ts.tv_nsec / 1000000;
}

static void page_free(struct page *pg)
{
    if (pg)
        free(pg->body);
    free(pg);
}

/* Installs pg as s's page of kind k unless another thread was faster; returns the page in force
 * (pg is freed if it lost). */
static const struct page *install(struct snapshot *s, enum page_kind k, struct page *pg)
{
    struct page *none = NULL;
    if (atomic_compare_exchange_strong_explicit(&s->pages[k], &none, pg, memory_order_acq_rel,
                                                memory_order_acquire))
        return pg;
    page_free(pg);
    return none;
}

static int make(struct pages *p, struct snapshot *s, enum page_kind k, const struct page **ret);

/* Renders the plain page of kind k, or compresses the plain page its gzip kind is made of. */
static int render(struct pages *p, struct snapshot *s, enum page_kind k, struct page *pg)
{
    if (!page_gzipped(k)) {
        struct expose_opts o = p->base;
        o.format = page_format(k);
        return expose_render(s, &o, &pg->body, &pg->len);
    }
    const struct page *plain;
    int r = make(p, s, page_kind_of(page_format(k), false), &plain);
    if (r < 0)
        return r;
    return gzip_compress(plain->body, plain->len, &pg->body, &pg->len);
}

static int make(struct pages *p, struct snapshot *s, enum page_kind k, const struct page **ret)
{
    const struct page *have = atomic_load_explicit(&s->pages[k], memory_order_acquire);
    if (have) {
        *ret = have;
        return 0;
    }
    struct page *pg = calloc(1, sizeof(*pg));
    if (!pg)
        return -ENOMEM;
    int r = render(p, s, k, pg);
    if (r < 0) {
        page_free(pg);
        return r;
    }
    *ret = install(s, k, pg);
    return 0;
}

int pages_get(struct pages *p, struct snapshot *s, enum page_kind k, const struct page **ret)
{
    atomic_store_explicit(&p->asked_ms[k], now_ms(), memory_order_relaxed);
    return make(p, s, k, ret);
}

void pages_prepare(struct snapshot *s, void *userdata)
{
    struct pages *p = userdata;
    long long now = now_ms();
    for (size_t k = 0; k < PAGE_KINDS; k++) {
        long long asked = atomic_load_explicit(&p->asked_ms[k], memory_order_relaxed);
        const struct page *unused;
        if (asked > 0 && now - asked <= (long long)(PAGES_RECENT_S * 1000))
            (void)make(p, s, (enum page_kind)k, &unused);
    }
}
