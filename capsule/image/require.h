/* NVIDIA_REQUIRE_* constraints of an image, checked against the host's driver.
 *
 * The syntax is nvidia-container-toolkit's: NVIDIA_REQUIRE_CUDA and every other variable whose
 * name starts with NVIDIA_REQUIRE_ hold space-separated alternatives; each alternative is a
 * comma-separated list of conditions that must all hold:
 *     "cuda>=12.2 brand=tesla,driver>=470,driver<471 brand=tesla,driver>=525,driver<526"
 * Conditions: cuda, driver, arch (compute capability "8.0"), brand (string, = or != only), with
 * the operators =, !=, <, <=, >, >=. Versions compare numerically part by part ("535.104.05").
 * The image is accepted if, for every variable, any alternative holds; a condition on a fact the
 * host does not report (e.g. brand unknown) holds. NVIDIA_DISABLE_REQUIRE=1 (or "true") in the
 * image or user environment skips the check. Images built for CUDA >= 11 with the toolkit's
 * compat package may set NVIDIA_REQUIRE_CUDA to "cuda>=X.Y" only; that is the common case. */
#pragma once

#include <stdbool.h>

#include "lib/errmsg.h"

/* What the host has. Strings may be "" (unknown). */
struct require_host {
    const char *cuda;   /* the driver's CUDA version, "13.0" */
    const char *driver; /* "580.159.04" */
    const char *brand;  /* lower case: "tesla", "geforce", "nvidia", … */
    const char *const
        *archs; /* compute capabilities of the selected GPUs, "9.0"; NULL-terminated or NULL */
};

/* Checks every NVIDIA_REQUIRE_* entry of env ("K=V" strings, NULL-terminated) against host.
 * Returns 0 when satisfied or disabled; -EPERM when not, with a message that names the variable,
 * the condition that failed and what to do: "image requires cuda>=12.4 (NVIDIA_REQUIRE_CUDA);
 * this host's driver 535.104.05 supports CUDA 12.2: install driver 550 or newer"; -EINVAL when a
 * value does not parse (message quotes it). */
int require_check(char *const *env, const struct require_host *host, struct errmsg *e);

/* The minimum Linux driver branch that supports a CUDA version ("12.4" -> "550.54.14"), from
 * NVIDIA's release notes table (CUDA 10.0 .. 13.0); NULL if unknown. For messages. */
const char *require_min_driver_for_cuda(const char *cuda);

/* Parses one variable's value; returns 0 or -EINVAL with a message naming the alternative and
 * condition. For tests and fuzzing. */
int require_parse(const char *value, struct errmsg *e);

/* Compares dotted numeric versions part by part ("12.10" > "12.9", "1.0" == "1"). Returns <0, 0,
 * >0. Non-numeric parts compare as strings. */
int require_version_cmp(const char *a, const char *b);
