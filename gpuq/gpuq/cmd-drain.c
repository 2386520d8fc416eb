/* gpuq drain / resume: an administrator empties the node (maintenance, a coming power cut) and
 * opens it again. Preempted jobs are requeued, so resume starts them again where their
 * checkpoints left them. */
#include "gpuq/gpuq/cli.h"
#include "gpuq/gpuq/render.h"

#include <errno.h>
#include <getopt.h>
#include <math.h>

#include "lib/config.h"

/* Extra time given to gpuqd beyond --wait to answer: the reply comes when the wait ends. */
#define DRAIN_REPLY_SLACK_MS 30000L

static int duration_arg(const char *opt, const char *s, double *ret, struct errmsg *e)
{
    double v;
    if (parse_duration(s, &v) < 0 || !isfinite(v) || v < 0 || v > 7 * 86400.0)
        return errmsg_set(e, -GPUQ_E_USAGE,
                          "drain: %s wants a duration up to 7d (90, 30s, 5m, 1h), not '%s'", opt,
                          s);
    *ret = v;
    return 0;
}

static int parse_drain(int argc, char *argv[], json_t *body, struct errmsg *e)
{
    static const struct option options[] = {
        {"grace-max", required_argument, NULL, 'g'},
        {"wait", required_argument, NULL, 'w'},
        {},
    };
    int opt, r;
    double v = 0;
    opterr = 0;
    while ((opt = getopt_long(argc, argv, "+:", options, NULL)) != -1) {
        if (opt != 'g' && opt != 'w')
            return gpuq_option_error("drain", opt, argv, e);
        if ((r = duration_arg(opt == 'g' ? "--grace-max" : "--wait", optarg, &v, e)) < 0)
            return r;
        json_object_set_new(body, opt == 'g' ? "grace_max" : "wait", json_real(v));
    }
    if (optind < argc)
        return errmsg_set(e, -GPUQ_E_USAGE, "drain: unexpected argument '%s'", argv[optind]);
    return 0;
}

static void drain_report(FILE *f, json_t *doc)
{
    json_int_t stopped = json_integer_value(json_object_get(doc, "stopped"));
    json_int_t left = json_integer_value(json_object_get(doc, "running"));
    fprintf(f, "Node drained: %" JSON_INTEGER_FORMAT " job%s preempted and requeued", stopped,
            stopped == 1 ? "" : "s");
    if (left > 0)
        fprintf(f, ", %" JSON_INTEGER_FORMAT " still stopping", left);
    else
        fputs(", none running", f);
    fputs(". Nothing starts until `gpuq resume`.\n", f);
}

int cmd_drain(struct gpuq_cli *c, int argc, char *argv[], struct errmsg *e)
{
    json_t *body = json_object();
    if (!body)
        return errmsg_set(e, -ENOMEM, "out of memory");
    int r = parse_drain(argc, argv, body, e);
    if (r < 0) {
        json_decref(body);
        return r;
    }
    /* With --wait, gpuqd answers when every job has stopped or the wait is over; without, at
     * once. */
    json_t *wait = json_object_get(body, "wait");
    struct gpuq_cli dc = *c;
    if (wait)
        dc.timeout_ms = (long)(json_real_value(wait) * 1000) + DRAIN_REPLY_SLACK_MS;
    json_t *doc = NULL;
    r = gpuq_call(&dc, "POST", "/v1/drain", body, &doc, e);
    json_decref(body);
    if (r < 0)
        return r;
    if (c->json)
        render_json(c->out, doc);
    else
        drain_report(c->out, doc);
    json_decref(doc);
    return GPUQ_EXIT_OK;
}

int cmd_resume(struct gpuq_cli *c, int argc, char *argv[], struct errmsg *e)
{
    int opt;
    opterr = 0;
    while ((opt = getopt(argc, argv, "+:")) != -1)
        return gpuq_option_error("resume", opt, argv, e);
    if (optind < argc)
        return errmsg_set(e, -GPUQ_E_USAGE, "resume: unexpected argument '%s'", argv[optind]);
    json_t *doc = NULL;
    int r = gpuq_call(c, "POST", "/v1/resume", NULL, &doc, e);
    if (r < 0)
        return r;
    if (c->json)
        render_json(c->out, doc);
    else
        fputs("Node resumed: jobs start again.\n", c->out);
    json_decref(doc);
    return GPUQ_EXIT_OK;
}
