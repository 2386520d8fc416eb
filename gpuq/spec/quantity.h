/* Kubernetes resource quantities (resource.Quantity), as Job manifests and `gpuq submit` write
 * CPUs and memory: "500m", "2", "1.5", "128974848", "129e6", "129M", "123Mi", "1Gi".
 *
 * The grammar is Kubernetes': an optional '+', an unsigned decimal number ("5", "5.", ".5",
 * "1.25") and at most one suffix, either binary (Ki Mi Gi Ti Pi Ei: powers of 1024), decimal
 * (m k M G T P E: 10^-3 .. 10^18) or a decimal exponent ("e3", "E-2"). No blanks. Values are
 * computed exactly, in integers: "0.1" CPUs is 100m, never 99m.
 *
 * Pure: no I/O. Messages say what is wrong with the value; the caller names the field. */
#pragma once

#include <stdint.h>

#include "lib/errmsg.h"

/* What the single-letter suffixes k, M, G, T, P and E mean for memory. Kubernetes: powers of
 * 1000 ("129M" = 129000000). gpunode's sizes and Slurm's --mem: powers of 1024 ("512M" = 512 MiB;
 * "K" is then accepted for k). The two-letter binary suffixes and exponents mean the same in both.
 */
enum quantity_letters {
    QUANTITY_LETTERS_DECIMAL,
    QUANTITY_LETTERS_BINARY,
};

#define QUANTITY_CPU_MAX_MILLI UINT32_MAX
#define QUANTITY_MEMORY_MAX    ((uint64_t)INT64_MAX) /* what a JSON integer holds */

/* A CPU quantity in thousandths of a CPU: "500m" = 500, "2" = 2000, "1.5" = 1500, "2e-1" = 200.
 * Returns 0 and *ret_milli, or -EINVAL (not a quantity, negative, or finer than 1m, which
 * Kubernetes refuses for CPUs too) or -ERANGE (above QUANTITY_CPU_MAX_MILLI or too many
 * digits). *ret_milli is written only on success. */
int quantity_parse_cpu(const char *s, unsigned *ret_milli, struct errmsg *e);

/* A memory quantity in bytes. Returns 0 and *ret_bytes, or -EINVAL (not a quantity, negative,
 * or not a whole number of bytes: "1.5" and the classic slip "512m", which is 0.512 bytes) or
 * -ERANGE (above QUANTITY_MEMORY_MAX or too many digits). *ret_bytes is written only on
 * success. */
int quantity_parse_memory(const char *s, enum quantity_letters letters, uint64_t *ret_bytes,
                          struct errmsg *e);
