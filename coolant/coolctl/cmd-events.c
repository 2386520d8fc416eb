/* coolctl events: the daemon's event list, oldest first. */
#include "commands.h"

#include <errno.h>
#include <getopt.h>
#include <stdlib.h>

static int parse_limit(const char *s, unsigned long *ret, struct errmsg *e)
{
    char *end;
    errno = 0;
    unsigned long v = strtoul(s, &end, 10);
    if (errno || end == s || *end || s[0] == '-' || v == 0 || v > 100000)
        return errmsg_set(e, -EINVAL, "events: --limit wants a number from 1 to 100000, not '%s'",
                          s);
    *ret = v;
    return 0;
}

int cmd_events(struct coolctl *c, int argc, char *argv[], struct errmsg *e)
{
    static const struct option options[] = {
        {"limit", required_argument, NULL, 'n'},
        {},
    };
    unsigned long limit = 0;
    int opt, r;
    optind = 0;
    opterr = 0;
    while ((opt = getopt_long(argc, argv, "+:n:", options, NULL)) != -1) {
        if (opt == ':')
            return errmsg_set(e, -EINVAL, "events: option '%s' needs a value", argv[optind - 1]);
        if (opt != 'n')
            return errmsg_set(e, -EINVAL, "events: unknown option '%s'", argv[optind - 1]);
        r = parse_limit(optarg, &limit, e);
        if (r < 0)
            return r;
    }
    if (optind < argc)
        return errmsg_set(e, -EINVAL, "events: unexpected argument '%s'", argv[optind]);

    char path[64] = "/v1/events";
    if (limit > 0)
        snprintf(path, sizeof(path), "/v1/events?limit=%lu", limit);
    json_t *doc = NULL;
    r = coolctl_call(c, "GET", path, NULL, &doc, e);
    if (r < 0)
        return r;
    if (c->json)
        coolctl_render_json(c->out, doc);
    else
        coolctl_render_events(c->out, doc);
    json_decref(doc);
    return COOLCTL_EXIT_OK;
}
