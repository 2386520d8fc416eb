/* Exposition: renders a snapshot as Prometheus text, with dcgm-exporter's metric names, types and
 * labels for its default counters plus gpumon's own families.
 *
 * Rendering never calls NVML and never blocks; it runs once per scrape on an immutable snapshot.
 * Families come in a fixed order and appear only when they have at least one sample; a field the
 * snapshot does not have is left out, never shown as 0. */
#pragma once

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "lib/prom.h"
#include "snapshot.h"

/* Which dcgm families a render shows; gpumon's own families always show. */
struct expose_selection {
    uint64_t fields;             /* bit (1 << enum gpu_field) */
    bool xid_errors;             /* DCGM_FI_DEV_XID_ERRORS */
    bool driver_label;           /* the DCGM_FI_DRIVER_VERSION label on every dcgm series */
    bool clock_throttle_reasons; /* DCGM 3's DCGM_FI_DEV_CLOCK_THROTTLE_REASONS beside DCGM 4's
                                  * DCGM_FI_DEV_CLOCKS_EVENT_REASONS */
};

struct expose_opts {
    enum prom_format format;
    /* gpumon's version for gpumon_info; NULL: the version it was built as. */
    const char *version;
    /* NULL: everything gpumon has (expose_select_all() without DCGM 3 names). */
    const struct expose_selection *sel;
};

/* Everything, with or without DCGM 3's names of renamed fields. */
void expose_select_all(struct expose_selection *ret, bool dcgm3_names);

/* The dcgm names a selection can hold (what a dcgm-exporter collectors file may list and
 * gpumon can show), into names, which must have room for EXPOSE_DCGM_NAMES_MAX. Returns how
 * many. */
#define EXPOSE_DCGM_NAMES_MAX (GF_COUNT + 3)
size_t expose_dcgm_names(const char **names);

/* Whether sel shows any DCGM_FI_PROF_* field: else nobody needs GPM read. */
bool expose_wants_profiling(const struct expose_selection *sel);

/* The selection of the names whose selected[i] is set (names and n as expose_dcgm_names()
 * gave them). */
void expose_select(const char *const *names, const bool *selected, size_t n,
                   struct expose_selection *ret);

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
