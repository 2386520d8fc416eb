/* Error messages that travel with -errno returns.
 *
 * Functions that parse outside input or do I/O take a `struct errmsg *` last. On failure they
 * return a negative errno and fill the message, so that the caller can print once what was wrong
 * with which input. Passing NULL is allowed when the caller only needs the code. */
#pragma once

#include <stdarg.h>

#define ERRMSG_MAX 512

struct errmsg {
    char text[ERRMSG_MAX];
};

/* Formats the message into *e (if e is not NULL) and returns r, which must be negative.
 * Usage: return errmsg_set(e, -EINVAL, "pump curve point %u: ...", i); */
int errmsg_set(struct errmsg *e, int r, const char *fmt, ...) __attribute__((format(printf, 3, 4)));

/* Prepends "prefix: " to an existing message; returns r. */
int errmsg_prefix(struct errmsg *e, int r, const char *fmt, ...)
    __attribute__((format(printf, 3, 4)));
