/* libFuzzer target: a Kubernetes Job in YAML (what `gpuq submit -f` reads) to the API's request.
 * Whatever it returns, the API must take; a refusal must say why. */
#include <errno.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>

#include "gpuq/spec/job-spec.h"
#include "gpuq/spec/spec-yaml.h"
#include "lib/fuzz-check.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);
int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    json_t *req = NULL;
    struct errmsg e = {""};
    int r = spec_yaml_parse((const char *)data, size, &req, &e);
    CHECK(r == 0 || r == -EINVAL || r == -E2BIG || r == -ENOMEM);
    if (r < 0) {
        CHECK(!req);
        CHECK(r == -ENOMEM || e.text[0]);
        return 0;
    }
    CHECK(json_is_object(req));
    struct job_spec s;
    r = job_spec_from_json(req, &s, NULL, &e);
    if (r != 0)
        fprintf(stderr, "refused by the API: %s\n", e.text);
    CHECK(r == 0);
    CHECK(s.image && s.name);
    job_spec_done(&s);
    json_decref(req);
    return 0;
}
