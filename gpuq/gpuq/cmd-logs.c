/* gpuq logs [-f] ID: the job's output from its start; with -f, what it writes next until it has
 * ended, as tail -f does. gpuqd hands the log out in pieces (GET /v1/jobs/ID/log?offset=N) with
 * the job's state, so following is polling. */
#include "gpuq/gpuq/cli.h"
#include "gpuq/gpuq/render.h"

#include <errno.h>
#include <getopt.h>
#include <inttypes.h>
#include <string.h>

#define LOGS_POLL_S 0.5

static bool state_is_final(const char *s)
{
    static const char *const active[] = {"PENDING", "RUNNING", "STOPPING"};
    if (!s)
        return false;
    for (size_t i = 0; i < sizeof(active) / sizeof(active[0]); i++)
        if (strcmp(s, active[i]) == 0)
            return false;
    return true;
}

/* Writes one piece; returns whether the end was reached (eof and, when following, the job's
 * end), or -EBADMSG/-EPIPE. */
static int piece(struct gpuq_cli *c, json_t *doc, bool follow, uint64_t *offset, struct errmsg *e)
{
    json_t *data = json_object_get(doc, "data"), *next = json_object_get(doc, "offset");
    if (!json_is_string(data) || !json_is_integer(next) || json_integer_value(next) < 0)
        return errmsg_set(e, -EBADMSG, "gpuqd's log reply has no \"data\" and \"offset\"");
    if (c->json)
        render_json(c->out, doc);
    else {
        size_t n = json_string_length(data);
        if (n && fwrite(json_string_value(data), 1, n, c->out) != n)
            return errmsg_set(e, -EPIPE, "cannot write the log: %s", strerror(errno));
    }
    fflush(c->out);
    bool moved = (uint64_t)json_integer_value(next) != *offset;
    *offset = (uint64_t)json_integer_value(next);
    bool eof = json_is_true(json_object_get(doc, "eof"));
    if (!eof && moved)
        return 0;
    if (!follow)
        return eof;
    return eof && state_is_final(json_string_value(json_object_get(doc, "state")));
}

int cmd_logs(struct gpuq_cli *c, int argc, char *argv[], struct errmsg *e)
{
    static const struct option options[] = {{"follow", no_argument, NULL, 'f'}, {}};
    bool follow = false;
    int opt, r;
    opterr = 0;
    while ((opt = getopt_long(argc, argv, "+:f", options, NULL)) != -1) {
        if (opt != 'f')
            return gpuq_option_error("logs", opt, argv, e);
        follow = true;
    }
    if (argc - optind != 1)
        return errmsg_set(e, -GPUQ_E_USAGE, "logs: wants one job id (gpuq logs [-f] ID)");
    uint64_t id, offset = 0;
    if ((r = gpuq_parse_id("logs", argv[optind], &id, e)) < 0)
        return r;

    for (;;) {
        char path[128];
        snprintf(path, sizeof(path), "/v1/jobs/%" PRIu64 "/log?offset=%" PRIu64, id, offset);
        json_t *doc = NULL;
        if ((r = gpuq_call(c, "GET", path, NULL, &doc, e)) < 0)
            return r;
        uint64_t before = offset;
        r = piece(c, doc, follow, &offset, e);
        json_decref(doc);
        if (r < 0)
            return r;
        if (r > 0)
            return GPUQ_EXIT_OK;
        /* More is there already: ask again at once; else wait for the job to write. */
        if (offset == before)
            gpuq_sleep(LOGS_POLL_S);
    }
}
