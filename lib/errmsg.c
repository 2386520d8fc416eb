#include "lib/errmsg.h"

#include <stdio.h>
#include <string.h>

int errmsg_set(struct errmsg *e, int r, const char *fmt, ...)
{
    if (e) {
        va_list ap;
        va_start(ap, fmt);
        vsnprintf(e->text, sizeof(e->text), fmt, ap);
        va_end(ap);
    }
    return r;
}

int errmsg_prefix(struct errmsg *e, int r, const char *fmt, ...)
{
    if (!e)
        return r;
    char prefix[ERRMSG_MAX];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(prefix, sizeof(prefix), fmt, ap);
    va_end(ap);
    char old[ERRMSG_MAX];
    memcpy(old, e->text, sizeof(old));
    /* A message too long for the buffer keeps its beginning, which names the input. */
    if (snprintf(e->text, sizeof(e->text), "%s: %s", prefix, old) >= (int)sizeof(e->text))
        e->text[sizeof(e->text) - 1] = '\0';
    return r;
}
