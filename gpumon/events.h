/* XID events: a thread that waits on an NVML event set for critical XID errors and counts them
 * per GPU and XID, with the time each was last seen.
 *
 * The counts belong to the struct events, not to the thread: the sampler stops the thread
 * before it re-loads NVML (a GPU back after a reset) and starts it again afterwards, and the
 * counts since gpumon started survive. GPUs are keyed by UUID, since the index of a GPU may
 * change across such a re-load. All functions may be called from any thread; events_start()
 * and events_stop() must not race each other. */
#pragma once

#include <stdint.h>

#include "lib/errmsg.h"
#include "lib/gpu.h"
#include "lib/nvml.h"
#include "snapshot.h"

/* How long one nvmlEventSetWait_v2 call waits, which bounds how long events_stop() takes. */
#define EVENTS_WAIT_MS 500u

struct events;

/* Creates an empty XID table; no thread runs yet. Returns 0 and *ret, or -ENOMEM. */
int events_new(struct events **ret);

/* Stops the thread if it runs and frees everything. NULL is allowed. */
void events_free(struct events *ev);
DEFINE_POINTER_CLEANUP(struct events, events_free)

/* Creates an event set, registers every readable GPU of l for nvmlEventTypeXidCriticalError and
 * starts the thread. A GPU (or a driver) that does not support XID events is not an error: it
 * is left out and events_fill() reports xid_supported false for it. A GPU that cannot be asked
 * (lost, so listed with an error) keeps what an earlier start found out, so the XID that lost it
 * stays shown. n and l must stay valid until events_stop(). Returns 0, -EBUSY if the thread
 * already runs, -ENOMEM, or the -errno of pthread_create(); on failure no thread runs. */
int events_start(struct events *ev, struct nvml *n, const struct gpu_list *l, struct errmsg *e);

/* Stops the thread (it notices within EVENTS_WAIT_MS), joins it and frees the event set. The
 * counts and what is known about support stay. Does nothing if no thread runs. */
void events_stop(struct events *ev);

/* Copies what is known about the GPU with this UUID into g: xid_supported (whether the GPU
 * reports XIDs, as last found out; false for a GPU never registered), last_xid, and n_xid / xid,
 * a malloc'd array ordered by XID that g's snapshot owns afterwards (NULL when no XID was seen).
 * Returns 0, or -ENOMEM with g unchanged. */
int events_fill(struct events *ev, const char *uuid, struct gpu_sample *g);

/* NVML calls of the thread that failed since events_new() (other than timeouts and
 * NOT_SUPPORTED), for gpumon_nvml_errors_total. */
uint64_t events_errors(struct events *ev);
