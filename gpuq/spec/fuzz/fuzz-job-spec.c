/* libFuzzer target: the API's job request, JSON text as gpuqd receives it, to a job_spec. A
 * request taken must come back identical through job_spec_to_json(), as the store and `gpuq
 * show` rely on; a refused one must say why. */
#include <errno.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "gpuq/spec/job-spec.h"
#include "lib/fuzz-check.h"
#include "lib/strv.h"

static bool same_str(const char *a, const char *b)
{
    return (!a && !b) || (a && b && strcmp(a, b) == 0);
}

static bool same_strv(char **a, char **b)
{
    if (!a || !b)
        return !a && !b;
    size_t n = strv_length(a);
    if (n != strv_length(b))
        return false;
    for (size_t i = 0; i < n; i++)
        if (strcmp(a[i], b[i]) != 0)
            return false;
    return true;
}

static void check_spec(const struct job_spec *s)
{
    CHECK(s->name && strlen(s->name) < JOB_NAME_MAX);
    CHECK(s->env);
    CHECK(s->argv || s->image);
    CHECK(!s->argv || (s->argv[0] && s->argv[0][0]));
    CHECK(strv_length(s->argv) <= SPEC_ARGV_MAX && strv_length(s->env) <= SPEC_ENV_MAX);
    CHECK(!s->cwd || s->cwd[0] == '/');
    CHECK(s->backoff_limit <= SPEC_BACKOFF_LIMIT_MAX);
    CHECK(s->grace_s >= 0 && s->time_limit_s >= 0 && s->active_deadline_s >= 0);
    CHECK(s->checkpoint_signal != 9 && s->checkpoint_signal != 19);
    CHECK((s->res.gpu_kind == JOB_GPU_NONE) == (s->res.gpus == 0));
    CHECK(s->res.gpu_kind == JOB_GPU_MIG ? s->res.profile[0] != '\0' : s->res.profile[0] == '\0');
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);
int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    json_auto_t *j = json_loadb((const char *)data, size, JSON_REJECT_DUPLICATES, NULL);
    if (!j)
        return 0;
    struct job_spec a = {0}, b = {0};
    struct errmsg e = {""};
    bool held = false;
    int r = job_spec_from_json(j, &a, &held, &e);
    CHECK(r == 0 || r == -EINVAL || r == -E2BIG || r == -ENOMEM);
    if (r < 0) {
        CHECK(r == -ENOMEM || e.text[0]);
        CHECK(!a.name && !a.argv);
        return 0;
    }
    check_spec(&a);
    json_auto_t *j1 = job_spec_to_json(&a);
    CHECK(j1);
    _cleanup_free_ char *text = json_dumps(j1, JSON_COMPACT);
    CHECK(text);
    json_auto_t *j1b = json_loads(text, 0, NULL);
    CHECK(j1b);
    r = job_spec_from_json(j1b, &b, NULL, &e);
    if (r != 0)
        fprintf(stderr, "%s: %s\n", text, e.text);
    CHECK(r == 0);
    CHECK(same_str(a.name, b.name) && same_str(a.queue, b.queue) &&
          same_str(a.priority_class, b.priority_class) && same_str(a.image, b.image) &&
          same_str(a.cwd, b.cwd));
    CHECK(memcmp(&a.res, &b.res, sizeof(a.res)) == 0);
    CHECK(a.time_limit_s == b.time_limit_s && a.active_deadline_s == b.active_deadline_s &&
          a.grace_s == b.grace_s);
    CHECK(same_strv(a.argv, b.argv) && same_strv(a.env, b.env));
    CHECK(a.interactive == b.interactive && a.backoff_limit == b.backoff_limit &&
          a.checkpoint_signal == b.checkpoint_signal && a.restart == b.restart);
    json_auto_t *j2 = job_spec_to_json(&b);
    CHECK(j2 && json_equal(j1, j2));
    job_spec_done(&a);
    job_spec_done(&b);
    return 0;
}
