/* libFuzzer target: dcgm-exporter's collectors file (gpumon/collectors.c) on fuzzed text, with a
 * fixed list of offered names that includes one the DCGM table lacks.
 *
 * Checked: the result is 0 or -EINVAL/-ENOMEM; on failure the message names the file and the
 * result is untouched; on success skipped is a strv whose entries read "NAME (line N)" for
 * distinct names DCGM knows and gpumon does not offer, on lines that exist, and every selected
 * name occurs in the text. */
#include <errno.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "collectors.h"
#include "dcgm-fields.h"
#include "lib/fuzz-check.h"
#include "lib/macro.h"
#include "lib/strv.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

static const char *const offered[] = {
    "DCGM_FI_DEV_GPU_TEMP",   "DCGM_FI_DEV_POWER_USAGE",   "DCGM_FI_DEV_FB_USED",
    "DCGM_FI_DRIVER_VERSION", "DCGM_EXP_XID_ERRORS_COUNT", "GPUMON_FUZZ_ONLY",
};

static bool is_offered(const char *name)
{
    for (size_t i = 0; i < ELEMENTSOF(offered); i++)
        if (strcmp(offered[i], name) == 0)
            return true;
    return false;
}

/* One entry of skipped: "NAME (line N)" with a known, not offered NAME and 1 <= N <= lines.
 * Names in the table have no blanks, so the first blank ends the name. */
static void check_skipped_entry(const char *s, size_t lines)
{
    static const char mid[] = " (line ";
    const char *sp = strchr(s, ' ');
    CHECK(sp && sp > s && (size_t)(sp - s) <= COLLECTORS_LINE_MAX);
    CHECK(strncmp(sp, mid, strlen(mid)) == 0);
    char name[COLLECTORS_LINE_MAX + 1];
    memcpy(name, s, (size_t)(sp - s));
    name[sp - s] = '\0';
    CHECK(dcgm_field_find(name) && !is_offered(name));
    char *end;
    unsigned long line = strtoul(sp + strlen(mid), &end, 10);
    CHECK(strcmp(end, ")") == 0 && line >= 1 && line <= lines);
}

static void check_success(const struct collectors_result *r, const bool *selected, const char *text,
                          size_t size)
{
    CHECK(r->skipped);
    size_t lines = 1;
    for (size_t i = 0; i < size; i++)
        lines += text[i] == '\n';
    for (char **s = r->skipped; *s; s++) {
        check_skipped_entry(*s, lines);
        for (char **t = r->skipped; t < s; t++)
            CHECK(strcmp(*s, *t) != 0);
    }
    /* The text had no NUL (else it failed), so the copy is one string. */
    for (size_t i = 0; i < ELEMENTSOF(offered); i++) {
        CHECK(selected[i] == true || selected[i] == false);
        if (selected[i])
            CHECK(strstr(text, offered[i]));
    }
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    /* A copy of exactly size bytes, so that ASan sees any read past the end; plus a NUL after
     * it for strstr(), which only runs when the text holds no other NUL. */
    char *text = malloc(size + 1);
    if (!text)
        abort();
    memcpy(text, data, size);
    text[size] = '\0';

    bool selected[ELEMENTSOF(offered)];
    memset(selected, 0x5a, sizeof(selected));
    char *sentinel[] = {NULL};
    struct collectors_result r = {.selected = selected, .skipped = sentinel};
    struct errmsg e = {""};
    int ret = collectors_parse("fuzz.csv", text, size, offered, ELEMENTSOF(offered), &r, &e);
    if (ret < 0) {
        CHECK(ret == -EINVAL || ret == -ENOMEM);
        CHECK(strncmp(e.text, "fuzz.csv:", strlen("fuzz.csv:")) == 0);
        CHECK(r.skipped == sentinel);
        for (size_t i = 0; i < sizeof(selected); i++)
            CHECK(((unsigned char *)selected)[i] == 0x5a);
    } else {
        CHECK(ret == 0);
        check_success(&r, selected, text, size);
        strv_free(r.skipped);
    }
    free(text);
    return 0;
}
