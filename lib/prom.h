/* Prometheus exposition writer: text format 0.0.4 and OpenMetrics 1.0.0.
 *
 * Usage: pick the format from the scrape's Accept header, start a family, add its samples,
 * start the next family, ... then finish to get the text. Names are validated and label values
 * and HELP text escaped, so output is always parseable. A writer is used by one thread. */
#pragma once

#include <stddef.h>
#include <stdint.h>

#include "lib/macro.h"

enum prom_format {
    PROM_FORMAT_TEXT,        /* text/plain; version=0.0.4; charset=utf-8 */
    PROM_FORMAT_OPENMETRICS, /* application/openmetrics-text; version=1.0.0; charset=utf-8 */
};

enum prom_type {
    PROM_TYPE_GAUGE,
    PROM_TYPE_COUNTER,
    /* A counter whose samples keep the name exactly as given, without "_total", for existing
     * metric names that dashboards rely on (dcgm-exporter's DCGM_FI_DEV_*). Text 0.0.4 types it
     * "counter"; OpenMetrics, which requires counter samples to end in _total, types it
     * "unknown" so the name still survives the scrape. Negative values are rejected. */
    PROM_TYPE_COUNTER_KEEP_NAME,
    /* A histogram: samples through prom_histogram() only (<name>_bucket with le, _sum, _count). */
    PROM_TYPE_HISTOGRAM,
};

/* Chooses the format for an Accept header value (NULL allowed): OpenMetrics only when the
 * client lists application/openmetrics-text with q > 0 and prefers it at least as much as any
 * text/plain or wildcard it also lists; TEXT otherwise. */
enum prom_format prom_format_from_accept(const char *accept);

/* Chooses text 0.0.4 whenever the client accepts it at all, OpenMetrics only for a client that
 * accepts nothing else. For expositions whose counters keep names without _total
 * (PROM_TYPE_COUNTER_KEEP_NAME): only text 0.0.4 can call them counters, and Prometheus, which
 * prefers OpenMetrics but accepts both, then keeps their type. */
enum prom_format prom_format_text_first(const char *accept);

/* The Content-Type header value for a format (a static string). */
const char *prom_content_type(enum prom_format f);

struct prom_writer;

/* Creates an empty writer. Returns 0 and *ret, or -ENOMEM / -EINVAL (unknown format). */
int prom_writer_new(enum prom_format f, struct prom_writer **ret);

/* Starts a family; following prom_sample() calls belong to it. name must match
 * [a-zA-Z_:][a-zA-Z0-9_:]* (-EINVAL otherwise). A counter's name may be given with or without
 * "_total": samples are always written as <base>_total, and in OpenMetrics the TYPE/HELP lines
 * name <base> (in text 0.0.4 they name <base>_total, as the samples). help may be NULL (no HELP
 * line); it is escaped (\\ and \n). A second family with the same name fails with -EEXIST.
 * -ENOMEM. */
int prom_family(struct prom_writer *w, const char *name, enum prom_type type, const char *help);

/* Adds a sample to the current family. labels: NULL or a NULL-terminated array
 * name, value, name, value, ..., NULL. Label names must match [a-zA-Z_][a-zA-Z0-9_]* and not
 * start with "__" (-EINVAL), an odd count is -EINVAL; values are escaped (\\, \", \n). Counters
 * reject negative values (-ERANGE). NaN, +Inf, -Inf are written as such; integral values below
 * 2^53 without exponent or decimals. -EINVAL without a current family; -ENOMEM. */
int prom_sample(struct prom_writer *w, const char *const *labels, double value);

/* Adds one histogram of the current family (PROM_TYPE_HISTOGRAM, else -EINVAL): a _bucket sample
 * for each upper bound (bounds ascending, the last one may be +Inf; counts cumulative, as
 * Prometheus reads them), then +Inf when the bounds lack it, _sum and _count. labels as
 * prom_sample()'s, without "le". -EINVAL, -ENOMEM. */
int prom_histogram(struct prom_writer *w, const char *const *labels, const double *bounds,
                   const uint64_t *cumulative, size_t n, double sum, uint64_t count);

/* Finishes the exposition (OpenMetrics: appends "# EOF\n"), hands out the malloc'd,
 * NUL-terminated text in *ret_text (length without NUL in *ret_len, which may be NULL) and frees
 * the writer, also on failure. Returns 0 or -ENOMEM. */
int prom_writer_finish(struct prom_writer *w, char **ret_text, size_t *ret_len);

/* Frees an unfinished writer. NULL is allowed. */
void prom_writer_free(struct prom_writer *w);
DEFINE_POINTER_CLEANUP(struct prom_writer, prom_writer_free)
