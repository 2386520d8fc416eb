/* gpuq cancel / hold / release ID...: one request per job, one line per job, as scancel and
 * scontrol hold do; the ids are all checked before anything is sent. */
#include "gpuq/gpuq/cli.h"
#include "gpuq/gpuq/render.h"

#include <errno.h>
#include <getopt.h>
#include <inttypes.h>
#include <stdlib.h>
#include <string.h>

#include "lib/macro.h"

/* What was done, as a line for the user: a running job cancelled is stopping, not gone yet. */
static void report(FILE *f, const char *verb, uint64_t id, json_t *doc)
{
    json_t *job = json_object_get(doc, "job");
    const char *state = json_string_value(json_object_get(job, "state"));
    if (strcmp(verb, "cancel") == 0 && state && strcmp(state, "STOPPING") == 0) {
        char grace[32];
        json_t *g = json_object_get(job, "grace");
        if (json_is_number(g) && json_number_value(g) <= 0)
            fprintf(f, "Cancelling job %" PRIu64 ": SIGKILL sent\n", id);
        else
            fprintf(f, "Cancelling job %" PRIu64 ": SIGTERM sent, SIGKILL after %s\n", id,
                    json_is_number(g) ? render_duration(json_number_value(g), grace, sizeof(grace))
                                      : "its grace period");
        return;
    }
    const char *done = strcmp(verb, "cancel") == 0 ? "Cancelled"
                       : strcmp(verb, "hold") == 0 ? "Held"
                                                   : "Released";
    fprintf(f, "%s job %" PRIu64 "\n", done, id);
}

static int act(struct gpuq_cli *c, const char *verb, int argc, char *argv[], struct errmsg *e)
{
    int opt;
    opterr = 0;
    while ((opt = getopt(argc, argv, "+:")) != -1)
        return gpuq_option_error(verb, opt, argv, e);
    if (optind >= argc)
        return errmsg_set(e, -GPUQ_E_USAGE, "%s: wants one or more job ids", verb);
    int n = argc - optind;
    _cleanup_free_ uint64_t *ids = calloc((size_t)n, sizeof(*ids));
    if (!ids)
        return errmsg_set(e, -ENOMEM, "out of memory");
    for (int i = 0; i < n; i++) {
        int r = gpuq_parse_id(verb, argv[optind + i], &ids[i], e);
        if (r < 0)
            return r;
    }

    int failed = 0;
    for (int i = 0; i < n; i++) {
        char path[96];
        snprintf(path, sizeof(path), "/v1/jobs/%" PRIu64 "/%s", ids[i], verb);
        json_t *doc = NULL;
        struct errmsg je = {""};
        int r = gpuq_call(c, "POST", path, NULL, &doc, &je);
        if (r == -GPUQ_E_UNREACHABLE)
            return errmsg_set(e, r, "%s", je.text); /* the same for every id: said once */
        if (r < 0) {
            fprintf(c->err, "gpuq: job %" PRIu64 ": %s\n", ids[i], je.text);
            failed++;
            continue;
        }
        if (c->json)
            render_json(c->out, doc);
        else
            report(c->out, verb, ids[i], doc);
        json_decref(doc);
    }
    return failed ? GPUQ_EXIT_FAILURE : GPUQ_EXIT_OK;
}

int cmd_cancel(struct gpuq_cli *c, int argc, char *argv[], struct errmsg *e)
{
    return act(c, "cancel", argc, argv, e);
}

int cmd_hold(struct gpuq_cli *c, int argc, char *argv[], struct errmsg *e)
{
    return act(c, "hold", argc, argv, e);
}

int cmd_release(struct gpuq_cli *c, int argc, char *argv[], struct errmsg *e)
{
    return act(c, "release", argc, argv, e);
}
