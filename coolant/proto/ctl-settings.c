/* The settings table of docs/protocol.md §6: defaults, checks, SET, GET. */
#include <stdio.h>
#include <string.h>

#include "ctl-internal.h"
#include "ctl-proto.h"

/* Syntax bound for whole-second settings; the rules of §6 are narrower and checked later. */
#define SECONDS_SYNTAX_MAX 999999L

enum setting_id {
    SET_CURVE,
    SET_MIN_DUTY,
    SET_WARNING,
    SET_PRECRITICAL,
    SET_CRITICAL,
    SET_FLOW_MIN,
    SET_CUT_DELAY,
    SET_HALT_MAX,
    SET_HOST_TIMEOUT,
};

/* The scalar settings, in table order; the per-pump ones are matched by lookup(). */
static const struct {
    const char *key;
    enum setting_id id;
} scalar_settings[] = {
    {"limit.warning", SET_WARNING},     {"limit.precritical", SET_PRECRITICAL},
    {"limit.critical", SET_CRITICAL},   {"limit.flow_min", SET_FLOW_MIN},
    {"limit.cut_delay", SET_CUT_DELAY}, {"limit.halt_max", SET_HALT_MAX},
    {"host.timeout", SET_HOST_TIMEOUT},
};

/* Finds a setting by key; *ret_pump is the pump index (from 0) for per-pump settings. Returns 0
 * or -CTL_E_BADKEY. */
static int lookup(const struct ctl_settings *s, const char *key, enum setting_id *ret_id,
                  unsigned *ret_pump)
{
    for (size_t i = 0; i < sizeof(scalar_settings) / sizeof(scalar_settings[0]); i++)
        if (strcmp(key, scalar_settings[i].key) == 0) {
            *ret_id = scalar_settings[i].id;
            *ret_pump = 0;
            return 0;
        }
    /* "pump.<n>.curve" / "pump.<n>.min_duty" with n a single digit from 1: at most
     * CTL_PUMPS_MAX pumps, so one digit is enough and "pump.01" is not a second spelling. */
    if (strncmp(key, "pump.", 5) != 0 || key[5] < '1' || key[5] > '9' || key[6] != '.')
        return -CTL_E_BADKEY;
    if ((unsigned)(key[5] - '0') > s->n_pumps)
        return -CTL_E_BADKEY;
    if (strcmp(key + 7, "curve") == 0)
        *ret_id = SET_CURVE;
    else if (strcmp(key + 7, "min_duty") == 0)
        *ret_id = SET_MIN_DUTY;
    else
        return -CTL_E_BADKEY;
    *ret_pump = (unsigned)(key[5] - '1');
    return 0;
}

void ctl_settings_defaults(struct ctl_settings *s, unsigned n_pumps)
{
    static const struct ctl_curve curve = {3, {{3000, 40}, {4500, 70}, {5500, 100}}};

    memset(s, 0, sizeof(*s));
    if (n_pumps < 1)
        n_pumps = 1;
    if (n_pumps > CTL_PUMPS_MAX)
        n_pumps = CTL_PUMPS_MAX;
    s->n_pumps = n_pumps;
    for (unsigned i = 0; i < n_pumps; i++) {
        s->curve[i] = curve;
        s->min_duty[i] = 20;
    }
    s->limits.warning_centi = 4500;
    s->limits.precritical_centi = 5500;
    s->limits.critical_centi = 6000;
    s->limits.flow_min_centi = 400;
    s->limits.cut_delay_s = 30;
    s->limits.halt_max_s = 120;
    s->host_timeout_s = 10;
}

int ctl_limits_check(const struct ctl_limits *l, char *why, size_t why_size)
{
    char a[16], b[16];

    if (l->warning_centi >= l->precritical_centi) {
        CTL_WHY(why, why_size, "limit.warning %s C must be below limit.precritical %s C",
                ctl_temp_str(l->warning_centi, a), ctl_temp_str(l->precritical_centi, b));
        return -CTL_E_BADVALUE;
    }
    if (l->precritical_centi >= l->critical_centi) {
        CTL_WHY(why, why_size, "limit.precritical %s C must be below limit.critical %s C",
                ctl_temp_str(l->precritical_centi, a), ctl_temp_str(l->critical_centi, b));
        return -CTL_E_BADVALUE;
    }
    if (l->critical_centi > 9000) {
        CTL_WHY(why, why_size, "limit.critical %s C must be at most 90 C",
                ctl_temp_str(l->critical_centi, a));
        return -CTL_E_BADVALUE;
    }
    if (l->flow_min_centi < 0) {
        CTL_WHY(why, why_size, "limit.flow_min %s L/min must not be negative",
                ctl_temp_str(l->flow_min_centi, a));
        return -CTL_E_BADVALUE;
    }
    if (l->cut_delay_s < 5 || l->cut_delay_s > 600) {
        CTL_WHY(why, why_size, "limit.cut_delay %u s must be 5 to 600 s", l->cut_delay_s);
        return -CTL_E_BADVALUE;
    }
    if (l->halt_max_s < 10 || l->halt_max_s > 900) {
        CTL_WHY(why, why_size, "limit.halt_max %u s must be 10 to 900 s", l->halt_max_s);
        return -CTL_E_BADVALUE;
    }
    return 0;
}

int ctl_settings_check(const struct ctl_settings *s, char *why, size_t why_size)
{
    int r;

    r = ctl_limits_check(&s->limits, why, why_size);
    if (r < 0)
        return r;
    if (s->host_timeout_s < 2 || s->host_timeout_s > 600) {
        CTL_WHY(why, why_size, "host.timeout %u s must be 2 to 600 s", s->host_timeout_s);
        return -CTL_E_BADVALUE;
    }
    for (unsigned i = 0; i < s->n_pumps && i < CTL_PUMPS_MAX; i++) {
        if (s->min_duty[i] < 0 || s->min_duty[i] > 100) {
            CTL_WHY(why, why_size, "pump.%u.min_duty %d%% must be 0 to 100%%", i + 1,
                    s->min_duty[i]);
            return -CTL_E_BADVALUE;
        }
        r = ctl_curve_check(&s->curve[i], i + 1, s->min_duty[i], s->limits.critical_centi, why,
                            why_size);
        if (r < 0)
            return r;
    }
    return 0;
}

/* Parses a whole number of seconds into *ret. */
static int parse_seconds(const char *key, const char *value, unsigned *ret, char *why,
                         size_t why_size)
{
    long v;

    if (ctl_parse_long(value, 0, SECONDS_SYNTAX_MAX, &v) < 0) {
        CTL_WHY(why, why_size, "%s %s is not a whole number of seconds", key, value);
        return -CTL_E_BADVALUE;
    }
    *ret = (unsigned)v;
    return 0;
}

/* Parses a fixed-point value (temperature or flow) into *ret. */
static int parse_fixed(const char *key, const char *value, long *ret, char *why, size_t why_size)
{
    if (ctl_parse_centi(value, ret) < 0) {
        CTL_WHY(why, why_size, "%s %s is not a number with at most two decimals", key, value);
        return -CTL_E_BADVALUE;
    }
    return 0;
}

/* Parses one setting's value into s; syntax only, the rules are checked on the whole. */
static int set_one(struct ctl_settings *s, const char *key, const char *value, char *why,
                   size_t why_size)
{
    char reason[128];
    enum setting_id id;
    unsigned pump;
    long v;
    int r;

    r = lookup(s, key, &id, &pump);
    if (r < 0) {
        CTL_WHY(why, why_size, "%s: no such setting", key);
        return r;
    }
    switch (id) {
    case SET_CURVE:
        r = ctl_curve_parse(value, &s->curve[pump], reason, sizeof(reason));
        if (r < 0)
            CTL_WHY(why, why_size, "pump %u %s", pump + 1, reason);
        return r;
    case SET_MIN_DUTY:
        if (ctl_parse_long(value, 0, 100, &v) < 0) {
            CTL_WHY(why, why_size, "%s %s must be a whole percent from 0 to 100", key, value);
            return -CTL_E_BADVALUE;
        }
        s->min_duty[pump] = (int)v;
        return 0;
    case SET_WARNING:
        return parse_fixed(key, value, &s->limits.warning_centi, why, why_size);
    case SET_PRECRITICAL:
        return parse_fixed(key, value, &s->limits.precritical_centi, why, why_size);
    case SET_CRITICAL:
        return parse_fixed(key, value, &s->limits.critical_centi, why, why_size);
    case SET_FLOW_MIN:
        return parse_fixed(key, value, &s->limits.flow_min_centi, why, why_size);
    case SET_CUT_DELAY:
        return parse_seconds(key, value, &s->limits.cut_delay_s, why, why_size);
    case SET_HALT_MAX:
        return parse_seconds(key, value, &s->limits.halt_max_s, why, why_size);
    case SET_HOST_TIMEOUT:
        return parse_seconds(key, value, &s->host_timeout_s, why, why_size);
    }
    return -CTL_E_BADKEY;
}

int ctl_settings_apply(struct ctl_settings *s, const struct ctl_field *fields, unsigned n_fields,
                       char *why, size_t why_size)
{
    struct ctl_settings next = *s;
    int r;

    /* Everything lands in a copy first, so a refusal anywhere leaves *s as it was. */
    for (unsigned i = 0; i < n_fields; i++) {
        if (!fields[i].key || !fields[i].value) {
            CTL_WHY(why, why_size, "setting %u has no key or no value", i + 1);
            return -CTL_E_BADVALUE;
        }
        r = set_one(&next, fields[i].key, fields[i].value, why, why_size);
        if (r < 0)
            return r;
    }
    r = ctl_settings_check(&next, why, why_size);
    if (r < 0)
        return r;
    *s = next;
    return 0;
}

/* snprintf's result as this module's return convention. */
static int fitted(int n, size_t size)
{
    if (n < 0 || (size_t)n >= size)
        return -CTL_E_OVERFLOW;
    return n;
}

int ctl_settings_get(const struct ctl_settings *s, const char *key, char *buf, size_t size)
{
    enum setting_id id;
    unsigned pump;
    int r;

    r = lookup(s, key, &id, &pump);
    if (r < 0)
        return r;
    switch (id) {
    case SET_CURVE:
        return ctl_curve_format(&s->curve[pump], buf, size);
    case SET_MIN_DUTY:
        return fitted(snprintf(buf, size, "%d", s->min_duty[pump]), size);
    /* Limits are reported with two decimals, as SET echoes them (§5). */
    case SET_WARNING:
        return ctl_format_centi(s->limits.warning_centi, false, buf, size);
    case SET_PRECRITICAL:
        return ctl_format_centi(s->limits.precritical_centi, false, buf, size);
    case SET_CRITICAL:
        return ctl_format_centi(s->limits.critical_centi, false, buf, size);
    case SET_FLOW_MIN:
        return ctl_format_centi(s->limits.flow_min_centi, false, buf, size);
    case SET_CUT_DELAY:
        return fitted(snprintf(buf, size, "%u", s->limits.cut_delay_s), size);
    case SET_HALT_MAX:
        return fitted(snprintf(buf, size, "%u", s->limits.halt_max_s), size);
    case SET_HOST_TIMEOUT:
        return fitted(snprintf(buf, size, "%u", s->host_timeout_s), size);
    }
    return -CTL_E_BADKEY;
}

unsigned ctl_settings_keys(const struct ctl_settings *s,
                           void (*fn)(const char *key, void *userdata), void *userdata)
{
    static const char *const pump_keys[] = {"curve", "min_duty"};
    unsigned count = 0;
    char key[CTL_KEY_MAX + 1];

    for (unsigned p = 0; p < s->n_pumps && p < CTL_PUMPS_MAX; p++)
        for (unsigned k = 0; k < 2; k++) {
            snprintf(key, sizeof(key), "pump.%u.%s", p + 1, pump_keys[k]);
            if (fn)
                fn(key, userdata);
            count++;
        }
    for (size_t i = 0; i < sizeof(scalar_settings) / sizeof(scalar_settings[0]); i++) {
        if (fn)
            fn(scalar_settings[i].key, userdata);
        count++;
    }
    return count;
}
