/* libFuzzer target for what coolctl takes from outside: coold's JSON documents (rendered as the
 * status table, events, drill stages and decoded settings) and the curve points and limits a
 * person types. Nothing may crash, leak or read out of bounds whatever the input. */
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "coolctl.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

static void fuzz_args(const uint8_t *data, size_t size)
{
    char text[512];
    size_t n = size < sizeof(text) - 1 ? size : sizeof(text) - 1;
    memcpy(text, data, n);
    text[n] = '\0';

    struct ctl_curve c;
    struct ctl_settings s;
    ctl_settings_defaults(&s, 2);
    if (coolctl_points_parse(text, &c, NULL) == 0)
        (void)coolctl_curve_check(&s, 1, &c, NULL);

    /* Space-separated words as `limits set` arguments. */
    char *argv[8];
    int argc = 0;
    char *save = NULL;
    for (char *w = strtok_r(text, " ", &save); w && argc < 8; w = strtok_r(NULL, " ", &save))
        argv[argc++] = w;
    struct coolctl_assign a[6];
    int r = coolctl_limits_parse(argc, argv, a, 6, NULL);
    if (r > 0)
        (void)coolctl_assign_check(&s, a, (unsigned)r, NULL);
}

static void fuzz_documents(const uint8_t *data, size_t size)
{
    json_t *doc = json_loadb((const char *)data, size, JSON_DECODE_ANY, NULL);
    if (!doc)
        return;
    FILE *f = fopen("/dev/null", "we");
    if (f) {
        coolctl_render_status(f, doc, true);
        coolctl_render_events(f, doc);
        (void)coolctl_render_drill(f, doc, true);
        coolctl_render_settings(f, json_object_get(doc, "settings"));
        fclose(f);
    }
    struct ctl_settings s;
    (void)coolctl_settings_decode(json_object_get(doc, "settings"), &s, NULL);
    json_decref(doc);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    fuzz_args(data, size);
    fuzz_documents(data, size);
    return 0;
}
