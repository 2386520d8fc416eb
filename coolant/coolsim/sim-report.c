/* The end-of-run report. */
#include "sim-report.h"

#include <errno.h>
#include <jansson.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "lib/macro.h"

void sim_report_fill(struct sim_report *r, const struct sim_ctl *c, const char *scenario,
                     const char *end, uint64_t start_ms, uint64_t end_ms)
{
    const struct sim_ctl_stats *s = &c->stats;

    *r = (struct sim_report){
        .scenario = scenario,
        .end = end,
        .duration_s = (double)(end_ms - start_ms) / 1000.0,
        .power_cut = s->cut,
        .cut_at_s = s->cut ? (double)(s->cut_ms - start_ms) / 1000.0 : 0,
        .orderly = s->cut && s->cut_orderly,
        .halt = s->halt,
        .halt_at_s = s->halt ? (double)(s->halt_ms - start_ms) / 1000.0 : 0,
        .have_max_temp = s->have_max_temp,
        .max_temp_c = (double)s->max_temp_centi / 100.0,
        .max_level = sim_level_name(s->max_level),
        .frames = s->frames,
        .rejected = s->rejected,
        .errors = s->errors,
        .alarms = s->alarms,
        .boots = s->boots,
        .host_lost = s->host_lost,
    };
    memcpy(r->requests, s->requests, sizeof(r->requests));
}

int sim_report_exit_status(const struct sim_report *r)
{
    return r->power_cut && !r->orderly ? SIM_EXIT_HARD_CUT : SIM_EXIT_OK;
}

void sim_report_print(const struct sim_report *r, FILE *f)
{
    fprintf(f, "scenario %s ended (%s) after %.1f s\n", r->scenario, r->end, r->duration_s);
    if (r->power_cut)
        fprintf(f, "power cut at %.1f s: %s\n", r->cut_at_s,
                r->orderly ? "orderly (the host had sent HALT)" : "HARD: the host never said HALT");
    else
        fprintf(f, "no power cut\n");
    if (r->halt)
        fprintf(f, "HALT received at %.1f s\n", r->halt_at_s);
    if (r->have_max_temp)
        fprintf(f, "max temperature %.2f C, max level %s\n", r->max_temp_c, r->max_level);
    else
        fprintf(f, "no temperature read, max level %s\n", r->max_level);
    fprintf(f, "frames received %lu, rejected %lu; requests:", r->frames, r->rejected);
    for (int v = 0; v < _SIM_VERB_MAX; v++)
        fprintf(f, " %s=%lu", sim_verb_name(v), r->requests[v]);
    fprintf(f, "\nerrors sent %lu, alarms sent %lu, boots %u, host lost %u times\n", r->errors,
            r->alarms, r->boots, r->host_lost);
}

static json_t *number_or_null(bool have, double value)
{
    return have ? json_real(value) : json_null();
}

static json_t *report_json(const struct sim_report *r)
{
    json_t *requests = json_object();
    for (int v = 0; v < _SIM_VERB_MAX; v++)
        json_object_set_new(requests, sim_verb_name(v), json_integer((json_int_t)r->requests[v]));

    return json_pack(
        "{s:s, s:s, s:f, s:b, s:o, s:b, s:b, s:o, s:o, s:s, s:I, s:I, s:o, s:I, "
        "s:I, s:i, s:i, s:I, s:i}",
        "scenario", r->scenario, "end", r->end, "duration_s", r->duration_s, "power_cut",
        r->power_cut, "cut_at_s", number_or_null(r->power_cut, r->cut_at_s), "orderly", r->orderly,
        "halt_received", r->halt, "halt_at_s", number_or_null(r->halt, r->halt_at_s), "max_temp_c",
        number_or_null(r->have_max_temp, r->max_temp_c), "max_level", r->max_level,
        "frames_received", (json_int_t)r->frames, "frames_rejected", (json_int_t)r->rejected,
        "requests", requests, "errors_sent", (json_int_t)r->errors, "alarms_sent",
        (json_int_t)r->alarms, "boots", (int)r->boots, "host_lost", (int)r->host_lost,
        "bytes_dropped", (json_int_t)r->bytes_dropped, "exit_status", sim_report_exit_status(r));
}

int sim_report_write_json(const struct sim_report *r, const char *path, struct errmsg *e)
{
    _cleanup_(json_decrefp) json_t *root = report_json(r);
    _cleanup_free_ char *tmp = NULL;

    if (!root)
        return errmsg_set(e, -ENOMEM, "cannot build the report");
    if (asprintf(&tmp, "%s.tmp%ld", path, (long)getpid()) < 0)
        return errmsg_set(e, -ENOMEM, "out of memory");
    if (json_dump_file(root, tmp, JSON_INDENT(2) | JSON_SORT_KEYS | JSON_REAL_PRECISION(9)) < 0) {
        (void)unlink(tmp);
        return errmsg_set(e, -EIO, "cannot write '%s'", tmp);
    }
    if (rename(tmp, path) < 0) {
        int q = negative_errno();
        (void)unlink(tmp);
        errno = -q;
        return errmsg_set(e, q, "cannot rename '%s' to '%s': %m", tmp, path);
    }
    return 0;
}
