/* coolctl status: the node's cooling at a glance. */
#include "commands.h"

#include <errno.h>

int cmd_status(struct coolctl *c, int argc, char *argv[], struct errmsg *e)
{
    if (argc > 1)
        return errmsg_set(e, -EINVAL, "status: unexpected argument '%s'", argv[1]);
    json_t *doc = NULL;
    int r = coolctl_call(c, "GET", "/v1/status", NULL, &doc, e);
    if (r < 0)
        return r;
    /* The exit code is the same with --json, so scripts can use either form. */
    if (c->json) {
        coolctl_render_json(c->out, doc);
        r = coolctl_status_exit(doc);
    } else
        r = coolctl_render_status(c->out, doc, c->color);
    json_decref(doc);
    return r;
}
