/* coolctl limits: show the protection limits, or set some of them in one atomic write. */
#include "commands.h"

#include <errno.h>
#include <string.h>

#define LIMITS_MAX 6

static int limits_print(struct coolctl *c, json_t *settings, struct errmsg *e)
{
    if (c->json) {
        json_t *sel = json_object();
        const char *key;
        json_t *v;
        if (!sel)
            return errmsg_set(e, -ENOMEM, "out of memory");
        json_object_foreach(settings, key, v)
        {
            if (strncmp(key, "limit.", 6) == 0)
                json_object_set(sel, key, v);
        }
        int r = coolctl_render_settings_json(c->out, sel);
        json_decref(sel);
        return r < 0 ? errmsg_set(e, r, "out of memory") : COOLCTL_EXIT_OK;
    }
    struct ctl_settings s;
    int r = coolctl_settings_decode(settings, &s, e);
    if (r < 0)
        return r;
    coolctl_render_limits(c->out, &s.limits);
    return COOLCTL_EXIT_OK;
}

static int limits_show(struct coolctl *c, struct errmsg *e)
{
    json_t *settings = NULL;
    int r = coolctl_fetch_settings(c, &settings, NULL, e);
    if (r < 0)
        return r;
    r = limits_print(c, settings, e);
    json_decref(settings);
    return r;
}

static int limits_set(struct coolctl *c, int argc, char *argv[], struct errmsg *e)
{
    struct coolctl_assign a[LIMITS_MAX];
    int n = coolctl_limits_parse(argc, argv, a, LIMITS_MAX, e);
    if (n < 0)
        return n;
    json_t *settings = NULL;
    struct ctl_settings cur;
    int r = coolctl_fetch_settings(c, &settings, &cur, e);
    if (r < 0)
        return r;
    /* Checked against the current values: the order of the limits and every curve reaching
     * 100 % by the (new) critical temperature. */
    r = coolctl_assign_check(&cur, a, (unsigned)n, e);
    json_t *back = NULL;
    if (r >= 0)
        r = coolctl_put_settings(c, a, (unsigned)n, &back, e);
    if (r >= 0) {
        /* Show all the limits: the read-back values over the ones fetched before the write. */
        json_object_update(settings, back);
        r = limits_print(c, c->json ? back : settings, e);
    }
    json_decref(back);
    json_decref(settings);
    return r;
}

int cmd_limits(struct coolctl *c, int argc, char *argv[], struct errmsg *e)
{
    if (argc <= 1 || strcmp(argv[1], "show") == 0) {
        if (argc > 2)
            return errmsg_set(e, -EINVAL, "limits show: unexpected argument '%s'", argv[2]);
        return limits_show(c, e);
    }
    if (strcmp(argv[1], "set") == 0)
        return limits_set(c, argc - 2, argv + 2, e);
    return errmsg_set(e, -EINVAL, "limits: unknown subcommand '%s' (show, set)", argv[1]);
}
