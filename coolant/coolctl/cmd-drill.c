/* coolctl drill: runs coold's whole staged shutdown as a drill and reports each stage. */
#include "commands.h"

#include <errno.h>

int cmd_drill(struct coolctl *c, int argc, char *argv[], struct errmsg *e)
{
    if (argc > 1)
        return errmsg_set(e, -EINVAL, "drill: unexpected argument '%s'", argv[1]);
    /* coold answers only when every stage is done, which may take up to two minutes. */
    struct coolctl drill = *c;
    if (!c->timeout_set)
        drill.timeout_ms = COOLCTL_DRILL_TIMEOUT_MS;

    json_t *doc = NULL;
    int r = coolctl_call(&drill, "POST", "/v1/drill", NULL, &doc, e);
    if (r < 0)
        return r;
    int failed;
    if (c->json) {
        coolctl_render_json(c->out, doc);
        failed = coolctl_render_drill(NULL, doc, false);
    } else
        failed = coolctl_render_drill(c->out, doc, c->color);
    json_decref(doc);
    if (failed < 0)
        return errmsg_set(e, failed, "coold's drill reply has no \"stages\" list");
    if (failed > 0)
        return errmsg_set(e, -COOLCTL_E_API, "drill: %d stage%s FAILED", failed,
                          failed == 1 ? "" : "s");
    return COOLCTL_EXIT_OK;
}
