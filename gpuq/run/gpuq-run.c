/* gpuq-run SPEC.json: the supervisor of one run of a gpuq job (supervise.h; gpuqd's side in
 * run-control.h). gpuqd starts it as root with stdin, stdout and stderr on /dev/null; what it has
 * to say goes into the job's log and exit record. Exit status: 0 the exit record was written,
 * 1 it could not be, 2 the spec could not be read. */
#include <stdio.h>
#include <string.h>

#include "gpuq/run/run-spec.h"
#include "gpuq/run/supervise.h"
#include "lib/log.h"

int main(int argc, char **argv)
{
    log_setup("gpuq-run", LOG_LEVEL_INFO);
    if (argc != 2 || argv[1][0] == '-') {
        log_error("usage: gpuq-run SPEC.json (started by gpuqd)");
        return 2;
    }
    struct errmsg e = {{0}};
    if (supervise_detach(&e) < 0) {
        log_error("%s", e.text);
        return 2;
    }
    struct run_spec s = {0};
    if (run_spec_read(argv[1], &s, &e) < 0) {
        log_error("%s", e.text);
        return 2;
    }
    int r = supervise_run(&s, &e);
    if (r < 0)
        log_error("job %llu run %u: %s", (unsigned long long)s.job_id, s.run, e.text);
    run_spec_done(&s);
    return r < 0 ? 1 : 0;
}
