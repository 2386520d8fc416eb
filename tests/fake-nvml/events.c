/* Events: event sets, registration and nvmlEventSetWait_v2.
 *
 * The fixture's "events" (and the XID 79 of a lost GPU) become due at their "at". Each event set
 * delivers each due event once, for the GPUs registered on it, earliest first. Unlike on a real
 * driver, an event that became due before the set was created is still delivered on it: a test
 * can add an event with "at": 0 to a running daemon's fixture and see it arrive. (So a consumer
 * that makes a new set after re-opening NVML sees old events again here, never on a driver.) */
#include <errno.h>
#include <math.h>
#include <stdlib.h>
#include <time.h>

#include "fake-nvml.h"
#include "lib/macro.h"

/* XID 79: "GPU has fallen off the bus", what the driver reports when a GPU is lost. */
#define XID_FALLEN_OFF_BUS 79
/* The longest nvmlEventSetWait_v2 sleeps between looks: the fixture's re-read interval, so an
 * event a rewrite adds arrives about as soon as the re-read sees it. Due events wake it at once. */
#define WAIT_STEP_NS (100 * 1000 * 1000L)

/* An event already delivered on a set, by content, so that it survives fixture re-reads. */
struct event_key {
    unsigned gpu;
    double at;
    unsigned long long xid;
    unsigned gi, ci;
};

struct nvmlEventSet_st {
    struct nvmlEventSet_st *next; /* in live_sets */
    unsigned long long types[FAKE_MAX_GPUS];
    struct event_key *delivered;
    size_t n_delivered, cap;
};

/* Every set created and not freed, so that a stale or foreign pointer is an invalid argument and
 * not a crash. Under fake_lock. */
static struct nvmlEventSet_st *live_sets;

static bool set_is_live(nvmlEventSet_t set)
{
    for (struct nvmlEventSet_st *s = live_sets; s; s = s->next)
        if (s == set)
            return true;
    return false;
}

static unsigned long long supported_types(const struct fake_gpu *g)
{
    unsigned long long t = nvmlEventTypePState | nvmlEventTypeClock;
    if (g->xid_events)
        t |= nvmlEventTypeXidCriticalError;
    if (g->has_ecc && g->ecc_enabled)
        t |= nvmlEventTypeSingleBitEccError | nvmlEventTypeDoubleBitEccError;
    if (g->has_mig)
        t |= nvmlEventMigConfigChange;
    return t;
}

nvmlReturn_t nvmlDeviceGetSupportedEventTypes(nvmlDevice_t device, unsigned long long *eventTypes)
{
    struct fake_ctx c;
    nvmlReturn_t r = fake_begin(FC_nvmlDeviceGetSupportedEventTypes, device, 0, &c);
    if (r == NVML_SUCCESS && !eventTypes)
        r = NVML_ERROR_INVALID_ARGUMENT;
    if (r == NVML_SUCCESS)
        *eventTypes = supported_types(c.gpu);
    return fake_end(r);
}

/* Calls f for every event of the fixture, the XID 79 of lost GPUs included. */
static void each_event(const struct fake_ctx *c, void (*f)(const struct event_key *k, void *data),
                       void *data)
{
    for (unsigned i = 0; i < c->fx->n_gpus; i++) {
        const struct fake_gpu *g = &c->fx->gpus[i];
        for (size_t e = 0; e < g->n_events; e++) {
            const struct fake_event *ev = &g->events[e];
            struct event_key k = {i, ev->at, ev->xid, ev->gi, ev->ci};
            f(&k, data);
        }
        if (g->lost_at >= 0) {
            struct event_key k = {i, g->lost_at, XID_FALLEN_OFF_BUS, NVML_INSTANCE_ID_NONE,
                                  NVML_INSTANCE_ID_NONE};
            f(&k, data);
        }
    }
}

nvmlReturn_t nvmlEventSetCreate(nvmlEventSet_t *set)
{
    struct fake_ctx c;
    nvmlReturn_t r = fake_begin(FC_nvmlEventSetCreate, NULL, FAKE_SYSTEM, &c);
    if (r == NVML_SUCCESS && !set)
        r = NVML_ERROR_INVALID_ARGUMENT;
    if (r != NVML_SUCCESS)
        return fake_end(r);
    struct nvmlEventSet_st *s = calloc(1, sizeof(*s));
    if (!s)
        return fake_end(NVML_ERROR_MEMORY);
    s->next = live_sets;
    live_sets = s;
    *set = s;
    return fake_end(NVML_SUCCESS);
}

nvmlReturn_t nvmlDeviceRegisterEvents(nvmlDevice_t device, unsigned long long eventTypes,
                                      nvmlEventSet_t set)
{
    struct fake_ctx c;
    nvmlReturn_t r = fake_begin(FC_nvmlDeviceRegisterEvents, device, 0, &c);
    if (r == NVML_SUCCESS && !set_is_live(set))
        r = NVML_ERROR_INVALID_ARGUMENT;
    /* NVML refuses the whole mask if one type is not supported. */
    if (r == NVML_SUCCESS && (eventTypes & ~supported_types(c.gpu)))
        r = NVML_ERROR_NOT_SUPPORTED;
    if (r == NVML_SUCCESS)
        set->types[c.index] |= eventTypes;
    return fake_end(r);
}

nvmlReturn_t nvmlEventSetFree(nvmlEventSet_t set)
{
    struct fake_ctx c;
    nvmlReturn_t r = fake_begin_plain(&c);
    if (r == NVML_SUCCESS && !set_is_live(set))
        r = NVML_ERROR_INVALID_ARGUMENT;
    if (r != NVML_SUCCESS)
        return fake_end(r);
    for (struct nvmlEventSet_st **p = &live_sets; *p; p = &(*p)->next)
        if (*p == set) {
            *p = set->next;
            break;
        }
    free(set->delivered);
    free(set);
    return fake_end(NVML_SUCCESS);
}

static bool was_delivered(const struct nvmlEventSet_st *s, const struct event_key *k)
{
    for (size_t i = 0; i < s->n_delivered; i++) {
        const struct event_key *d = &s->delivered[i];
        if (d->gpu == k->gpu && d->at == k->at && d->xid == k->xid && d->gi == k->gi &&
            d->ci == k->ci)
            return true;
    }
    return false;
}

struct search {
    const struct nvmlEventSet_st *set;
    double now;
    bool found;
    struct event_key best; /* the earliest due, undelivered event */
    double next_at;        /* the earliest undelivered event not yet due; INFINITY if none */
};

static void consider(const struct event_key *k, void *data)
{
    struct search *q = data;
    if (!(q->set->types[k->gpu] & nvmlEventTypeXidCriticalError) || was_delivered(q->set, k))
        return;
    if (k->at > q->now) {
        if (k->at < q->next_at)
            q->next_at = k->at;
    } else if (!q->found || k->at < q->best.at) {
        q->best = *k;
        q->found = true;
    }
}

/* Looks for the earliest due, undelivered event of the set. Lock held. */
static struct search next_event(const struct nvmlEventSet_st *set, const struct fake_ctx *c)
{
    struct search q = {.set = set, .now = c->now, .next_at = INFINITY};
    each_event(c, consider, &q);
    return q;
}

static nvmlReturn_t mark_delivered(struct nvmlEventSet_st *s, const struct event_key *k)
{
    if (s->n_delivered == s->cap) {
        size_t cap = s->cap ? 2 * s->cap : 16;
        struct event_key *d = realloc(s->delivered, cap * sizeof(*d));
        if (!d)
            return NVML_ERROR_MEMORY;
        s->delivered = d;
        s->cap = cap;
    }
    s->delivered[s->n_delivered++] = *k;
    return NVML_SUCCESS;
}

/* One look at the set: SUCCESS with *data filled, TIMEOUT for nothing due (*ret_wait_s: how long
 * until the next event is due, INFINITY if none), or an error. */
static nvmlReturn_t poll_once(nvmlEventSet_t set, nvmlEventData_t *data, double *ret_wait_s)
{
    struct fake_ctx c;
    nvmlReturn_t r = fake_begin_plain(&c);
    if (r == NVML_SUCCESS && (!set_is_live(set) || !data))
        r = NVML_ERROR_INVALID_ARGUMENT;
    if (r != NVML_SUCCESS)
        return fake_end(r);
    struct search q = next_event(set, &c);
    *ret_wait_s = q.next_at - c.now;
    if (!q.found)
        return fake_end(NVML_ERROR_TIMEOUT);
    const struct event_key *k = &q.best;
    r = mark_delivered(set, k);
    if (r == NVML_SUCCESS)
        *data = (nvmlEventData_t){
            .device = fake_gpu_handle(k->gpu),
            .eventType = nvmlEventTypeXidCriticalError,
            .eventData = k->xid,
            .gpuInstanceId = k->gi,
            .computeInstanceId = k->ci,
        };
    return fake_end(r);
}

/* Sleeps until the next event is due, the timeout ends, or the next fixture re-read, whichever
 * comes first: a real driver blocks in the kernel, so the fake must not spin either. */
nvmlReturn_t nvmlEventSetWait_v2(nvmlEventSet_t set, nvmlEventData_t *data, unsigned int timeoutms)
{
    struct timespec start, now;
    clock_gettime(CLOCK_MONOTONIC, &start);
    for (;;) {
        double wait_s = INFINITY;
        nvmlReturn_t r = poll_once(set, data, &wait_s);
        if (r != NVML_ERROR_TIMEOUT)
            return r;
        clock_gettime(CLOCK_MONOTONIC, &now);
        long long left_ns =
            (long long)timeoutms * 1000000LL -
            ((now.tv_sec - start.tv_sec) * 1000000000LL + (now.tv_nsec - start.tv_nsec));
        if (left_ns <= 0)
            return NVML_ERROR_TIMEOUT;
        long long step_ns = left_ns < WAIT_STEP_NS ? left_ns : WAIT_STEP_NS;
        if (wait_s * 1e9 < (double)step_ns)
            step_ns = wait_s > 0 ? (long long)(wait_s * 1e9) + 1 : 1;
        struct timespec step = {step_ns / 1000000000LL, step_ns % 1000000000LL};
        while (nanosleep(&step, &step) < 0 && errno == EINTR)
            ;
    }
}
