#include "events.h"

#include <pthread.h>
#include <stdatomic.h>
#include <stdbool.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "lib/clock.h"
#include "lib/macro.h"

/* One GPU's XIDs, kept for the life of gpumon. */
struct xid_record {
    char uuid[GPU_UUID_MAX];
    /* Its XIDs are reported, as last found out: a GPU that cannot be asked (lost) keeps its last
     * answer, so the XID that lost it stays shown across re-loads. */
    bool supported;
    unsigned last_xid;
    unsigned n, cap;
    struct xid_count *xids; /* ordered by xid */
};

/* A registered GPU: its handle, as the event data names it, and its record. */
struct watched {
    nvmlDevice_t handle;
    unsigned record;
};

struct events {
    pthread_mutex_t lock; /* guards records and the stop wait */
    pthread_cond_t stop_cond;
    unsigned n_records;
    struct xid_record *records;

    /* The running thread; only events_start() and events_stop() change these. */
    bool running;
    atomic_bool stop;
    pthread_t thread;
    struct nvml *nvml;
    nvmlEventSet_t set;
    unsigned n_watched;
    struct watched *watched;

    atomic_uint_fast64_t errors;
};

int events_new(struct events **ret)
{
    struct events *ev = calloc(1, sizeof(*ev));
    if (!ev)
        return -ENOMEM;
    pthread_condattr_t attr;
    pthread_condattr_init(&attr);
    pthread_condattr_setclock(&attr, CLOCK_MONOTONIC);
    pthread_cond_init(&ev->stop_cond, &attr);
    pthread_condattr_destroy(&attr);
    pthread_mutex_init(&ev->lock, NULL);
    *ret = ev;
    return 0;
}

void events_free(struct events *ev)
{
    if (!ev)
        return;
    events_stop(ev);
    for (unsigned i = 0; i < ev->n_records; i++)
        free(ev->records[i].xids);
    free(ev->records);
    pthread_cond_destroy(&ev->stop_cond);
    pthread_mutex_destroy(&ev->lock);
    free(ev);
}

/* Returns the record index for uuid, adding one if needed; -ENOMEM. Called under the lock. */
static int record_get(struct events *ev, const char *uuid)
{
    for (unsigned i = 0; i < ev->n_records; i++)
        if (strcmp(ev->records[i].uuid, uuid) == 0)
            return (int)i;
    struct xid_record *r = reallocarray(ev->records, ev->n_records + 1, sizeof(*r));
    if (!r)
        return -ENOMEM;
    ev->records = r;
    r = &ev->records[ev->n_records];
    memset(r, 0, sizeof(*r));
    snprintf(r->uuid, sizeof(r->uuid), "%s", uuid);
    return (int)ev->n_records++;
}

static double unix_now(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_REALTIME, &ts);
    return (double)ts.tv_sec + ts.tv_nsec / 1e9;
}

/* Counts one XID in record r. Called under the lock. */
static void record_xid(struct xid_record *r, unsigned xid, double now)
{
    unsigned i = 0;
    while (i < r->n && r->xids[i].xid < xid)
        i++;
    if (i == r->n || r->xids[i].xid != xid) {
        if (r->n == r->cap) {
            unsigned cap = r->cap ? 2 * r->cap : 4;
            struct xid_count *x = reallocarray(r->xids, cap, sizeof(*x));
            if (!x)
                return; /* losing one count beats losing the thread */
            r->xids = x;
            r->cap = cap;
        }
        memmove(&r->xids[i + 1], &r->xids[i], (r->n - i) * sizeof(*r->xids));
        r->xids[i] = (struct xid_count){.xid = xid};
        r->n++;
    }
    r->xids[i].count++;
    r->xids[i].last_seen = now;
    r->last_xid = xid;
}

static void handle_event(struct events *ev, const nvmlEventData_t *d)
{
    if (!(d->eventType & nvmlEventTypeXidCriticalError))
        return;
    double now = unix_now();
    pthread_mutex_lock(&ev->lock);
    for (unsigned i = 0; i < ev->n_watched; i++)
        if (ev->watched[i].handle == d->device) {
            record_xid(&ev->records[ev->watched[i].record], (unsigned)d->eventData, now);
            break;
        }
    pthread_mutex_unlock(&ev->lock);
}

/* Sleeps up to ms unless stopped; used after a failed wait so a broken event set does not spin. */
static void pause_unless_stopped(struct events *ev, unsigned ms)
{
    struct timespec until = clock_deadline_msec(ms);
    pthread_mutex_lock(&ev->lock);
    while (!atomic_load(&ev->stop))
        if (pthread_cond_timedwait(&ev->stop_cond, &ev->lock, &until) != 0)
            break;
    pthread_mutex_unlock(&ev->lock);
}

static void *events_thread(void *userdata)
{
    struct events *ev = userdata;
    const struct nvml_api *api = nvml_api(ev->nvml);
    while (!atomic_load(&ev->stop)) {
        nvmlEventData_t d = {0};
        nvmlReturn_t r = api->nvmlEventSetWait_v2(ev->set, &d, EVENTS_WAIT_MS);
        if (r == NVML_SUCCESS)
            handle_event(ev, &d);
        else if (r != NVML_ERROR_TIMEOUT) {
            atomic_fetch_add(&ev->errors, 1);
            pause_unless_stopped(ev, EVENTS_WAIT_MS);
        }
    }
    return NULL;
}

/* Registers one GPU: 1 when its XIDs will arrive, 0 when it does not support XID events, -EIO
 * when the registration failed for another reason. */
static int register_gpu(struct events *ev, const struct nvml_api *api, const struct gpu *g)
{
    unsigned long long types = 0;
    if (api->nvmlDeviceGetSupportedEventTypes &&
        api->nvmlDeviceGetSupportedEventTypes(g->handle, &types) == NVML_SUCCESS &&
        !(types & nvmlEventTypeXidCriticalError))
        return 0;
    nvmlReturn_t r =
        api->nvmlDeviceRegisterEvents(g->handle, nvmlEventTypeXidCriticalError, ev->set);
    if (r == NVML_SUCCESS || r == NVML_ERROR_NOT_SUPPORTED)
        return r == NVML_SUCCESS;
    atomic_fetch_add(&ev->errors, 1);
    return -EIO;
}

/* Builds the handle table and records which GPUs report XIDs. no_events: the driver has no
 * event sets at all. Called under the lock. */
static int register_all(struct events *ev, const struct nvml_api *api, const struct gpu_list *l,
                        bool no_events)
{
    ev->watched = calloc(l->n ? l->n : 1, sizeof(*ev->watched));
    if (!ev->watched)
        return -ENOMEM;
    for (unsigned i = 0; i < l->n; i++) {
        const struct gpu *g = &l->gpus[i];
        /* One that cannot be asked keeps what was known about it. */
        if (g->error != 0 || !g->uuid[0])
            continue;
        int rec = record_get(ev, g->uuid);
        if (rec < 0)
            return rec;
        int r = ev->set ? register_gpu(ev, api, g) : no_events ? 0 : -EIO;
        if (r >= 0)
            ev->records[rec].supported = r > 0;
        if (r > 0)
            ev->watched[ev->n_watched++] =
                (struct watched){.handle = g->handle, .record = (unsigned)rec};
    }
    return 0;
}

static void release_set(struct events *ev)
{
    if (ev->set)
        nvml_api(ev->nvml)->nvmlEventSetFree(ev->set);
    ev->set = NULL;
    free(ev->watched);
    ev->watched = NULL;
    ev->n_watched = 0;
    ev->nvml = NULL;
}

int events_start(struct events *ev, struct nvml *n, const struct gpu_list *l, struct errmsg *e)
{
    if (ev->running)
        return errmsg_set(e, -EBUSY, "the events thread already runs");
    const struct nvml_api *api = nvml_api(n);
    ev->nvml = n;
    /* An old driver without the event API still gets every other metric. */
    bool no_events = !api->nvmlEventSetCreate || !api->nvmlDeviceRegisterEvents ||
                     !api->nvmlEventSetWait_v2 || !api->nvmlEventSetFree;
    if (!no_events) {
        nvmlReturn_t nr = api->nvmlEventSetCreate(&ev->set);
        if (nr != NVML_SUCCESS) {
            ev->set = NULL;
            no_events = nr == NVML_ERROR_NOT_SUPPORTED;
            if (!no_events)
                atomic_fetch_add(&ev->errors, 1);
        }
    }
    pthread_mutex_lock(&ev->lock);
    int r = register_all(ev, api, l, no_events);
    pthread_mutex_unlock(&ev->lock);
    if (r < 0) {
        release_set(ev);
        return errmsg_set(e, r, "out of memory");
    }
    if (ev->n_watched == 0) {
        /* Nothing to wait for: no thread, and the records say unsupported. */
        release_set(ev);
        return 0;
    }
    atomic_store(&ev->stop, false);
    r = -pthread_create(&ev->thread, NULL, events_thread, ev);
    if (r < 0) {
        pthread_mutex_lock(&ev->lock);
        for (unsigned i = 0; i < ev->n_watched; i++)
            ev->records[ev->watched[i].record].supported = false;
        pthread_mutex_unlock(&ev->lock);
        release_set(ev);
        return errmsg_set(e, r, "cannot start the events thread");
    }
    ev->running = true;
    return 0;
}

void events_stop(struct events *ev)
{
    if (!ev->running)
        return;
    pthread_mutex_lock(&ev->lock);
    atomic_store(&ev->stop, true);
    pthread_cond_broadcast(&ev->stop_cond);
    pthread_mutex_unlock(&ev->lock);
    pthread_join(ev->thread, NULL);
    ev->running = false;
    release_set(ev);
}

int events_fill(struct events *ev, const char *uuid, struct gpu_sample *g)
{
    int r = 0;
    pthread_mutex_lock(&ev->lock);
    const struct xid_record *rec = NULL;
    for (unsigned i = 0; i < ev->n_records && !rec; i++)
        if (strcmp(ev->records[i].uuid, uuid) == 0)
            rec = &ev->records[i];
    struct xid_count *copy = NULL;
    if (rec && rec->n > 0) {
        copy = malloc(rec->n * sizeof(*copy));
        if (!copy)
            r = -ENOMEM;
        else
            memcpy(copy, rec->xids, rec->n * sizeof(*copy));
    }
    if (r == 0) {
        g->xid_supported = rec && rec->supported;
        g->last_xid = rec ? rec->last_xid : 0;
        g->n_xid = copy ? rec->n : 0;
        g->xid = copy;
    }
    pthread_mutex_unlock(&ev->lock);
    return r;
}

uint64_t events_errors(struct events *ev)
{
    return atomic_load(&ev->errors);
}
