/* Talking to gpuqd: one JSON request per call over its Unix socket, and every way that can fail
 * turned into one sentence for a person. */
#include "gpuq/gpuq/cli.h"

#include <errno.h>
#include <string.h>

#include "lib/http-client.h"
#include "lib/macro.h"
#include "lib/socket-probe.h"

static int transport_error(const struct gpuq_cli *c, int r, const struct errmsg *ce,
                           struct errmsg *e)
{
    if (r == -ETIMEDOUT)
        return errmsg_set(e, -ETIMEDOUT, "gpuqd at %s did not answer within %.0f s", c->socket,
                          (double)c->timeout_ms / 1000.0);
    int p = socket_probe(c->socket);
    if (p < 0)
        return errmsg_set(e, -GPUQ_E_UNREACHABLE,
                          "cannot reach gpuqd at %s: %s (is gpuqd running?)", c->socket,
                          strerror(-p));
    return errmsg_set(e, r, "request to gpuqd at %s failed: %s", c->socket, ce->text);
}

/* The API's statuses as errnos, so that a caller can tell "no such job" from the rest. */
static int status_errno(long status)
{
    switch (status) {
    case 400:
        return -EINVAL;
    case 403:
        return -EPERM;
    case 404:
        return -ENOENT;
    case 409:
        return -EBUSY;
    case 413:
        return -EMSGSIZE;
    case 422:
        return -ERANGE;
    default:
        return -GPUQ_E_API;
    }
}

static int status_error(long status, json_t *doc, struct errmsg *e)
{
    const char *reason = json_string_value(json_object_get(doc, "error"));
    int r = status_errno(status);
    /* gpuqd's messages are sentences for the user ("job 12 is not yours"); they are shown as
     * they are. Only a reply without one (a proxy, a crash) gets the bare status. */
    if (reason && *reason)
        return errmsg_set(e, r, "%s", reason);
    return errmsg_set(e, r, "gpuqd answered HTTP status %ld", status);
}

int gpuq_call(const struct gpuq_cli *c, const char *method, const char *path, json_t *body,
              json_t **ret_json, struct errmsg *e)
{
    char url[2048];
    if (snprintf(url, sizeof(url), "http://localhost%s", path) >= (int)sizeof(url))
        return errmsg_set(e, -ENAMETOOLONG, "request path too long");

    long status = 0;
    json_t *doc = NULL;
    struct errmsg ce = {""};
    int r = http_request_json(method, url, c->socket, body, c->timeout_ms, &status, &doc, &ce);
    if (r < 0)
        return transport_error(c, r, &ce, e);

    if (status < 200 || status > 299) {
        r = status_error(status, doc, e);
        json_decref(doc);
        return r;
    }
    if (!json_is_object(doc)) {
        json_decref(doc);
        return errmsg_set(e, -EBADMSG, "gpuqd's reply to %s %s is not a JSON object", method, path);
    }
    if (ret_json)
        *ret_json = doc;
    else
        json_decref(doc);
    return 0;
}

int gpuq_query_append(char *buf, size_t size, const char *s)
{
    static const char hex[] = "0123456789ABCDEF";
    size_t n = strnlen(buf, size);
    for (; *s; s++) {
        unsigned char ch = (unsigned char)*s;
        bool plain = (ch >= 'A' && ch <= 'Z') || (ch >= 'a' && ch <= 'z') ||
                     (ch >= '0' && ch <= '9') || strchr("._~-", ch);
        size_t need = plain ? 1 : 3;
        if (n + need >= size)
            return -ENAMETOOLONG;
        if (plain)
            buf[n++] = (char)ch;
        else {
            buf[n++] = '%';
            buf[n++] = hex[ch >> 4];
            buf[n++] = hex[ch & 15];
        }
        buf[n] = '\0';
    }
    return 0;
}
