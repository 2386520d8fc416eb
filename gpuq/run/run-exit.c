#include "gpuq/run/run-exit.h"

#include <errno.h>
#include <jansson.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>

#include "lib/macro.h"

void run_exit_done(struct run_exit *x)
{
    free(x->note);
    *x = (struct run_exit){0};
}

void run_exit_set_status(struct run_exit *x, int status)
{
    x->status = status;
    x->exited = WIFEXITED(status);
    x->code = x->exited ? WEXITSTATUS(status) : 0;
    x->signal = WIFSIGNALED(status) ? WTERMSIG(status) : 0;
}

int run_exit_to_json(const struct run_exit *x, char **ret_text)
{
    json_auto_t *o = json_pack("{s:i, s:b, s:i, s:i, s:b, s:f, s:f, s:I, s:s}", "status", x->status,
                               "exited", x->exited, "code", x->code, "signal", x->signal, "started",
                               x->started, "start", x->start, "end", x->end, "oom_kills",
                               (json_int_t)x->oom_kills, "note", x->note ? x->note : "");
    char *text = o ? json_dumps(o, JSON_COMPACT) : NULL;
    if (!text)
        return -ENOMEM;
    *ret_text = text;
    return 0;
}

/* A JSON number of either kind as a double. */
static bool number(const json_t *v, double *ret)
{
    if (!json_is_number(v))
        return false;
    *ret = json_number_value(v);
    return true;
}

int run_exit_from_json(const char *text, size_t len, struct run_exit *ret, struct errmsg *e)
{
    json_error_t je;
    json_auto_t *o = json_loadb(text, len, JSON_REJECT_DUPLICATES, &je);
    if (!o)
        return errmsg_set(e, -EINVAL, "exit record: line %d: %s", je.line, je.text);
    if (!json_is_object(o))
        return errmsg_set(e, -EINVAL, "exit record: not a JSON object");
    struct run_exit x = {.started = true};
    const json_t *status = json_object_get(o, "status"), *started = json_object_get(o, "started");
    const json_t *oom = json_object_get(o, "oom_kills"), *note = json_object_get(o, "note");
    json_int_t st = json_integer_value(status);
    if (!json_is_integer(status) || st < 0 || st > 0xffff)
        return errmsg_set(e, -EINVAL, "exit record: \"status\": not a wait status");
    if (!number(json_object_get(o, "start"), &x.start) ||
        !number(json_object_get(o, "end"), &x.end))
        return errmsg_set(e, -EINVAL, "exit record: \"start\" and \"end\" must be numbers");
    if (started && !json_is_boolean(started))
        return errmsg_set(e, -EINVAL, "exit record: \"started\": not true or false");
    if (oom && (!json_is_integer(oom) || json_integer_value(oom) < 0))
        return errmsg_set(e, -EINVAL, "exit record: \"oom_kills\": not a count");
    if (note && !json_is_string(note))
        return errmsg_set(e, -EINVAL, "exit record: \"note\": not a string");
    run_exit_set_status(&x, (int)st);
    x.started = !started || json_is_true(started);
    x.oom_kills = oom ? (uint64_t)json_integer_value(oom) : 0;
    x.note = strdup(note ? json_string_value(note) : "");
    if (!x.note)
        return errmsg_set(e, -ENOMEM, "out of memory");
    *ret = x;
    return 0;
}
