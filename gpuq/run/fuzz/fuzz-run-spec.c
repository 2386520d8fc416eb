/* libFuzzer target: run spec JSON (run-spec.h). The file is root's, but the parser must not
 * crash on anything; what it accepts must survive a round trip through run_spec_to_json
 * unchanged, and must satisfy what gpuq-run relies on without checking again. */
#include <errno.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "gpuq/run/run-spec.h"
#include "lib/fuzz-check.h"
#include "lib/strv.h"

static void check_invariants(const struct run_spec *s)
{
    CHECK(s->user && *s->user && s->home && s->home[0] == '/');
    CHECK(s->log_path && s->log_path[0] == '/' && s->exit_path[0] == '/' && s->pid_path[0] == '/');
    CHECK(s->argv && s->env);
    CHECK(s->image || s->argv[0]);
    CHECK(!s->image || (s->capsule && s->image[0] != '-'));
    CHECK(!s->cwd || s->cwd[0] == '/');
    CHECK(s->uid != (uid_t)-1 && s->gid != (gid_t)-1);
    for (size_t i = 0; s->env[i]; i++)
        CHECK(strchr(s->env[i], '=') > s->env[i]);
}

static void check_same(const struct run_spec *a, const struct run_spec *b)
{
    CHECK(a->job_id == b->job_id && a->run == b->run && a->uid == b->uid && a->gid == b->gid);
    CHECK(a->cpu_milli == b->cpu_milli && a->mem_bytes == b->mem_bytes);
    CHECK(strcmp(a->user, b->user) == 0 && strcmp(a->log_path, b->log_path) == 0);
    CHECK(!a->cwd == !b->cwd && (!a->cwd || strcmp(a->cwd, b->cwd) == 0));
    CHECK(!a->image == !b->image && (!a->image || strcmp(a->image, b->image) == 0));
    CHECK(strv_length(a->argv) == strv_length(b->argv));
    for (size_t i = 0; a->argv[i]; i++)
        CHECK(strcmp(a->argv[i], b->argv[i]) == 0);
    CHECK(strv_length(a->env) == strv_length(b->env));
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);
int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    struct run_spec s = {0}, back = {0};
    struct errmsg e = {{0}};
    int r = run_spec_from_json((const char *)data, size, &s, &e);
    CHECK(r == 0 || r == -EINVAL || r == -ENOMEM);
    if (r < 0) {
        CHECK(r == -ENOMEM || e.text[0]);
        CHECK(s.user == NULL);
        return 0;
    }
    check_invariants(&s);
    char *text = NULL;
    r = run_spec_to_json(&s, &text, &e);
    CHECK(r == 0 || r == -ENOMEM);
    if (r == 0) {
        CHECK(run_spec_from_json(text, strlen(text), &back, &e) == 0);
        check_same(&s, &back);
        run_spec_done(&back);
        free(text);
    }
    run_spec_done(&s);
    return 0;
}
