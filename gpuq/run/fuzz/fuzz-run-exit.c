/* libFuzzer target: exit records (run-exit.h), which gpuqd reads back after a restart. No crash
 * on anything; what parses gives derived fields that agree with its status, and survives a round
 * trip. */
#include <errno.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>

#include "gpuq/run/run-exit.h"
#include "lib/fuzz-check.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);
int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    struct run_exit x = {0}, back = {0};
    struct errmsg e = {{0}};
    int r = run_exit_from_json((const char *)data, size, &x, &e);
    CHECK(r == 0 || r == -EINVAL || r == -ENOMEM);
    if (r < 0)
        return 0;
    CHECK(x.note);
    CHECK(x.exited == WIFEXITED(x.status));
    CHECK(!x.exited || x.code == WEXITSTATUS(x.status));
    char *text = NULL;
    if (run_exit_to_json(&x, &text) == 0) {
        /* NaN and infinities do not come out of JSON text, so the numbers come back. */
        CHECK(run_exit_from_json(text, strlen(text), &back, &e) == 0);
        CHECK(back.status == x.status && back.started == x.started);
        CHECK(back.oom_kills == x.oom_kills && strcmp(back.note, x.note) == 0);
        run_exit_done(&back);
        free(text);
    }
    run_exit_done(&x);
    return 0;
}
