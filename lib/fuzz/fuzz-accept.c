/* libFuzzer target: prom_format_from_accept() on arbitrary Accept headers, and the writer on
 * arbitrary label values, HELP text and names. */
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "lib/prom.h"

static size_t count_lines(const char *text)
{
    size_t n = 0;
    for (const char *p = text; (p = strchr(p, '\n')); p++)
        n++;
    return n;
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);
int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    char *s = strndup((const char *)data, size);
    if (!s)
        return 0;
    enum prom_format f = prom_format_from_accept(s);
    if (f != PROM_FORMAT_TEXT && f != PROM_FORMAT_OPENMETRICS)
        __builtin_trap();

    struct prom_writer *w = NULL;
    if (prom_writer_new(f, &w) < 0) {
        free(s);
        return 0;
    }
    const char *const labels[] = {"v", s, NULL};
    int fam = prom_family(w, "fuzz_metric", PROM_TYPE_COUNTER, s);
    int sample = prom_sample(w, labels, (double)size);
    int fam2 = prom_family(w, s, PROM_TYPE_GAUGE, NULL);
    char *text = NULL;
    if (prom_writer_finish(w, &text, NULL) == 0) {
        /* Escaping keeps every HELP, TYPE and sample on exactly one line. */
        size_t want =
            (fam == 0 ? 2 : 0) + (sample == 0) + (fam2 == 0) + (f == PROM_FORMAT_OPENMETRICS);
        if (count_lines(text) != want)
            __builtin_trap();
        free(text);
    }
    free(s);
    return 0;
}
