/* coolctl: a thin client of coold's JSON control API on its Unix socket (GET /v1/status,
 * /v1/settings, /v1/events; PUT /v1/settings; POST /v1/drill). Everything testable lives in
 * libcoolctl; main.c only calls coolctl_run().
 *
 * Error contract: fallible functions return >= 0 on success and a negative errno or
 * -COOLCTL_E_* on failure, with the reason in a `struct errmsg` that coolctl_run() prints once,
 * prefixed "coolctl: ". */
#pragma once

#include <jansson.h>
#include <stdbool.h>
#include <stdio.h>

#include "ctl-proto.h"
#include "lib/errmsg.h"

#define COOLCTL_DEFAULT_SOCKET     "/run/coold/coold.sock"
#define COOLCTL_DEFAULT_TIMEOUT_MS 10000L
/* A drill waits for the whole staged shutdown, which coold bounds to two minutes. */
#define COOLCTL_DRILL_TIMEOUT_MS 150000L

/* Exit codes, documented in --help. */
enum {
    COOLCTL_EXIT_OK = 0,
    COOLCTL_EXIT_FAILURE = 1,     /* refused write, bad arguments, API error, failed drill stage */
    COOLCTL_EXIT_UNREACHABLE = 2, /* coold's socket cannot be connected */
    COOLCTL_EXIT_STALE = 3,       /* status: controller link down or telemetry stale */
};

/* Project error codes, above every errno value. */
enum {
    COOLCTL_E_UNREACHABLE = 10000, /* no coold listening on the socket */
    COOLCTL_E_API,                 /* coold answered with an error status */
    COOLCTL_E_REFUSED,             /* a write refused locally before anything was sent */
};

/* What every command needs: where coold is, how long to wait, how to print. */
struct coolctl {
    const char *socket;
    long timeout_ms;
    bool timeout_set; /* --timeout given: commands keep it instead of their own default */
    bool json;        /* print the API's documents instead of tables */
    bool color;       /* stdout is a tty and NO_COLOR is unset */
    FILE *out;
};

/* Runs coolctl with a full argument vector (argv[0] is the program name), writing results to out
 * and errors to err. Returns the process exit code (COOLCTL_EXIT_*). argv is rearranged: global
 * options after the command are taken out of the command's arguments (argv[argc] stays NULL). */
int coolctl_run(int argc, char *argv[], FILE *out, FILE *err);

/* ---- client.c: talking to coold ---- */

/* Sends one request to coold: method "GET"/"PUT"/"POST", path such as "/v1/status", body NULL or
 * a JSON document (borrowed). On a 2xx answer with a JSON object returns 0 and hands the document
 * to *ret_json (caller owns it). Fails with -COOLCTL_E_UNREACHABLE ("cannot reach coold at PATH:
 * REASON (is coold running?)"), -ETIMEDOUT, -COOLCTL_E_API with coold's reason (403 names the
 * group that grants writes, 503/504 say the controller is away), or -EBADMSG for a reply that is
 * not a JSON object. */
int coolctl_call(const struct coolctl *c, const char *method, const char *path, json_t *body,
                 json_t **ret_json, struct errmsg *e);

/* GET /v1/settings. Returns 0 with the "settings" object in *ret_settings (a new reference) and,
 * when ret_parsed is not NULL, the same settings decoded and checked in *ret_parsed. */
int coolctl_fetch_settings(const struct coolctl *c, json_t **ret_settings,
                           struct ctl_settings *ret_parsed, struct errmsg *e);

struct coolctl_assign;

/* PUT /v1/settings with the n assignments as one atomic write. Returns 0 with the settings as
 * the controller read them back in *ret_settings (a new reference). */
int coolctl_put_settings(const struct coolctl *c, const struct coolctl_assign *a, unsigned n,
                         json_t **ret_settings, struct errmsg *e);

/* ---- settings.c: arguments and local validation, no I/O ---- */

/* One KEY=VALUE assignment from the command line. */
struct coolctl_assign {
    char key[CTL_KEY_MAX + 1];
    char value[64];
};

/* Decodes coold's "settings" object (key -> string) into *ret, starting from the factory
 * defaults for as many pumps as the object has curves. Keys this coolctl does not know are
 * skipped, so a newer controller still works. Returns 0, -EINVAL (not an object of strings,
 * no pump) or -EBADMSG (the values fail the protocol's checks), with a reason. */
int coolctl_settings_decode(json_t *settings, struct ctl_settings *ret, struct errmsg *e);

/* Parses "KEY=VALUE". Returns 0 or -EINVAL with a reason. */
int coolctl_assign_parse(const char *arg, struct coolctl_assign *ret, struct errmsg *e);

/* Checks that applying the n assignments to *current gives a configuration the controller would
 * accept (the protocol module's rules, all together). Returns 0, or -COOLCTL_E_REFUSED with the
 * reason. */
int coolctl_assign_check(const struct ctl_settings *current, const struct coolctl_assign *a,
                         unsigned n, struct errmsg *e);

/* Builds the JSON object {key: value, ...} for a PUT. Returns NULL when out of memory. */
json_t *coolctl_assign_to_json(const struct coolctl_assign *a, unsigned n);

/* Parses curve points as a person types them: "30:40,45:70,55:100", also with a unit on each
 * value ("30C:40%", "30°C:40%") and spaces around separators. Checks syntax only. Returns 0 or
 * -EINVAL with a reason naming the point. */
int coolctl_points_parse(const char *s, struct ctl_curve *ret, struct errmsg *e);

/* Parses a pump number (from 1) and checks that the controller has it. Returns 0 or -EINVAL. */
int coolctl_pump_parse(const char *s, const struct ctl_settings *cur, unsigned *ret,
                       struct errmsg *e);

/* Checks a new curve for pump `pump` against the current settings (rising temperatures, duty
 * never falling, 100 % at the critical temperature, every duty >= the pump's minimum). Returns 0
 * or -COOLCTL_E_REFUSED with the protocol module's reason. */
int coolctl_curve_check(const struct ctl_settings *cur, unsigned pump, const struct ctl_curve *c,
                        struct errmsg *e);

/* Parses `limits set` arguments (warning=45 precritical=55 critical=60 flow_min=4 cut_delay=30
 * halt_max=120, any subset, each at most once; "limit." prefixes and units C/°C, s, L/min are
 * accepted) into assignments of the limit.* settings. Returns how many were written to ret (at
 * most max) or -EINVAL with a reason. */
int coolctl_limits_parse(int argc, char *const argv[], struct coolctl_assign *ret, unsigned max,
                         struct errmsg *e);

/* ---- render.c: what a person reads ---- */

/* Writes the status table for a GET /v1/status document. Returns COOLCTL_EXIT_OK, or
 * COOLCTL_EXIT_STALE when the controller link is not up or its data is stale or missing. */
int coolctl_render_status(FILE *f, json_t *doc, bool color);

/* Returns what coolctl_render_status() would return, without printing. */
int coolctl_status_exit(json_t *doc);

/* Writes "key = value" lines for every member of a settings object, in coold's order. */
void coolctl_render_settings(FILE *f, json_t *settings);

/* Writes one pump's curve: a header with the compact form and minimum duty, then one row per
 * point. */
void coolctl_render_curve(FILE *f, unsigned pump, const struct ctl_curve *c, int min_duty);

/* Writes the protection limits. */
void coolctl_render_limits(FILE *f, const struct ctl_limits *l);

/* Writes one line per event of a GET /v1/events document: local time, source, type, message. */
void coolctl_render_events(FILE *f, json_t *doc);

/* Writes one line per drill stage (nothing when f is NULL). Returns how many stages failed (a
 * stage without "ok": true counts as failed), or -EBADMSG when the document has no "stages"
 * array. */
int coolctl_render_drill(FILE *f, json_t *doc, bool color);

/* Formats hundredths in the shortest form: 4500 -> "45", 4550 -> "45.5", -425 -> "-4.25". */
void coolctl_format_centi(long centi, char *buf, size_t size);

/* Formats an API timestamp ("2026-11-29T23:59:00Z", fractions allowed) as local time
 * "2026-11-30 00:59:00". Unparsable input is copied as it is. */
void coolctl_format_time(const char *iso, char *buf, size_t size);

/* Writes a JSON document pretty-printed (two-space indent) with a final newline. */
void coolctl_render_json(FILE *f, json_t *doc);
/* Prints {"settings": settings} as coolctl_render_json() does (settings is borrowed), the shape
 * of the API's settings documents. Returns 0 or -ENOMEM. */
int coolctl_render_settings_json(FILE *f, json_t *settings);
