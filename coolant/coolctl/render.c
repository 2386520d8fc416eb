/* What a person reads: the status table, settings, curves, limits, events and drill results.
 * Every function writes to a FILE* so tests can capture the output. Missing or mistyped fields in
 * coold's documents print as "?" rather than failing: a partial table is more useful in an
 * emergency than none. */
#include "coolctl.h"

#include <errno.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#define LABEL_WIDTH 13

#define COLOR_RED    "\033[31m"
#define COLOR_BRED   "\033[1;31m"
#define COLOR_GREEN  "\033[32m"
#define COLOR_YELLOW "\033[33m"
#define COLOR_RESET  "\033[0m"

/* Writes text, wrapped in the colour when colours are on. */
static void put_colored(FILE *f, bool color, const char *code, const char *text)
{
    if (color && code)
        fprintf(f, "%s%s%s", code, text, COLOR_RESET);
    else
        fputs(text, f);
}

static const char *str_or(json_t *j, const char *fallback)
{
    return json_is_string(j) ? json_string_value(j) : fallback;
}

void coolctl_format_centi(long centi, char *buf, size_t size)
{
    const char *sign = centi < 0 ? "-" : "";
    unsigned long a = centi < 0 ? 0UL - (unsigned long)centi : (unsigned long)centi;
    if (a % 100 == 0)
        snprintf(buf, size, "%s%lu", sign, a / 100);
    else if (a % 10 == 0)
        snprintf(buf, size, "%s%lu.%lu", sign, a / 100, (a % 100) / 10);
    else
        snprintf(buf, size, "%s%lu.%02lu", sign, a / 100, a % 100);
}

/* Numbers from the API are printed to the controller's precision of hundredths. */
static void format_number(json_t *j, char *buf, size_t size)
{
    if (!json_is_number(j)) {
        snprintf(buf, size, "?");
        return;
    }
    double v = json_number_value(j);
    if (!isfinite(v) || fabs(v) > 1e9)
        snprintf(buf, size, "%g", v);
    else
        coolctl_format_centi(lround(v * 100.0), buf, size);
}

void coolctl_format_time(const char *iso, char *buf, size_t size)
{
    struct tm tm = {0};
    const char *p = iso ? strptime(iso, "%Y-%m-%dT%H:%M:%S", &tm) : NULL;
    if (p && *p == '.') {
        p++;
        while (*p >= '0' && *p <= '9')
            p++;
    }
    if (!p || strcmp(p, "Z") != 0) {
        snprintf(buf, size, "%s", iso ? iso : "?");
        return;
    }
    time_t t = timegm(&tm);
    struct tm local;
    if (t == (time_t)-1 || !localtime_r(&t, &local) ||
        strftime(buf, size, "%Y-%m-%d %H:%M:%S", &local) == 0)
        snprintf(buf, size, "%s", iso);
}

static const char *level_color(const char *level)
{
    if (strcmp(level, "normal") == 0 || strcmp(level, "ok") == 0 || strcmp(level, "idle") == 0)
        return COLOR_GREEN;
    if (strcmp(level, "warning") == 0)
        return COLOR_YELLOW;
    if (strcmp(level, "critical") == 0)
        return COLOR_BRED;
    return COLOR_RED;
}

static void label(FILE *f, const char *name)
{
    fprintf(f, "%-*s", LABEL_WIDTH, name);
}

int coolctl_status_exit(json_t *doc)
{
    json_t *ctl = json_object_get(doc, "controller");
    json_t *link = json_object_get(ctl, "link");
    if (!json_is_string(link) || strcmp(json_string_value(link), "up") != 0)
        return COOLCTL_EXIT_STALE;
    if (!json_is_false(json_object_get(ctl, "stale")))
        return COOLCTL_EXIT_STALE;
    if (!json_is_object(json_object_get(doc, "telemetry")))
        return COOLCTL_EXIT_STALE;
    return COOLCTL_EXIT_OK;
}

static void render_controller(FILE *f, json_t *ctl, bool color)
{
    label(f, "Controller");
    if (!json_is_object(ctl)) {
        fputs("?\n", f);
        return;
    }
    fprintf(f, "%s  fw %s  serial %s\n", str_or(json_object_get(ctl, "model"), "?"),
            str_or(json_object_get(ctl, "fw"), "?"), str_or(json_object_get(ctl, "serial"), "?"));

    const char *link = str_or(json_object_get(ctl, "link"), "?");
    label(f, "Link");
    put_colored(f, color, strcmp(link, "up") == 0 ? COLOR_GREEN : COLOR_RED, link);
    if (!json_is_false(json_object_get(ctl, "stale"))) {
        fputs("  ", f);
        put_colored(f, color, COLOR_YELLOW, "STALE");
    }
    char age[32];
    format_number(json_object_get(ctl, "last_frame_age_seconds"), age, sizeof(age));
    fprintf(f, "  (last frame %s s ago", age);
    json_t *reconnects = json_object_get(ctl, "reconnects");
    json_t *rejected = json_object_get(ctl, "frames_rejected");
    if (json_is_integer(reconnects))
        fprintf(f, ", %lld reconnects", (long long)json_integer_value(reconnects));
    if (json_is_integer(rejected))
        fprintf(f, ", %lld frames rejected", (long long)json_integer_value(rejected));
    fputs(")\n", f);
}

static void render_protection(FILE *f, json_t *tel, bool color)
{
    const char *level = str_or(json_object_get(tel, "level"), "?");
    label(f, "Protection");
    put_colored(f, color, level_color(level), level);
    fprintf(f, "  (reason: %s)\n", str_or(json_object_get(tel, "reason"), "?"));

    json_t *cut = json_object_get(tel, "cut_in_seconds");
    bool halt = json_is_true(json_object_get(tel, "halt"));
    if (json_is_number(cut)) {
        char s[32], text[64];
        format_number(cut, s, sizeof(s));
        snprintf(text, sizeof(text), "in %s s", s);
        label(f, "Power cut");
        put_colored(f, color, COLOR_BRED, text);
        fputs(halt ? "  (host halting)\n" : "\n", f);
    } else if (halt) {
        label(f, "Power cut");
        fputs("none scheduled  (host halting)\n", f);
    }
    const char *host = str_or(json_object_get(tel, "host"), NULL);
    if (host && strcmp(host, "ok") != 0) {
        label(f, "Host");
        fprintf(f, "%s (the controller hears no heartbeat)\n", host);
    }
}

static void render_safety(FILE *f, json_t *doc, bool color)
{
    json_t *safety = json_object_get(doc, "safety");
    const char *state = str_or(json_object_get(safety, "state"), "?");
    label(f, "Safety");
    put_colored(f, color, level_color(state), state);
    const char *since = str_or(json_object_get(safety, "since"), NULL);
    if (since) {
        char when[64];
        coolctl_format_time(since, when, sizeof(when));
        fprintf(f, " since %s", when);
    }
    fputc('\n', f);

    json_t *sd = json_object_get(doc, "shutdown");
    const char *stage = str_or(json_object_get(sd, "stage"), "?");
    label(f, "Shutdown");
    put_colored(f, color, level_color(stage), stage);
    json_t *num = json_object_get(sd, "stage_number");
    if (json_is_integer(num) && json_integer_value(num) > 0)
        fprintf(f, " (stage %lld of 7)", (long long)json_integer_value(num));
    if (json_is_true(json_object_get(sd, "drill")))
        fputs(" [drill]", f);
    fputc('\n', f);
}

static void render_sensors(FILE *f, json_t *tel, bool color)
{
    char v[32];
    format_number(json_object_get(tel, "flow_lpm"), v, sizeof(v));
    label(f, "Flow");
    fprintf(f, "%s L/min\n", v);

    size_t i;
    json_t *t;
    json_array_foreach(json_object_get(tel, "temperatures"), i, t)
    {
        label(f, i == 0 ? "Temperature" : "");
        fprintf(f, "%-10s ", str_or(json_object_get(t, "sensor"), "?"));
        if (json_is_true(json_object_get(t, "fault"))) {
            put_colored(f, color, COLOR_RED, "FAULT");
            fputc('\n', f);
            continue;
        }
        format_number(json_object_get(t, "celsius"), v, sizeof(v));
        fprintf(f,
                "%6s \xc2\xb0"
                "C\n",
                v);
    }

    json_t *p;
    json_array_foreach(json_object_get(tel, "pumps"), i, p)
    {
        char name[32], rpm[32], duty[32];
        json_t *n = json_object_get(p, "pump");
        snprintf(name, sizeof(name), "Pump %lld",
                 json_is_integer(n) ? (long long)json_integer_value(n) : (long long)i + 1);
        format_number(json_object_get(p, "rpm"), rpm, sizeof(rpm));
        format_number(json_object_get(p, "duty"), duty, sizeof(duty));
        label(f, name);
        fprintf(f, "%6s rpm  %3s %% duty\n", rpm, duty);
    }
}

int coolctl_render_status(FILE *f, json_t *doc, bool color)
{
    render_controller(f, json_object_get(doc, "controller"), color);
    json_t *tel = json_object_get(doc, "telemetry");
    if (json_is_object(tel))
        render_protection(f, tel, color);
    render_safety(f, doc, color);
    if (json_is_object(tel))
        render_sensors(f, tel, color);
    else {
        label(f, "Telemetry");
        put_colored(f, color, COLOR_YELLOW, "none yet (no STATUS from the controller)");
        fputc('\n', f);
    }
    return coolctl_status_exit(doc);
}

void coolctl_render_settings(FILE *f, json_t *settings)
{
    const char *key;
    json_t *value;
    json_object_foreach(settings, key, value)
    {
        if (json_is_string(value))
            fprintf(f, "%s = %s\n", key, json_string_value(value));
        else {
            char *s = json_dumps(value, JSON_ENCODE_ANY | JSON_COMPACT);
            fprintf(f, "%s = %s\n", key, s ? s : "?");
            free(s);
        }
    }
}

void coolctl_render_curve(FILE *f, unsigned pump, const struct ctl_curve *c, int min_duty)
{
    char compact[256];
    if (ctl_curve_format(c, compact, sizeof(compact)) < 0)
        snprintf(compact, sizeof(compact), "?");
    fprintf(f, "pump %u: %s  (minimum duty %d %%)\n", pump, compact, min_duty);
    fprintf(f, "  %7s  %5s\n",
            "\xc2\xb0"
            "C",
            "duty");
    for (unsigned i = 0; i < c->n; i++) {
        char t[32];
        coolctl_format_centi(c->p[i].temp_centi, t, sizeof(t));
        fprintf(f, "  %6s  %4d %%\n", t, c->p[i].duty);
    }
}

void coolctl_render_limits(FILE *f, const struct ctl_limits *l)
{
    char w[32], p[32], c[32], flow[32];
    coolctl_format_centi(l->warning_centi, w, sizeof(w));
    coolctl_format_centi(l->precritical_centi, p, sizeof(p));
    coolctl_format_centi(l->critical_centi, c, sizeof(c));
    coolctl_format_centi(l->flow_min_centi, flow, sizeof(flow));
    fprintf(f,
            "warning      %6s \xc2\xb0"
            "C\n",
            w);
    fprintf(f,
            "precritical  %6s \xc2\xb0"
            "C\n",
            p);
    fprintf(f,
            "critical     %6s \xc2\xb0"
            "C\n",
            c);
    fprintf(f, "flow_min     %6s L/min\n", flow);
    fprintf(f, "cut_delay    %6u s\n", l->cut_delay_s);
    fprintf(f, "halt_max     %6u s\n", l->halt_max_s);
}

void coolctl_render_events(FILE *f, json_t *doc)
{
    size_t i;
    json_t *ev;
    json_array_foreach(json_object_get(doc, "events"), i, ev)
    {
        char when[64];
        coolctl_format_time(str_or(json_object_get(ev, "time"), NULL), when, sizeof(when));
        fprintf(f, "%s  %-10s  %-9s  %s\n", when, str_or(json_object_get(ev, "source"), "?"),
                str_or(json_object_get(ev, "type"), "?"),
                str_or(json_object_get(ev, "message"), ""));
    }
}

int coolctl_render_drill(FILE *f, json_t *doc, bool color)
{
    json_t *stages = json_object_get(doc, "stages");
    if (!json_is_array(stages))
        return -EBADMSG;
    int failed = 0;
    size_t i;
    json_t *st;
    json_array_foreach(stages, i, st)
    {
        bool ok = json_is_true(json_object_get(st, "ok"));
        if (!ok)
            failed++;
        if (!f)
            continue;
        char secs[32];
        format_number(json_object_get(st, "seconds"), secs, sizeof(secs));
        fprintf(f, "%-11s ", str_or(json_object_get(st, "name"), "?"));
        put_colored(f, color, ok ? COLOR_GREEN : COLOR_RED, ok ? "ok    " : "FAILED");
        const char *detail = str_or(json_object_get(st, "detail"), "");
        fprintf(f, "  %7s s%s%s\n", secs, *detail ? "  " : "", detail);
    }
    return failed;
}

void coolctl_render_json(FILE *f, json_t *doc)
{
    json_dumpf(doc, f, JSON_INDENT(2) | JSON_ENCODE_ANY);
    fputc('\n', f);
}

int coolctl_render_settings_json(FILE *f, json_t *settings)
{
    json_t *doc = json_pack("{sO}", "settings", settings);
    if (!doc)
        return -ENOMEM;
    coolctl_render_json(f, doc);
    json_decref(doc);
    return 0;
}
