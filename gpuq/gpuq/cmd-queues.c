/* gpuq queues: the queues, their quotas in effect now and what uses them. */
#include "gpuq/gpuq/cli.h"
#include "gpuq/gpuq/render.h"

#include <errno.h>
#include <getopt.h>

int cmd_queues(struct gpuq_cli *c, int argc, char *argv[], struct errmsg *e)
{
    int opt;
    opterr = 0;
    while ((opt = getopt(argc, argv, "+:")) != -1)
        return gpuq_option_error("queues", opt, argv, e);
    if (optind < argc)
        return errmsg_set(e, -GPUQ_E_USAGE, "queues: unexpected argument '%s'", argv[optind]);
    json_t *doc = NULL;
    int r = gpuq_call(c, "GET", "/v1/queues", NULL, &doc, e);
    if (r < 0)
        return r;
    if (c->json)
        render_json(c->out, doc);
    else
        render_queues(c->out, doc);
    json_decref(doc);
    return GPUQ_EXIT_OK;
}
