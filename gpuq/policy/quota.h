/* Quotas: how much of each resource a queue (or one user in it) may hold, and what a set of
 * running jobs holds. Pure data and arithmetic.
 *
 * A quota is a short list of limits, each on one resource key:
 *   QUOTA_GPUS        whole GPUs of any model          (config key "gpus")
 *   QUOTA_GPU_MODEL   whole GPUs whose model matches   ("gpus.H100")
 *   QUOTA_MIG         MIG instances of one profile     ("mig.1g.10gb")
 *   QUOTA_CPUS        CPUs, in thousandths             ("cpus")
 *   QUOTA_MEMORY      bytes of memory                  ("memory")
 *   QUOTA_JOBS        running jobs                     ("jobs"; per-user limits mostly)
 * A key that a quota does not list is unlimited. */
#pragma once

#include <stdbool.h>
#include <stdint.h>

#define QUOTA_MAX      16
#define QUOTA_WHAT_MAX 32

enum quota_kind {
    QUOTA_GPUS,
    QUOTA_GPU_MODEL,
    QUOTA_MIG,
    QUOTA_CPUS,
    QUOTA_MEMORY,
    QUOTA_JOBS,
};

struct quota_limit {
    enum quota_kind kind;
    char what[QUOTA_WHAT_MAX]; /* QUOTA_GPU_MODEL: the model; QUOTA_MIG: the profile; else "" */
    uint64_t limit;
};

struct quota {
    unsigned n;
    struct quota_limit l[QUOTA_MAX];
};

/* The limit on (kind, what), or UINT64_MAX when the quota has none. */
uint64_t quota_get(const struct quota *q, enum quota_kind kind, const char *what);
/* Sets (replaces or adds) a limit. Model names and MIG profiles are one key whatever their case
 * ("H100", "h100"); what is ignored for the kinds without one. -E2BIG when the quota is full,
 * -ENAMETOOLONG for a what that does not fit, -EINVAL for an empty what of QUOTA_GPU_MODEL or
 * QUOTA_MIG. */
int quota_set(struct quota *q, enum quota_kind kind, const char *what, uint64_t limit);
/* Every limit of over replaces the one of base on the same key (a calendar window's values over
 * the queue's own). -E2BIG as quota_set(). */
int quota_overlay(struct quota *base, const struct quota *over);

/* The config key of a limit ("gpus", "gpus.H100", "mig.1g.10gb", "cpus", "memory", "jobs") into
 * buf; returns buf. */
char *quota_key(const struct quota_limit *l, char *buf, unsigned size);
/* Parses a config key into kind and what. A model or profile is 1..31 characters of
 * [A-Za-z0-9._+-]. -EINVAL for a key that names no resource. */
int quota_parse_key(const char *key, enum quota_kind *ret_kind, char ret_what[QUOTA_WHAT_MAX]);

/* Whether a GPU's NVML name ("NVIDIA H100 80GB HBM3") is of model ("H100", "h100-80gb"):
 * case-insensitive, the model's words ('-', '_' and ' ' alike) appearing in order as whole words
 * of the name. "H100" matches "NVIDIA H100 80GB HBM3", "H10" does not. */
bool quota_model_matches(const char *gpu_name, const char *model);

/* The most CPUs a quota or a job may name: a million, in thousandths. */
#define QUOTA_CPUS_MAX_MILLI UINT64_C(1000000000)

/* Parses a number of CPUs into thousandths: "2", "0.5" (at most three decimals) or Kubernetes'
 * millicores "500m". Returns 0, -EINVAL for anything else (signs, blanks, units), -ERANGE above
 * QUOTA_CPUS_MAX_MILLI. *ret_milli is written only on success. */
int quota_parse_cpus(const char *s, uint64_t *ret_milli);

/* Parses an amount of memory in bytes: parse_size()'s forms ("4096", "512M", "64 GiB": powers of
 * 1024) and Kubernetes' binary suffixes ("32Gi", "512Mi"). A Kubernetes "32G" counts 1024^3 here
 * as in every gpunode setting, not 10^9. Returns 0, -EINVAL, or -ERANGE past 64 bits. */
int quota_parse_memory(const char *s, uint64_t *ret);
