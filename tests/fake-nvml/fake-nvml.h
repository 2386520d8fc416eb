/* Internals of the fake libnvidia-ml.so.1: the fixture model, the library state and the helpers
 * every entry point goes through. See README.md for the fixture schema. */
#pragma once

#include <pthread.h>
#include <stdbool.h>
#include <stddef.h>

#include "lib/nvml-api.h"

#define FAKE_EXPORT __attribute__((visibility("default")))

/* Every entry point of the list is declared here, with the list's prototype and default
 * visibility (the rest of the library is hidden). A definition whose prototype drifts from the
 * list then fails to compile with "conflicting types". */
#define FAKE_DECLARE(name, ret, params) FAKE_EXPORT ret name params;
NVML_API_FUNCTIONS(FAKE_DECLARE)
#undef FAKE_DECLARE

/* One number per entry point, so that fixtures can name calls in "unsupported", "errors" and
 * "delay_us". */
enum fake_call {
#define FAKE_CALL_ENUM(name, ret, params) FC_##name,
    NVML_API_FUNCTIONS(FAKE_CALL_ENUM)
#undef FAKE_CALL_ENUM
        FC_COUNT
};

/* Handles are pointers into static slot arrays, so they stay valid for the life of the library
 * whatever the fixture says after a re-read. */
#define FAKE_MAX_GPUS     64
#define FAKE_MAX_MIG      8  /* MIG devices per GPU (NVML: at most 7) */
#define FAKE_MAX_GI       16 /* GPU instance ids 0..15 */
#define FAKE_MAX_PROFILES 32
#define FAKE_STR_MAX      96

/* An optional number: set is false when the fixture lacks the key, which makes the matching
 * call answer NOT_SUPPORTED. */
struct fake_num {
    bool set;
    unsigned long long v;
};

/* GPM metric values by metric id, for the ids the fixture can name (below 98: the metrics of the
 * first GPM drivers). A metric not set answers NOT_SUPPORTED in nvmlGpmMetricsGet. */
#define FAKE_GPM_IDS 98
struct fake_gpm {
    bool set[FAKE_GPM_IDS];
    double v[FAKE_GPM_IDS];
};

struct fake_proc {
    unsigned pid;
    unsigned long long used_memory; /* NVML_VALUE_NOT_AVAILABLE for null */
    bool compute, graphics;
    unsigned gi, ci; /* NVML_INSTANCE_ID_NONE outside MIG */
};

struct fake_event {
    double at; /* seconds since the first nvmlInit_v2 */
    unsigned long long xid;
    unsigned gi, ci;
};

struct fake_mig_instance {
    unsigned gi, ci, profile_id;
    char uuid[FAKE_STR_MAX];
    struct fake_num mem_total, mem_used; /* bytes */
    struct fake_gpm gpm;                 /* nvmlGpmMigSampleGet of this GPU instance */
};

struct fake_mig_profile {
    unsigned index, id, slices, instances, multiprocessors;
    unsigned long long memory_mb;
    char name[FAKE_STR_MAX]; /* "MIG 1g.10gb" */
};

struct fake_gpu {
    char name[FAKE_STR_MAX];
    char uuid[FAKE_STR_MAX];
    char pci_bus_id[32];
    unsigned pci_domain, pci_bus, pci_device;
    unsigned pci_device_id, pci_subsystem_id;
    struct fake_num minor;
    bool has_cc;
    int cc_major, cc_minor;
    struct fake_num util_gpu, util_mem;
    struct fake_num mem_total, mem_used, mem_reserved; /* used: by applications (v2 sense) */
    struct fake_num temperature, memory_temperature;
    struct fake_num power_usage_mw, power_limit_mw, energy_mj;
    struct fake_num clocks[4]; /* by nvmlClockType_t */
    struct fake_num fan_speed, pcie_replay, pcie_tx_kbps, pcie_rx_kbps;
    struct fake_num encoder_util, decoder_util, clock_event_reasons;
    bool has_ecc, ecc_enabled;
    struct fake_num ecc_sbe_vol, ecc_dbe_vol, ecc_sbe_agg, ecc_dbe_agg;
    bool has_remapped;
    unsigned remap_corr, remap_unc, remap_pending, remap_failure;
    bool xid_events;
    double lost_at; /* < 0: never */

    struct fake_num virt_mode; /* nvmlGpuVirtualizationMode_t */
    bool gpm_supported;
    struct fake_gpm gpm; /* whole-GPU samples */
    /* NVLink: links (0: none), and the rates its cumulative KiB counters grow at. */
    unsigned nvlink_links;
    unsigned long long nvlink_kibps[4]; /* data tx, data rx, raw tx, raw rx */

    bool has_mig, mig_enabled, mig_pending;
    unsigned mig_max_devices;
    unsigned n_instances;
    struct fake_mig_instance instances[FAKE_MAX_MIG];
    unsigned n_profiles;
    struct fake_mig_profile profiles[FAKE_MAX_PROFILES];

    size_t n_procs;
    struct fake_proc *procs;
    size_t n_events;
    struct fake_event *events;

    nvmlReturn_t forced[FC_COUNT]; /* "errors" and "unsupported"; 0: none */
    unsigned delay_us[FC_COUNT];
    /* "max_calls": past this many calls since init (0: no limit), the call fails with
     * NVML_ERROR_UNKNOWN; tests count how often a consumer asks. */
    unsigned max_calls[FC_COUNT];
};

struct fake_fixture {
    nvmlReturn_t init_error; /* 0: init succeeds */
    bool has_driver_version;
    char driver_version[NVML_SYSTEM_DRIVER_VERSION_BUFFER_SIZE];
    bool has_cuda_version;
    int cuda_version;
    nvmlReturn_t forced[FC_COUNT]; /* top-level "errors" for the calls without a device */
    unsigned n_gpus;
    struct fake_gpu *gpus;
};

/* fixture.c */

/* Parses the fixture file at path. Returns 0 and *ret (free with fake_fixture_free), or a
 * negative errno with a one-line message in err naming the key that was wrong. */
int fake_fixture_load(const char *path, struct fake_fixture **ret, char *err, size_t errlen);
void fake_fixture_free(struct fake_fixture *fx);

/* NVML's error code for a name without its prefix ("GPU_IS_LOST", also "SUCCESS"); -1 if
 * unknown. */
int fake_error_from_name(const char *name);

/* The call number for an entry point's name; -1 if it is not in NVML_API_FUNCTIONS. */
int fake_call_from_name(const char *name);

/* core.c */

/* What an entry point works on once fake_begin() let it through. */
struct fake_ctx {
    const struct fake_fixture *fx;
    const struct fake_gpu *gpu;          /* NULL for calls without a device */
    unsigned index;                      /* the GPU's index */
    const struct fake_mig_instance *mig; /* non-NULL on a MIG device handle */
    unsigned mig_index;
    double now; /* seconds since the first successful nvmlInit_v2 */
};

/* Flags for fake_begin(). */
#define FAKE_MIG_OK 1u /* the call also works on MIG device handles */
#define FAKE_SYSTEM 2u /* a call without a device: only the top-level "errors" apply */

/* The one lock; held from fake_begin() to fake_end(). */
extern pthread_mutex_t fake_lock;

/* Locks, checks that NVML is initialised, re-reads a changed fixture (at most every 100 ms),
 * resolves device (ignored with FAKE_SYSTEM), applies the GPU's "delay_us" for call
 * (with the lock dropped while sleeping), then the lost state, "errors"/"unsupported" and the
 * MIG-handle rule. Returns NVML_SUCCESS and fills *c, or the error the call should return. The
 * lock is held on return in every case: pair each call with fake_end(). */
nvmlReturn_t fake_begin(enum fake_call call, nvmlDevice_t device, unsigned flags,
                        struct fake_ctx *c);

/* Unlocks and returns r. */
nvmlReturn_t fake_end(nvmlReturn_t r);

/* Like fake_begin() for the event and GPU instance calls: only the initialised check and the
 * throttled re-read. Lock held on return. */
nvmlReturn_t fake_begin_plain(struct fake_ctx *c);

/* The parent handle of GPU index (stable for the life of the library). */
nvmlDevice_t fake_gpu_handle(unsigned index);
nvmlDevice_t fake_mig_handle(unsigned index, unsigned mig_index);

/* Seconds since the first successful nvmlInit_v2 (CLOCK_MONOTONIC). Lock held. */
double fake_now(void);

/* Whether GPU g is lost at time now. */
bool fake_gpu_lost(const struct fake_gpu *g, double now);

/* Copies s into buf of length NVML-style: INVALID_ARGUMENT for NULL, INSUFFICIENT_SIZE if it
 * does not fit with its NUL. */
nvmlReturn_t fake_copy_string(char *buf, unsigned length, const char *s);

/* mig.c: the profile of a MIG instance, NULL if absent. */
const struct fake_mig_profile *fake_profile_by_id(const struct fake_gpu *g, unsigned id);

/* mig.c: the first instance with GPU instance id gi while MIG is enabled, NULL if none. */
const struct fake_mig_instance *fake_instance_by_gi(const struct fake_gpu *g, unsigned gi);

/* gpm.c: the metric id for a fixture name ("sm_util"), -1 if there is none. */
int fake_gpm_metric_from_name(const char *name);
