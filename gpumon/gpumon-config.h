/* gpumon's settings: built-in defaults, overridden by the [gpumon] section of a config file,
 * overridden by command-line flags. */
#pragma once

#include <stdbool.h>

#include "expose.h"
#include "lib/errmsg.h"

#define GPUMON_DEFAULT_LISTEN          ":9400" /* dcgm-exporter's port */
#define GPUMON_DEFAULT_INTERVAL        1.0
#define GPUMON_DEFAULT_SLOW_INTERVAL   10.0
#define GPUMON_DEFAULT_RESCAN_INTERVAL 5.0
#define GPUMON_DEFAULT_PROC_ROOT       "/proc"
#define GPUMON_DEFAULT_SYSFS_ROOT      "/sys"

/* Limits on the sampling intervals, in seconds. Below 100 ms NVML's own averaging windows make
 * faster samples meaningless; above an hour a "live" exporter is not live any more. */
#define GPUMON_INTERVAL_MIN 0.1
#define GPUMON_INTERVAL_MAX 3600.0

/* What the command line gave; NULL members were not given. Strings are borrowed. */
struct gpumon_flags {
    const char *config_path;
    const char *listen;
    const char *interval;
    const char *slow_interval;
    const char *nvml_library;
    const char *hostname;
    const char *proc_root;
    const char *collectors;
};

/* The effective settings. Strings are owned (gpumon_config_done frees them) and never NULL
 * after a successful load. */
struct gpumon_config {
    char *listen;             /* "host:port", checked by parse_listen_address() */
    double interval_s;        /* fast fields */
    double slow_interval_s;   /* energy, remapped rows, PCIe throughput, MIG topology */
    double rescan_interval_s; /* retry a missing driver, re-load after a lost GPU */
    char *hostname;           /* the Hostname label; gethostname() unless set */
    char *nvml_library;       /* "" = NVML_LIBRARY through the dynamic loader */
    char *proc_root;          /* where process attribution reads /proc */
    char *sysfs_root;         /* where GPUs bound to the nvidia driver are counted; "" = never */
    char *collectors;         /* a dcgm-exporter collectors CSV; "" = everything gpumon has */
    bool process_metrics;
    bool pcie_throughput;
    bool dcgm3_names; /* also DCGM 3's names of fields DCGM 4 renamed */
    /* What the dcgm families show: the collectors file's rows, or everything. */
    struct expose_selection selection;
    /* Rows of the collectors file naming DCGM fields gpumon does not offer: "NAME (line N)". */
    char **collectors_skipped;
};

/* Builds the effective settings: defaults, then the file flags->config_path if set (unknown keys
 * and sections other than [gpumon] are errors naming file and line), then the flags; the
 * Hostname label falls back to $NODE_NAME (as dcgm-exporter's, whose Helm chart sets it to the
 * Kubernetes node's name) and then gethostname(), the collectors file to
 * $DCGM_EXPORTER_COLLECTORS (dcgm-exporter's variable) when neither file nor flag names one. Checks
 * them: interval 100ms..1h, slow_interval from interval to 1h, rescan_interval 100ms..1h, a
 * listen address parse_listen_address() takes, a non-empty hostname of at most 255 bytes, an
 * absolute proc_root, an absolute or empty sysfs_root, a collectors file collectors_load() takes
 * (its errors name the file's line). Returns 0 and fills *ret (release with
 * gpumon_config_done), or -EINVAL / -ERANGE (a bad value; the message names the flag or file:line
 * and key), -ENOENT and other -errno (the file cannot be read), -ENOMEM. *ret is untouched on
 * failure. */
int gpumon_config_load(const struct gpumon_flags *flags, struct gpumon_config *ret,
                       struct errmsg *e);

/* Frees the strings of c and zeroes it. Safe on a zeroed struct. */
void gpumon_config_done(struct gpumon_config *c);
