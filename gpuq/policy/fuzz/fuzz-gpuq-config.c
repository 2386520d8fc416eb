/* libFuzzer target: gpuqd's config file. Loaded or refused with a message; a loaded config has
 * a queue, valid names and windows the calendar can evaluate. The calendar runs on the first
 * queue, so that windows of any shape (wrapping, 24:00, date ranges) meet a DST change. */
#include <errno.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "gpuq/policy/calendar.h"
#include "gpuq/policy/gpuq-config.h"
#include "lib/fuzz-check.h"

/* 2026-10-24 22:30 UTC: the night before Europe's autumn change. */
#define FUZZ_NOW ((time_t)1792881000)

static void check_queue(const struct sched_config *sc, const struct queue *q)
{
    CHECK(queue_name_valid(q->name));
    CHECK(sched_config_queue(sc, q->name) == q);
    CHECK(service_class_name(q->class) != NULL);
    CHECK(q->n_windows == 0 || q->windows);
    for (unsigned i = 0; i < q->n_windows; i++) {
        const struct window *w = &q->windows[i];
        CHECK(w->days || w->n_dates);
        CHECK(w->days <= 0x7f && w->n_dates <= WINDOW_MAX_DATES);
        CHECK(w->start_min < 1440 && w->end_min <= 1440);
        CHECK(w->quota.n > 0);
    }
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);
int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    struct gpuqd_config c;
    struct errmsg e = {""};
    int r = gpuqd_config_load_string("fuzz.conf", (const char *)data, size, &c, &e);
    CHECK(r == 0 || r == -EINVAL || r == -ERANGE || r == -E2BIG || r == -ENOMEM);
    if (r < 0) {
        CHECK(e.text[0]);
        return 0;
    }
    CHECK(c.sched.n_queues >= 1);
    CHECK(c.socket && c.socket[0] == '/' && c.state_dir && c.metrics_listen && c.audit_log);
    for (unsigned i = 0; i < c.sched.n_queues; i++)
        check_queue(&c.sched, &c.sched.queues[i]);
    CHECK(!c.sched.default_class || sched_config_class(&c.sched, c.sched.default_class));
    CHECK(!c.sched.time_zone || calendar_zone_valid(c.sched.time_zone));

    const struct queue *q = &c.sched.queues[0];
    struct quota quota;
    time_t next;
    CHECK(calendar_quota_at(q, c.sched.time_zone, FUZZ_NOW, &quota, NULL) == 0);
    r = calendar_next_change(q, c.sched.time_zone, FUZZ_NOW, &next);
    CHECK(r == 0 || r == -ENOENT);
    if (r == 0) {
        CHECK(next > FUZZ_NOW && next <= FUZZ_NOW + 400 * 86400);
        CHECK(calendar_quota_at(q, c.sched.time_zone, next, &quota, NULL) == 0);
    }
    gpuqd_config_done(&c);
    return 0;
}
