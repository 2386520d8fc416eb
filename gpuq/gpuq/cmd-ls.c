/* gpuq ls: the jobs, as squeue lists them. */
#include "gpuq/gpuq/cli.h"
#include "gpuq/gpuq/render.h"

#include <ctype.h>
#include <errno.h>
#include <getopt.h>
#include <string.h>

#include "lib/clock.h"

/* Appends "&key=value" (the first one with '?'), value percent-encoded. */
static int query_add(char *path, size_t size, const char *key, const char *value, struct errmsg *e)
{
    size_t n = strlen(path);
    if (snprintf(path + n, size - n, "%s%s=", strchr(path, '?') ? "&" : "?", key) >=
            (int)(size - n) ||
        gpuq_query_append(path, size, value) < 0)
        return errmsg_set(e, -GPUQ_E_USAGE, "ls: the value of %s is too long", key);
    return 0;
}

/* -t pending,running: gpuqd's states are upper case, as squeue's -t takes them either way. */
static int states_add(char *path, size_t size, const char *list, struct errmsg *e)
{
    char up[256];
    size_t n = strlen(list);
    if (n == 0 || n >= sizeof(up))
        return errmsg_set(e, -GPUQ_E_USAGE, "ls: -t wants a list of states, e.g. pending,running");
    for (size_t i = 0; i <= n; i++)
        up[i] = (char)toupper((unsigned char)list[i]);
    return query_add(path, size, "state", up, e);
}

int cmd_ls(struct gpuq_cli *c, int argc, char *argv[], struct errmsg *e)
{
    static const struct option options[] = {
        {"all", no_argument, NULL, 'a'},          {"user", required_argument, NULL, 'u'},
        {"queue", required_argument, NULL, 'q'},  {"state", required_argument, NULL, 't'},
        {"states", required_argument, NULL, 't'}, {},
    };
    char path[1024] = "/v1/jobs";
    int opt, r = 0;
    opterr = 0;
    while ((opt = getopt_long(argc, argv, "+:au:q:t:", options, NULL)) != -1) {
        if (opt == 'a')
            r = query_add(path, sizeof(path), "all", "1", e);
        else if (opt == 'u')
            r = query_add(path, sizeof(path), "user", optarg, e);
        else if (opt == 'q')
            r = query_add(path, sizeof(path), "queue", optarg, e);
        else if (opt == 't')
            r = states_add(path, sizeof(path), optarg, e);
        else
            return gpuq_option_error("ls", opt, argv, e);
        if (r < 0)
            return r;
    }
    if (optind < argc)
        return errmsg_set(e, -GPUQ_E_USAGE, "ls: unexpected argument '%s'", argv[optind]);

    json_t *doc = NULL;
    r = gpuq_call(c, "GET", path, NULL, &doc, e);
    if (r < 0)
        return r;
    if (c->json)
        render_json(c->out, doc);
    else
        render_jobs(c->out, doc, clock_wall_sec());
    json_decref(doc);
    return GPUQ_EXIT_OK;
}
