/* Talking to coold: one JSON request per call over its Unix socket, and every way that can fail
 * turned into one sentence for a person. */
#include "coolctl.h"

#include <errno.h>
#include <string.h>

#include "lib/http-client.h"
#include "lib/macro.h"
#include "lib/socket-probe.h"

static int transport_error(const struct coolctl *c, int r, const struct errmsg *ce,
                           struct errmsg *e)
{
    if (r == -ETIMEDOUT)
        return errmsg_set(e, -ETIMEDOUT, "coold at %s did not answer within %.1f s", c->socket,
                          (double)c->timeout_ms / 1000.0);
    int p = socket_probe(c->socket);
    if (p < 0)
        return errmsg_set(e, -COOLCTL_E_UNREACHABLE,
                          "cannot reach coold at %s: %s (is coold running?)", c->socket,
                          strerror(-p));
    return errmsg_set(e, r, "request to coold at %s failed: %s", c->socket, ce->text);
}

/* A 403 names who may write. coold's reason names its admin group; should a reply not (an older
 * coold), a "group" member or else the config setting that decides it is named instead. */
static int forbidden_error(json_t *doc, const char *reason, struct errmsg *e)
{
    const char *group = json_string_value(json_object_get(doc, "group"));
    if (!group && strstr(reason, "group"))
        return errmsg_set(e, -COOLCTL_E_API, "permission denied: %s", reason);
    if (group)
        return errmsg_set(e, -COOLCTL_E_API,
                          "permission denied: %s; writes are allowed to root and members of the "
                          "group '%s'",
                          reason, group);
    return errmsg_set(e, -COOLCTL_E_API,
                      "permission denied: %s; writes are allowed to root and members of coold's "
                      "admin group (admin_group in coold's config, 'coolant' by default)",
                      reason);
}

static int status_error(long status, json_t *doc, struct errmsg *e)
{
    const char *reason = json_string_value(json_object_get(doc, "error"));
    char fallback[64];
    if (!reason) {
        snprintf(fallback, sizeof(fallback), "HTTP status %ld", status);
        reason = fallback;
    }
    switch (status) {
    case 400:
        return errmsg_set(e, -COOLCTL_E_API, "refused: %s", reason);
    case 403:
        return forbidden_error(doc, reason, e);
    case 404:
        return errmsg_set(e, -COOLCTL_E_API, "not found: %s", reason);
    case 503:
        return errmsg_set(e, -COOLCTL_E_API, "coold is not connected to the controller: %s",
                          reason);
    case 504:
        return errmsg_set(e, -COOLCTL_E_API, "the controller did not answer: %s", reason);
    default:
        return errmsg_set(e, -COOLCTL_E_API, "coold answered %ld: %s", status, reason);
    }
}

int coolctl_call(const struct coolctl *c, const char *method, const char *path, json_t *body,
                 json_t **ret_json, struct errmsg *e)
{
    char url[512];
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
        return errmsg_set(e, -EBADMSG, "coold's reply to %s %s is not a JSON object", method, path);
    }
    *ret_json = doc;
    return 0;
}

/* Takes the "settings" object out of a reply document. */
static int settings_member(json_t *doc, json_t **ret, struct errmsg *e)
{
    json_t *s = json_object_get(doc, "settings");
    if (!json_is_object(s))
        return errmsg_set(e, -EBADMSG, "coold's reply has no \"settings\" object");
    *ret = json_incref(s);
    return 0;
}

int coolctl_fetch_settings(const struct coolctl *c, json_t **ret_settings,
                           struct ctl_settings *ret_parsed, struct errmsg *e)
{
    json_t *doc = NULL, *settings = NULL;
    int r = coolctl_call(c, "GET", "/v1/settings", NULL, &doc, e);
    if (r < 0)
        return r;
    r = settings_member(doc, &settings, e);
    json_decref(doc);
    if (r < 0)
        return r;
    if (ret_parsed) {
        struct ctl_settings parsed;
        r = coolctl_settings_decode(settings, &parsed, e);
        if (r < 0) {
            json_decref(settings);
            return r;
        }
        *ret_parsed = parsed;
    }
    if (ret_settings)
        *ret_settings = settings;
    else
        json_decref(settings);
    return 0;
}

int coolctl_put_settings(const struct coolctl *c, const struct coolctl_assign *a, unsigned n,
                         json_t **ret_settings, struct errmsg *e)
{
    json_t *fields = coolctl_assign_to_json(a, n);
    json_t *body = fields ? json_pack("{so}", "settings", fields) : NULL;
    if (!body)
        return errmsg_set(e, -ENOMEM, "out of memory");
    json_t *doc = NULL;
    int r = coolctl_call(c, "PUT", "/v1/settings", body, &doc, e);
    json_decref(body);
    if (r < 0)
        return r;
    r = settings_member(doc, ret_settings, e);
    json_decref(doc);
    return r;
}
