#include "capsule/slurm/held.h"

#include <errno.h>
#include <jansson.h>
#include <stdlib.h>
#include <string.h>

#include "lib/strv.h"

/* A JSON array of strings into a strv; every element must be a string (and, for env, K=V). */
static int take_strings(json_t *a, const char *what, bool assignments, char ***ret,
                        struct errmsg *e)
{
    if (!json_is_array(a))
        return errmsg_set(e, -EBADMSG, "'%s' is not a list", what);
    _cleanup_strv_free_ char **v = strv_new();
    if (!v)
        return -ENOMEM;
    size_t i;
    json_t *s;
    json_array_foreach(a, i, s)
    {
        const char *text = json_string_value(s);
        if (!text || (assignments && (!strchr(text, '=') || text[0] == '=')))
            return errmsg_set(e, -EBADMSG, "%s entry %zu is not %s", what, i,
                              assignments ? "K=V" : "a string");
        if (strv_push(&v, text) < 0)
            return -ENOMEM;
    }
    *ret = TAKE_PTR(v);
    return 0;
}

int held_parse(const char *text, size_t len, struct held *ret, struct errmsg *e)
{
    if (len > HELD_LINE_MAX)
        return errmsg_set(e, -EBADMSG, "the holder's line is longer than %d bytes", HELD_LINE_MAX);
    json_error_t err;
    json_t *o = json_loadb(text, len, JSON_REJECT_DUPLICATES, &err);
    if (!o)
        return errmsg_set(e, -EBADMSG, "the holder's line is not JSON: %s", err.text);
    struct held h = {0};
    json_int_t pid = 0;
    json_t *argv = NULL, *env = NULL;
    const char *cwd = NULL, *image = NULL;
    int remap = 0, joined = 0, r = 0;
    if (json_unpack_ex(o, &err, 0, "{s:I, s:o, s:o, s:s, s:b, s:b, s?s}", "pid", &pid, "argv",
                       &argv, "env", &env, "cwd", &cwd, "remap_root", &remap, "joined", &joined,
                       "image", &image) < 0)
        r = errmsg_set(e, -EBADMSG, "the holder's line: %s", err.text);
    else if (pid <= 1 || pid > 0x3fffffff)
        r = errmsg_set(e, -EBADMSG, "the holder's line: pid %lld is not a process to join",
                       (long long)pid);
    else if (cwd[0] != '/')
        r = errmsg_set(e, -EBADMSG, "the holder's line: cwd '%s' is not absolute", cwd);
    else if ((r = take_strings(argv, "argv", false, &h.argv, e)) >= 0 &&
             (r = take_strings(env, "env", true, &h.env, e)) >= 0 &&
             (!(h.cwd = strdup(cwd)) || (image && !(h.image = strdup(image)))))
        r = -ENOMEM;
    json_decref(o);
    if (r < 0) {
        held_done(&h);
        return r == -ENOMEM ? errmsg_set(e, r, "out of memory") : r;
    }
    h.pid = (pid_t)pid;
    h.remap_root = remap;
    h.joined = joined;
    *ret = h;
    return 0;
}

void held_done(struct held *h)
{
    strv_free(h->argv);
    strv_free(h->env);
    free(h->cwd);
    free(h->image);
    *h = (struct held){0};
}
