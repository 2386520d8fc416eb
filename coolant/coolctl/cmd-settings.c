/* coolctl get / set: the controller's settings as key = value. */
#include "commands.h"

#include <errno.h>
#include <string.h>

#define SET_MAX 16

/* Keys go into a URL path; anything outside the protocol's key alphabet cannot be a setting. */
static bool key_valid(const char *key)
{
    size_t n = strlen(key);
    if (n == 0 || n > CTL_KEY_MAX)
        return false;
    return strspn(key, "abcdefghijklmnopqrstuvwxyz0123456789_.") == n;
}

/* Prints a settings object as the API document (--json) or as key = value lines. */
static int print_settings(struct coolctl *c, json_t *settings, struct errmsg *e)
{
    if (c->json) {
        if (coolctl_render_settings_json(c->out, settings) < 0)
            return errmsg_set(e, -ENOMEM, "out of memory");
    } else
        coolctl_render_settings(c->out, settings);
    return COOLCTL_EXIT_OK;
}

static int get_some(struct coolctl *c, int argc, char *argv[], json_t *merged, struct errmsg *e)
{
    for (int i = 1; i < argc; i++) {
        if (!key_valid(argv[i]))
            return errmsg_set(e, -EINVAL, "no such setting '%s'", argv[i]);
        char path[64];
        snprintf(path, sizeof(path), "/v1/settings/%s", argv[i]);
        json_t *doc = NULL;
        int r = coolctl_call(c, "GET", path, NULL, &doc, e);
        if (r < 0)
            return r;
        json_t *s = json_object_get(doc, "settings");
        r = json_is_object(s) ? json_object_update(merged, s) : -1;
        json_decref(doc);
        if (r < 0)
            return errmsg_set(e, -EBADMSG, "coold's reply for '%s' has no settings", argv[i]);
    }
    return 0;
}

int cmd_get(struct coolctl *c, int argc, char *argv[], struct errmsg *e)
{
    json_t *settings = NULL;
    int r;
    if (argc <= 1) {
        r = coolctl_fetch_settings(c, &settings, NULL, e);
        if (r < 0)
            return r;
    } else {
        settings = json_object();
        if (!settings)
            return errmsg_set(e, -ENOMEM, "out of memory");
        r = get_some(c, argc, argv, settings, e);
        if (r < 0) {
            json_decref(settings);
            return r;
        }
    }
    r = print_settings(c, settings, e);
    json_decref(settings);
    return r;
}

int cmd_set(struct coolctl *c, int argc, char *argv[], struct errmsg *e)
{
    struct coolctl_assign a[SET_MAX];
    unsigned n = 0;
    if (argc <= 1)
        return errmsg_set(e, -EINVAL, "set: nothing to set (usage: coolctl set KEY=VALUE...)");
    if (argc - 1 > SET_MAX)
        return errmsg_set(e, -EINVAL, "set: at most %d settings at once", SET_MAX);
    for (int i = 1; i < argc; i++) {
        int r = coolctl_assign_parse(argv[i], &a[n++], e);
        if (r < 0)
            return r;
    }

    struct ctl_settings cur;
    int r = coolctl_fetch_settings(c, NULL, &cur, e);
    if (r < 0)
        return r;
    r = coolctl_assign_check(&cur, a, n, e);
    if (r < 0)
        return r;

    json_t *back = NULL;
    r = coolctl_put_settings(c, a, n, &back, e);
    if (r < 0)
        return r;
    r = print_settings(c, back, e);
    json_decref(back);
    return r;
}
