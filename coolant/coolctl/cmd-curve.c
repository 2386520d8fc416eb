/* coolctl curve: show the pumps' duty curves, or set one after checking it locally. */
#include "commands.h"

#include <errno.h>
#include <string.h>

/* Adds pump.N.curve and pump.N.min_duty of the raw settings to out, for --json. */
static int copy_pump_keys(json_t *settings, unsigned pump, json_t *out)
{
    static const char *const suffixes[] = {"curve", "min_duty"};
    for (size_t i = 0; i < 2; i++) {
        char key[CTL_KEY_MAX + 1];
        snprintf(key, sizeof(key), "pump.%u.%s", pump, suffixes[i]);
        json_t *v = json_object_get(settings, key);
        if (v && json_object_set(out, key, v) < 0)
            return -ENOMEM;
    }
    return 0;
}

static int curve_show_json(struct coolctl *c, json_t *settings, unsigned first, unsigned last,
                           struct errmsg *e)
{
    json_t *sel = json_object();
    if (!sel)
        return errmsg_set(e, -ENOMEM, "out of memory");
    for (unsigned p = first; p <= last; p++)
        if (copy_pump_keys(settings, p, sel) < 0) {
            json_decref(sel);
            return errmsg_set(e, -ENOMEM, "out of memory");
        }
    int r = coolctl_render_settings_json(c->out, sel);
    json_decref(sel);
    return r < 0 ? errmsg_set(e, r, "out of memory") : COOLCTL_EXIT_OK;
}

static int curve_show(struct coolctl *c, const char *pump_arg, struct errmsg *e)
{
    json_t *settings = NULL;
    struct ctl_settings cur;
    int r = coolctl_fetch_settings(c, &settings, &cur, e);
    if (r < 0)
        return r;
    unsigned first = 1, last = cur.n_pumps;
    if (pump_arg) {
        r = coolctl_pump_parse(pump_arg, &cur, &first, e);
        last = first;
    }
    if (r >= 0 && c->json)
        r = curve_show_json(c, settings, first, last, e);
    else if (r >= 0)
        for (unsigned p = first; p <= last; p++) {
            if (p > first)
                fputc('\n', c->out);
            coolctl_render_curve(c->out, p, &cur.curve[p - 1], cur.min_duty[p - 1]);
        }
    json_decref(settings);
    return r < 0 ? r : COOLCTL_EXIT_OK;
}

/* Prints the curve the controller read back after the write. */
static int curve_print_back(struct coolctl *c, json_t *back, const char *key, unsigned pump,
                            int min_duty, struct errmsg *e)
{
    if (c->json) {
        int r = coolctl_render_settings_json(c->out, back);
        return r < 0 ? errmsg_set(e, r, "out of memory") : COOLCTL_EXIT_OK;
    }
    const char *text = json_string_value(json_object_get(back, key));
    struct ctl_curve stored;
    char why[ERRMSG_MAX];
    if (!text)
        return errmsg_set(e, -EBADMSG, "the write succeeded but coold did not report %s", key);
    if (ctl_curve_parse(text, &stored, why, sizeof(why)) < 0)
        return errmsg_set(e, -EBADMSG, "the controller read back %s = '%s': %s", key, text, why);
    coolctl_render_curve(c->out, pump, &stored, min_duty);
    return COOLCTL_EXIT_OK;
}

static int curve_set(struct coolctl *c, const char *pump_arg, const char *points, struct errmsg *e)
{
    struct ctl_curve curve;
    int r = coolctl_points_parse(points, &curve, e);
    if (r < 0)
        return r;
    struct ctl_settings cur;
    r = coolctl_fetch_settings(c, NULL, &cur, e);
    if (r < 0)
        return r;
    unsigned pump;
    r = coolctl_pump_parse(pump_arg, &cur, &pump, e);
    if (r < 0)
        return r;
    /* Refused here, before anything is sent: a bad curve never reaches the controller. */
    r = coolctl_curve_check(&cur, pump, &curve, e);
    if (r < 0)
        return r;

    struct coolctl_assign a;
    snprintf(a.key, sizeof(a.key), "pump.%u.curve", pump);
    if (ctl_curve_format(&curve, a.value, sizeof(a.value)) < 0)
        return errmsg_set(e, -EINVAL, "pump %u curve: too long", pump);
    json_t *back = NULL;
    r = coolctl_put_settings(c, &a, 1, &back, e);
    if (r < 0)
        return r;
    r = curve_print_back(c, back, a.key, pump, cur.min_duty[pump - 1], e);
    json_decref(back);
    return r;
}

int cmd_curve(struct coolctl *c, int argc, char *argv[], struct errmsg *e)
{
    if (argc <= 1)
        return curve_show(c, NULL, e);
    if (strcmp(argv[1], "show") == 0) {
        if (argc > 3)
            return errmsg_set(e, -EINVAL, "curve show: unexpected argument '%s'", argv[3]);
        return curve_show(c, argc == 3 ? argv[2] : NULL, e);
    }
    if (strcmp(argv[1], "set") == 0) {
        if (argc != 4)
            return errmsg_set(e, -EINVAL,
                              "usage: coolctl curve set PUMP POINTS "
                              "(e.g. coolctl curve set 1 30:40,45:70,55:100)");
        return curve_set(c, argv[2], argv[3], e);
    }
    return errmsg_set(e, -EINVAL, "curve: unknown subcommand '%s' (show, set)", argv[1]);
}
