/* The field names a dcgm-exporter collectors file may list: every DCGM field (DCGM_FI_*, under
 * its current name and the names DCGM has retired or renamed), dcgm-exporter's own fields
 * (DCGM_EXP_*) and the metric names of dcgm-exporter 1.x (dcgm_*), which it still accepts.
 *
 * gpumon shows only some of them; the others still have to be recognised, so that a site's
 * file written for dcgm-exporter loads here too, with what gpumon cannot show set aside. */
#pragma once

#include <stddef.h>

/* What a field's value is, as far as the file's type column cares. */
enum dcgm_field_kind {
    DCGM_FIELD_NUMBER, /* a number: gauge, counter, histogram or summary, never a label */
    DCGM_FIELD_STRING, /* text (DCGM_FT_STRING): only a label */
    DCGM_FIELD_OTHER,  /* a structure, or a field whose kind is not checked: any type */
};

struct dcgm_field {
    const char *name;
    enum dcgm_field_kind kind;
};

/* The field called name (exact, case-sensitive, as dcgm-exporter compares), or NULL. The result
 * points into a static table. */
const struct dcgm_field *dcgm_field_find(const char *name);

/* The whole table, sorted by strcmp() without duplicates; *ret_n is its length. For tests. */
const struct dcgm_field *dcgm_field_table(size_t *ret_n);
