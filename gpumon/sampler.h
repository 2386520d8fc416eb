/* The sampler: owns NVML and the GPU model, reads the GPUs in the background and publishes
 * complete snapshots for scrapes.
 *
 * Three threads: a fast one reads the cheap fields every interval and publishes a new snapshot
 * (it also re-opens NVML when the driver was missing, a GPU was lost or the GPU count changed,
 * in NVML or in the kernel's PCI devices, every rescan interval, and then asks the GPUs again for
 * the fields they did not support); a slow one reads the expensive fields (total energy ~4 ms, PCIe
 * throughput ~21 ms per GPU) and watches the MIG layout every slow interval, and the fast pass
 * merges its latest values; the events thread (events.h) counts XIDs. A scrape only takes a
 * reference to the current snapshot, so it never calls NVML and never waits for a pass. */
#pragma once

#include <stdbool.h>

#include "lib/errmsg.h"
#include "snapshot.h"

struct sampler_config {
    const char *nvml_library; /* NULL or "": NVML_LIBRARY through the dynamic loader */
    const char *hostname;     /* NULL: gethostname() */
    const char *proc_root;    /* NULL: "/proc"; where process attribution looks */
    /* NULL: "/sys". Where the GPUs bound to the nvidia driver are counted
     * (<sysfs_root>/bus/pci/drivers/nvidia/<PCI address>, display class), to see GPUs NVML
     * cannot see until it is re-opened. "" or no such directory: no such check. */
    const char *sysfs_root;
    double interval_s;
    double slow_interval_s;
    double rescan_interval_s;
    bool process_metrics;
    bool pcie_throughput;
    bool profiling; /* read the DCGM_FI_PROF_* fields (NVML GPM) */
};

struct sampler;

/* Tries to open NVML (a missing driver is not an error: snapshots then say up=false with the
 * reason, and the sampler retries every rescan interval), takes a first complete sample,
 * publishes it and starts the threads. Strings of c are copied. Returns 0 and *ret, or -ENOMEM,
 * -EINVAL (an interval not above 0) or the -errno of pthread_create() with a message. */
int sampler_new(const struct sampler_config *c, struct sampler **ret, struct errmsg *e);

/* Stops and joins the threads, shuts NVML down and frees everything. References to snapshots
 * taken before stay valid. NULL is allowed. */
void sampler_free(struct sampler *s);
DEFINE_POINTER_CLEANUP(struct sampler, sampler_free)

/* Sets the function the fast thread calls with each new snapshot just before publishing it
 * (the server renders its pages there, so that scrapes find them made); NULL clears it. Waits for
 * a call in progress to return, so after clearing, userdata may be freed. */
void sampler_set_prepare(struct sampler *s, void (*fn)(struct snapshot *snap, void *userdata),
                         void *userdata);

/* A new reference to the latest snapshot (release with snapshot_unref); never NULL. Takes only
 * a mutex held for a pointer swap. */
struct snapshot *sampler_current(struct sampler *s);
