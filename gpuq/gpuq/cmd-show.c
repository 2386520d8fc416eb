/* gpuq show ID: one job in detail, with its events. */
#include "gpuq/gpuq/cli.h"
#include "gpuq/gpuq/render.h"

#include <errno.h>
#include <getopt.h>
#include <inttypes.h>

#include "lib/clock.h"

int cmd_show(struct gpuq_cli *c, int argc, char *argv[], struct errmsg *e)
{
    int opt;
    opterr = 0;
    while ((opt = getopt(argc, argv, "+:")) != -1)
        return gpuq_option_error("show", opt, argv, e);
    if (argc - optind != 1)
        return errmsg_set(e, -GPUQ_E_USAGE, "show: wants one job id (gpuq show ID)");
    uint64_t id;
    int r = gpuq_parse_id("show", argv[optind], &id, e);
    if (r < 0)
        return r;

    char path[64];
    snprintf(path, sizeof(path), "/v1/jobs/%" PRIu64, id);
    json_t *doc = NULL;
    r = gpuq_call(c, "GET", path, NULL, &doc, e);
    if (r < 0)
        return r;
    if (c->json)
        render_json(c->out, doc);
    else
        render_job(c->out, doc, clock_wall_sec());
    json_decref(doc);
    return GPUQ_EXIT_OK;
}
