/* Command-line arguments for settings, curves and limits, and their local validation against the
 * current settings. No I/O here, so that every rule can be unit-tested without a daemon. */
#include "coolctl.h"

#include <errno.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

#include "lib/macro.h"

#define SETTINGS_KEYS_MAX 32
#define POINTS_TEXT_MAX   256

struct key_list {
    unsigned n;
    char key[SETTINGS_KEYS_MAX][CTL_KEY_MAX + 1];
};

static void key_list_add(const char *key, void *userdata)
{
    struct key_list *l = userdata;
    if (l->n < SETTINGS_KEYS_MAX)
        snprintf(l->key[l->n++], sizeof(l->key[0]), "%s", key);
}

static bool key_list_has(const struct key_list *l, const char *key)
{
    for (unsigned i = 0; i < l->n; i++)
        if (strcmp(l->key[i], key) == 0)
            return true;
    return false;
}

/* The number of pumps is not a setting; it shows as the highest N among the pump.N.curve keys. */
static unsigned settings_count_pumps(json_t *settings)
{
    unsigned n = 0;
    const char *key;
    json_t *value;
    json_object_foreach(settings, key, value)
    {
        unsigned pump;
        int len = 0;
        if (sscanf(key, "pump.%u.curve%n", &pump, &len) == 1 && key[len] == '\0' && pump >= 1 &&
            pump <= CTL_PUMPS_MAX && pump > n)
            n = pump;
    }
    return n;
}

int coolctl_settings_decode(json_t *settings, struct ctl_settings *ret, struct errmsg *e)
{
    if (!json_is_object(settings))
        return errmsg_set(e, -EINVAL, "coold's settings are not a JSON object");
    unsigned n_pumps = settings_count_pumps(settings);
    if (n_pumps == 0)
        return errmsg_set(e, -EINVAL, "coold's settings name no pump curve");

    struct ctl_settings s;
    ctl_settings_defaults(&s, n_pumps);
    struct key_list known = {0};
    ctl_settings_keys(&s, key_list_add, &known);

    struct ctl_field fields[SETTINGS_KEYS_MAX];
    unsigned n = 0;
    const char *key;
    json_t *value;
    json_object_foreach(settings, key, value)
    {
        if (!key_list_has(&known, key) || n >= ELEMENTSOF(fields))
            continue;
        if (!json_is_string(value))
            return errmsg_set(e, -EINVAL, "coold's setting '%s' is not a string", key);
        fields[n++] = (struct ctl_field){.key = key, .value = json_string_value(value)};
    }

    char why[ERRMSG_MAX];
    int r = ctl_settings_apply(&s, fields, n, why, sizeof(why));
    if (r < 0)
        return errmsg_set(e, -EBADMSG,
                          "the controller's current settings do not pass the checks: %s", why);
    *ret = s;
    return 0;
}

int coolctl_assign_parse(const char *arg, struct coolctl_assign *ret, struct errmsg *e)
{
    const char *eq = strchr(arg, '=');
    if (!eq || eq == arg)
        return errmsg_set(e, -EINVAL, "'%s': expected KEY=VALUE", arg);
    size_t klen = (size_t)(eq - arg);
    if (klen > CTL_KEY_MAX)
        return errmsg_set(e, -EINVAL, "'%.*s': no such setting", (int)klen, arg);
    if (eq[1] == '\0')
        return errmsg_set(e, -EINVAL, "'%s': empty value", arg);

    struct coolctl_assign a;
    memcpy(a.key, arg, klen);
    a.key[klen] = '\0';
    if (snprintf(a.value, sizeof(a.value), "%s", eq + 1) >= (int)sizeof(a.value))
        return errmsg_set(e, -EINVAL, "'%s': value too long", a.key);
    *ret = a;
    return 0;
}

int coolctl_assign_check(const struct ctl_settings *current, const struct coolctl_assign *a,
                         unsigned n, struct errmsg *e)
{
    struct ctl_field fields[SETTINGS_KEYS_MAX];
    if (n == 0)
        return errmsg_set(e, -COOLCTL_E_REFUSED, "nothing to set");
    if (n > ELEMENTSOF(fields))
        return errmsg_set(e, -COOLCTL_E_REFUSED, "too many settings in one write");
    for (unsigned i = 0; i < n; i++) {
        for (unsigned j = 0; j < i; j++)
            if (strcmp(a[i].key, a[j].key) == 0)
                return errmsg_set(e, -COOLCTL_E_REFUSED, "setting '%s' given twice", a[i].key);
        fields[i] = (struct ctl_field){.key = a[i].key, .value = a[i].value};
    }

    /* ctl_settings_apply() validates the whole resulting configuration, all or none, on a copy:
     * the same rules the controller applies, so a refusal here means the write would fail. */
    struct ctl_settings copy = *current;
    char why[ERRMSG_MAX];
    int r = ctl_settings_apply(&copy, fields, n, why, sizeof(why));
    if (r < 0)
        return errmsg_set(e, -COOLCTL_E_REFUSED, "%s", why);
    return 0;
}

json_t *coolctl_assign_to_json(const struct coolctl_assign *a, unsigned n)
{
    json_t *o = json_object();
    if (!o)
        return NULL;
    for (unsigned i = 0; i < n; i++)
        if (json_object_set_new(o, a[i].key, json_string(a[i].value)) < 0) {
            json_decref(o);
            return NULL;
        }
    return o;
}

static void rtrim(char *s)
{
    size_t n = strlen(s);
    while (n > 0 && (s[n - 1] == ' ' || s[n - 1] == '\t'))
        s[--n] = '\0';
}

static char *trim(char *s)
{
    while (*s == ' ' || *s == '\t')
        s++;
    rtrim(s);
    return s;
}

/* Removes the first matching unit (case-insensitive) from the end of s, then trailing blanks. */
static void strip_unit(char *s, const char *const *units)
{
    size_t n = strlen(s);
    for (const char *const *u = units; *u; u++) {
        size_t ul = strlen(*u);
        if (n > ul && strcasecmp(s + n - ul, *u) == 0) {
            s[n - ul] = '\0';
            break;
        }
    }
    rtrim(s);
}

static const char *const units_celsius[] = {"\xc2\xb0"
                                            "C",
                                            "\xc2\xb0", "C", NULL};
static const char *const units_percent[] = {"%", NULL};
static const char *const units_flow[] = {"L/min", "lpm", NULL};
static const char *const units_seconds[] = {"s", NULL};

/* Normalises one "T:D" point with optional units into `out` (appended). */
static int point_normalise(char *item, unsigned index, char *out, size_t size, struct errmsg *e)
{
    char *colon = strchr(item, ':');
    if (!colon)
        return errmsg_set(e, -EINVAL, "curve point %u: '%s' is not TEMPERATURE:DUTY", index,
                          trim(item));
    *colon = '\0';
    char *temp = trim(item), *duty = trim(colon + 1);
    strip_unit(temp, units_celsius);
    strip_unit(duty, units_percent);
    if (*temp == '\0' || *duty == '\0')
        return errmsg_set(e, -EINVAL, "curve point %u: temperature or duty missing", index);
    size_t used = strlen(out);
    int n = snprintf(out + used, size - used, "%s%s:%s", used ? "," : "", temp, duty);
    if (n < 0 || (size_t)n >= size - used)
        return errmsg_set(e, -EINVAL, "curve: too long");
    return 0;
}

int coolctl_points_parse(const char *s, struct ctl_curve *ret, struct errmsg *e)
{
    char copy[POINTS_TEXT_MAX], norm[POINTS_TEXT_MAX] = "";
    if (snprintf(copy, sizeof(copy), "%s", s) >= (int)sizeof(copy))
        return errmsg_set(e, -EINVAL, "curve: too long");

    unsigned index = 0;
    char *save = NULL;
    for (char *item = strtok_r(copy, ",", &save); item; item = strtok_r(NULL, ",", &save)) {
        int r = point_normalise(item, ++index, norm, sizeof(norm), e);
        if (r < 0)
            return r;
    }
    if (index == 0)
        return errmsg_set(e, -EINVAL, "curve: no points (expected e.g. 30:40,45:70,55:100)");

    char why[ERRMSG_MAX];
    struct ctl_curve c;
    if (ctl_curve_parse(norm, &c, why, sizeof(why)) < 0)
        return errmsg_set(e, -EINVAL, "curve '%s': %s", s, why);
    *ret = c;
    return 0;
}

int coolctl_pump_parse(const char *s, const struct ctl_settings *cur, unsigned *ret,
                       struct errmsg *e)
{
    char *end;
    errno = 0;
    unsigned long v = strtoul(s, &end, 10);
    if (errno || end == s || *end || s[0] == '-' || s[0] == '+')
        return errmsg_set(e, -EINVAL, "'%s' is not a pump number (pumps are numbered from 1)", s);
    if (v == 0)
        return errmsg_set(e, -EINVAL, "no pump 0: pumps are numbered from 1");
    if (v > cur->n_pumps)
        return errmsg_set(e, -EINVAL, "no pump %s: the controller has %u pump%s", s, cur->n_pumps,
                          cur->n_pumps == 1 ? "" : "s");
    *ret = (unsigned)v;
    return 0;
}

int coolctl_curve_check(const struct ctl_settings *cur, unsigned pump, const struct ctl_curve *c,
                        struct errmsg *e)
{
    if (pump < 1 || pump > cur->n_pumps)
        return errmsg_set(e, -COOLCTL_E_REFUSED, "no pump %u", pump);
    char why[ERRMSG_MAX];
    if (ctl_curve_check(c, pump, cur->min_duty[pump - 1], cur->limits.critical_centi, why,
                        sizeof(why)) < 0)
        return errmsg_set(e, -COOLCTL_E_REFUSED, "%s", why);

    /* The whole-configuration check as well, so that any rule the controller applies beyond the
     * curve's own is caught here too. */
    struct coolctl_assign a;
    snprintf(a.key, sizeof(a.key), "pump.%u.curve", pump);
    if (ctl_curve_format(c, a.value, sizeof(a.value)) < 0)
        return errmsg_set(e, -COOLCTL_E_REFUSED, "pump %u curve: too long", pump);
    return coolctl_assign_check(cur, &a, 1, e);
}

struct limit_name {
    const char *name;
    const char *key;
    const char *const *units;
};

static const struct limit_name limit_names[] = {
    {"warning", "limit.warning", units_celsius},
    {"precritical", "limit.precritical", units_celsius},
    {"critical", "limit.critical", units_celsius},
    {"flow_min", "limit.flow_min", units_flow},
    {"cut_delay", "limit.cut_delay", units_seconds},
    {"halt_max", "limit.halt_max", units_seconds},
};

static const struct limit_name *limit_lookup(const char *name)
{
    if (strncmp(name, "limit.", 6) == 0)
        name += 6;
    for (size_t i = 0; i < ELEMENTSOF(limit_names); i++)
        if (strcmp(limit_names[i].name, name) == 0)
            return &limit_names[i];
    return NULL;
}

int coolctl_limits_parse(int argc, char *const argv[], struct coolctl_assign *ret, unsigned max,
                         struct errmsg *e)
{
    if (argc == 0)
        return errmsg_set(e, -EINVAL, "limits set: nothing to set (e.g. warning=45 critical=60)");
    if ((unsigned)argc > max || (size_t)argc > ELEMENTSOF(limit_names))
        return errmsg_set(e, -EINVAL, "limits set: too many arguments");

    for (int i = 0; i < argc; i++) {
        struct coolctl_assign a;
        int r = coolctl_assign_parse(argv[i], &a, e);
        if (r < 0)
            return r;
        const struct limit_name *l = limit_lookup(a.key);
        if (!l)
            return errmsg_set(e, -EINVAL,
                              "unknown limit '%s' (warning, precritical, critical, flow_min, "
                              "cut_delay, halt_max)",
                              a.key);
        for (int j = 0; j < i; j++)
            if (strcmp(ret[j].key, l->key) == 0)
                return errmsg_set(e, -EINVAL, "limit '%s' given twice", l->name);
        snprintf(a.key, sizeof(a.key), "%s", l->key);
        strip_unit(a.value, l->units);
        char *v = trim(a.value);
        if (*v == '\0')
            return errmsg_set(e, -EINVAL, "limit '%s': no value", l->name);
        memmove(a.value, v, strlen(v) + 1);
        ret[i] = a;
    }
    return argc;
}
