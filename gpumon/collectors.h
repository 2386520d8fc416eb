/* dcgm-exporter's collectors file (its -f/--collectors CSV, e.g. etc/default-counters.csv): which
 * metrics to show. Each line is `FIELD, TYPE, HELP`: a DCGM field name, a Prometheus type (gauge,
 * counter, histogram, summary, or label for text fields that become labels on every metric) and a
 * help text, which is everything after the second comma and may hold commas. Lines whose first
 * non-blank character is '#' are comments; blank lines are skipped; spaces and tabs around the
 * columns are trimmed; a CR before the newline and a UTF-8 byte order mark at the start are
 * ignored.
 *
 * The parser is stricter than dcgm-exporter where a file would make it fail or show nonsense:
 * names it does not know, types it does not know, a label that is a number, text shown as a
 * gauge, a name listed twice. It is laxer where that costs nothing: commas in the help text,
 * comments after blanks, lines of blanks only. Field names DCGM or dcgm-exporter knows but gpumon
 * cannot show are not errors: they are listed in `skipped`, so a site's file loads unchanged.
 *
 * Not understood: CSV quoting. A quoted help text with commas is fine (it is all help), but a
 * quoted field that spans lines is not: its second line is then an error. */
#pragma once

#include <stdbool.h>
#include <stddef.h>

#include "lib/errmsg.h"

#define COLLECTORS_LINE_MAX 4096      /* bytes in a line, without its line end */
#define COLLECTORS_FILE_MAX (1 << 20) /* bytes in a file collectors_load() reads */

/* What a collectors file selects of what gpumon can show, by DCGM name. */
struct collectors_result {
    bool *selected; /* caller's array of n_offered, set true for each offered name the file lists */
    char **skipped; /* malloc'd NULL-terminated strv (lib/strv.h) of "NAME (line N)" for names
                     * DCGM/dcgm-exporter know that gpumon does not offer; may be empty, never NULL
                     * on success */
};

/* Parses the CSV text (len bytes, need not be NUL-terminated) read from path, which only names
 * it in messages. offered: the names gpumon can show (e.g. "DCGM_FI_DEV_GPU_TEMP",
 * "DCGM_FI_DRIVER_VERSION"); a name there is accepted even when the DCGM table lacks it.
 *
 * On success returns 0, writes every element of r->selected (which must point to n_offered bools
 * unless n_offered is 0): true where the file lists that name, false elsewhere; and sets
 * r->skipped to a new strv the caller frees with strv_free().
 *
 * Fails with -EINVAL and a message "PATH:LINE: ..." at the first line that has an unknown field
 * name, a missing or unknown type, a label for a number field or another type for a text field,
 * a name listed before (the message names that line), fewer than two commas, invalid UTF-8, a
 * control character other than tab, a NUL byte, or more than COLLECTORS_LINE_MAX bytes; or with
 * -ENOMEM. On failure r is untouched. */
int collectors_parse(const char *path, const char *text, size_t len, const char *const *offered,
                     size_t n_offered, struct collectors_result *r, struct errmsg *e);

/* Reads the file at path (at most COLLECTORS_FILE_MAX bytes, else -EFBIG) and parses it as
 * collectors_parse() does, with the same results; open(2)/read(2) errors come back as -errno,
 * a directory as -EISDIR, each with a message naming the path. */
int collectors_load(const char *path, const char *const *offered, size_t n_offered,
                    struct collectors_result *r, struct errmsg *e);
