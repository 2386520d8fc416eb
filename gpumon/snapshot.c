/* Snapshot lifetime; see snapshot.h. */
#include "snapshot.h"

#include <stdlib.h>

struct snapshot *snapshot_new(void)
{
    struct snapshot *s = calloc(1, sizeof(*s));
    if (!s)
        return NULL;
    atomic_init(&s->refs, 1);
    return s;
}

struct snapshot *snapshot_ref(struct snapshot *s)
{
    /* Relaxed is enough: whoever hands the pointer over already holds a reference, so the
     * object cannot go away while the count rises. */
    atomic_fetch_add_explicit(&s->refs, 1, memory_order_relaxed);
    return s;
}

static void gpu_sample_done(struct gpu_sample *g)
{
    free(g->mig);
    free(g->proc);
    free(g->xid);
}

void snapshot_unref(struct snapshot *s)
{
    if (!s)
        return;
    /* acq_rel: the thread that frees must see every write other holders made before they
     * dropped their references. */
    if (atomic_fetch_sub_explicit(&s->refs, 1, memory_order_acq_rel) != 1)
        return;
    for (unsigned i = 0; i < s->n_gpu; i++)
        gpu_sample_done(&s->gpu[i]);
    free(s->gpu);
    for (size_t k = 0; k < PAGE_KINDS; k++) {
        struct page *p = atomic_load_explicit(&s->pages[k], memory_order_relaxed);
        if (p)
            free(p->body);
        free(p);
    }
    free(s);
}
