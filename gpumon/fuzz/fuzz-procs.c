/* libFuzzer target: the cgroup and environ parsers of process attribution, and the label
 * sanitiser, on arbitrary bytes. Whatever the input, a label is either empty or a known scheme
 * followed by a validated id, so nothing a process controls reaches the exposition raw. */
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "procs.h"
#include "lib/fuzz-check.h"

static bool id_char(char c)
{
    return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') || c == '_' ||
           c == '.' || c == '-';
}

/* value is "" or "<scheme>://<id>" with one of the schemes and an id of the allowed shape. */
static void check_label(const char *value, size_t size, const char *const *schemes)
{
    CHECK(memchr(value, '\0', size));
    if (!value[0])
        return;
    const char *sep = strstr(value, "://");
    CHECK(sep);
    bool known = false;
    for (size_t i = 0; schemes[i]; i++)
        known |= strlen(schemes[i]) == (size_t)(sep - value) &&
                 memcmp(value, schemes[i], (size_t)(sep - value)) == 0;
    CHECK(known);
    const char *id = sep + 3;
    size_t n = strlen(id);
    CHECK(n >= 1 && n <= 63);
    CHECK(strcmp(id, ".") != 0 && strcmp(id, "..") != 0);
    for (size_t i = 0; i < n; i++)
        CHECK(id_char(id[i]));
}

static void check_sample(const struct proc_sample *p, int filled, int was_filled)
{
    static const char *const containers[] = {"docker", "podman", "containerd", "capsule", NULL};
    static const char *const jobs[] = {"slurm", "gpuq", NULL};
    check_label(p->container, sizeof(p->container), containers);
    check_label(p->job, sizeof(p->job), jobs);
    CHECK(filled >= 0 && filled <= 2);
    CHECK(filled == (p->container[0] != '\0') + (p->job[0] != '\0') - was_filled);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);
int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    const char *text = (const char *)data;
    struct proc_sample c = {0}, e = {0};
    int fc = procs_parse_cgroup(text, size, &c);
    check_sample(&c, fc, 0);
    int fe = procs_parse_environ(text, size, &e);
    check_sample(&e, fe, 0);
    /* The fallback order procs_describe uses: fields already known are kept. */
    int was = (c.container[0] != '\0') + (c.job[0] != '\0');
    struct proc_sample before = c;
    int fb = procs_parse_environ(text, size, &c);
    check_sample(&c, fb, was);
    if (before.container[0])
        CHECK(strcmp(before.container, c.container) == 0);
    if (before.job[0])
        CHECK(strcmp(before.job, c.job) == 0);

    /* Sanitising leaves nothing to sanitise and no control character. */
    char *s = strndup(text, size);
    if (!s)
        return 0;
    size_t len = strlen(s);
    procs_sanitize_label(s);
    CHECK(strlen(s) == len);
    CHECK(procs_sanitize_label(s) == 0);
    for (size_t i = 0; i < len; i++)
        CHECK((unsigned char)s[i] >= 0x20 && s[i] != 0x7f);
    free(s);
    return 0;
}
