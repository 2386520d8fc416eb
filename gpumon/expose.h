/* Exposition: renders a snapshot as Prometheus text, with dcgm-exporter's metric names, types and
 * labels for its default counters plus gpumon's own families.
 *
 * Rendering never calls NVML and never blocks; it runs once per scrape on an immutable snapshot.
 * Families come in a fixed order and appear only when they have at least one sample; a field the
 * snapshot does not have is left out, never shown as 0. */
#pragma once

#include <stdbool.h>
#include <stddef.h>
#include <time.h>

#include "lib/prom.h"
#include "snapshot.h"

struct expose_opts {
    enum prom_format format;
    /* Unix time of the scrape, for gpumon_sample_age_seconds; <= 0 reads CLOCK_REALTIME. */
    double now;
    /* CLOCK_MONOTONIC at the start of the request, for gpumon_scrape_duration_seconds; {0, 0}
     * measures from the start of expose_render(). */
    struct timespec started;
    /* Tests set this for output that does not depend on the machine's speed: when true,
     * gpumon_scrape_duration_seconds shows scrape_duration instead of a measurement. */
    bool fixed_scrape_duration;
    double scrape_duration;
    /* gpumon's version for gpumon_info; NULL: the version it was built as. */
    const char *version;
};

/* Renders s. Returns 0 with the malloc'd, NUL-terminated text in *ret_text and its length in
 * *ret_len (may be NULL); -ENOMEM; -EINVAL for an unknown format. The caller keeps its reference
 * to s.
 *
 * Order: gpumon_up, gpumon_last_error_info, gpumon_info, gpumon_gpus, gpumon_gpu_up; the dcgm
 * fields in enum gpu_field order (gpumon_pcie_{tx,rx}_bytes_per_second among them);
 * DCGM_FI_DEV_XID_ERRORS, gpumon_xid_errors_total, gpumon_xid_last_seen_timestamp_seconds;
 * gpumon_clock_event_active; gpumon_process_memory_bytes; gpumon_sample_age_seconds,
 * gpumon_sample_duration_seconds, gpumon_nvml_errors_total; gpumon_scrape_duration_seconds last.
 *
 * Series: every dcgm field of every readable GPU, labelled gpu, UUID, pci_bus_id, device
 * ("nvidia<minor>"), modelName, Hostname, DCGM_FI_DRIVER_VERSION; MIG instances add GPU_I_PROFILE
 * and GPU_I_ID after modelName and show the framebuffer fields (one series per GPU instance). A
 * lost or unreadable GPU shows only gpumon_gpu_up 0 and its XID families. Label values that are
 * not valid UTF-8 or hold control characters are shown with '?' in their place. */
int expose_render(const struct snapshot *s, const struct expose_opts *o, char **ret_text,
                  size_t *ret_len);
