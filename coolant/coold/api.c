/* Routing and the handlers of coold's control API. Reads are open to every local user; writes
 * need root or admin_group, judged by the peer's credentials, and are audited either way. */
#include "api.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "api-status.h"
#include "daemon.h"
#include "lib/log.h"
#include "lib/macro.h"
#include "metrics.h"

#define SETTINGS_PREFIX "/v1/settings/"

/* Maps a failed daemon_call to an HTTP reply. */
static void reply_call_error(struct http_reply *reply, int r, const struct errmsg *e)
{
    unsigned status = r == -ENOTCONN    ? 503
                      : r == -ETIMEDOUT ? 504
                      : r == -EMSGSIZE  ? 400
                      : r == -EBUSY     ? 503
                                        : 500;
    http_reply_error(reply, status, "%s", e->text);
    if (status == 503)
        http_reply_header(reply, "Retry-After", "1");
}

/* Maps an ERR reply from the controller to 400 with the controller's code and reason; reading a
 * setting the controller does not have is 404 (no such resource), writing one is 400. */
static void reply_controller_err(struct http_reply *reply, const struct ctl_frame *f, bool read)
{
    const char *code = ctl_frame_get(f, "code");
    const char *msg = ctl_frame_get(f, "msg");
    unsigned status = read && code && strcmp(code, "badkey") == 0 ? 404 : 400;
    json_t *body = json_pack("{s:s, s:s}", "error", msg ? msg : "the controller refused", "code",
                             code ? code : "unknown");
    http_reply_json(reply, status, body);
}

/* GETs one setting into obj. Returns 0, or fills the reply and returns < 0. */
static int get_setting(struct daemon *d, const char *key, json_t *obj, struct http_reply *reply)
{
    struct errmsg e = {{0}};
    struct ctl_frame f;
    struct ctl_field field = {"key", key};
    int r = daemon_call(d, "GET", &field, 1, &f, &e);
    if (r < 0) {
        reply_call_error(reply, r, &e);
        return r;
    }
    if (strcmp(f.verb, "OK") != 0) {
        reply_controller_err(reply, &f, true);
        return -EINVAL;
    }
    const char *value = ctl_frame_get(&f, key);
    json_object_set_new(obj, key, json_string(value ? value : ""));
    return 0;
}

struct key_list {
    const char *keys[64];
    char store[64][CTL_KEY_MAX + 1];
    unsigned n;
};

static void collect_key(const char *key, void *userdata)
{
    struct key_list *l = userdata;
    if (l->n < ELEMENTSOF(l->keys)) {
        snprintf(l->store[l->n], sizeof(l->store[l->n]), "%s", key);
        l->keys[l->n] = l->store[l->n];
        l->n++;
    }
}

static void handle_settings_get(struct daemon *d, const char *key, struct http_reply *reply)
{
    json_t *obj = json_object();
    if (key) {
        if (get_setting(d, key, obj, reply) == 0)
            http_reply_json(reply, 200, json_pack("{s:O}", "settings", obj));
        json_decref(obj);
        return;
    }
    struct coold_view v;
    daemon_view(d, &v);
    if (!v.has_info) {
        json_decref(obj);
        http_reply_error(reply, 503, "the controller is not connected");
        return;
    }
    /* The key list depends on the pump count, which only the controller knows. */
    struct ctl_settings shape;
    ctl_settings_defaults(&shape, v.n_pumps ? v.n_pumps : 1);
    struct key_list keys = {.n = 0};
    ctl_settings_keys(&shape, collect_key, &keys);
    for (unsigned i = 0; i < keys.n; i++)
        if (get_setting(d, keys.keys[i], obj, reply) < 0) {
            json_decref(obj);
            return;
        }
    http_reply_json(reply, 200, json_pack("{s:o}", "settings", obj));
}

/* Turns {"settings": {"k": "v" | number}} into SET fields; the strings stay owned by body. */
static int settings_fields(json_t *body, struct ctl_field *fields, char numbers[][32],
                           unsigned *ret_n, struct http_reply *reply)
{
    json_t *settings = json_object_get(body, "settings");
    if (!json_is_object(settings) || json_object_size(settings) == 0) {
        http_reply_error(reply, 400, "the body must be {\"settings\": {\"key\": \"value\", ...}}");
        return -EINVAL;
    }
    if (json_object_size(settings) > CTL_FIELDS_MAX) {
        http_reply_error(reply, 400, "at most %d settings in one write", CTL_FIELDS_MAX);
        return -E2BIG;
    }
    unsigned n = 0;
    const char *key;
    json_t *value;
    json_object_foreach(settings, key, value)
    {
        if (json_is_string(value))
            fields[n].value = json_string_value(value);
        else if (json_is_number(value)) {
            snprintf(numbers[n], 32, "%g", json_number_value(value));
            fields[n].value = numbers[n];
        } else {
            http_reply_error(reply, 400, "setting '%s': the value must be a string or a number",
                             key);
            return -EINVAL;
        }
        fields[n++].key = key;
    }
    *ret_n = n;
    return 0;
}

static void handle_settings_put(struct daemon *d, json_t *body, struct http_reply *reply)
{
    struct ctl_field fields[CTL_FIELDS_MAX];
    char numbers[CTL_FIELDS_MAX][32];
    unsigned n;
    if (settings_fields(body, fields, numbers, &n, reply) < 0)
        return;
    struct errmsg e = {{0}};
    struct ctl_frame f;
    int r = daemon_call(d, "SET", fields, n, &f, &e);
    if (r < 0) {
        reply_call_error(reply, r, &e);
        return;
    }
    if (strcmp(f.verb, "OK") != 0) {
        reply_controller_err(reply, &f, false);
        return;
    }
    json_t *applied = json_object();
    for (unsigned i = 0; i < f.n_fields; i++)
        json_object_set_new(applied, f.fields[i].key, json_string(f.fields[i].value));
    eventlog_add(daemon_events(d), "daemon", "settings", applied, "controller settings written");
    http_reply_json(reply, 200, json_pack("{s:o}", "settings", applied));
}

static void handle_drill(struct daemon *d, struct http_reply *reply)
{
    struct errmsg e = {{0}};
    json_t *stages = NULL;
    int r = daemon_drill(d, &stages, &e);
    if (r < 0)
        http_reply_error(reply, r == -EBUSY ? 409 : 500, "%s", e.text);
    else
        http_reply_json(reply, 200, json_pack("{s:o}", "stages", stages));
}

static void handle_events(struct daemon *d, const struct http_request *req,
                          struct http_reply *reply)
{
    const char *limit_s = http_request_query(req, "limit");
    long limit = 0;
    if (limit_s) {
        char *end;
        limit = strtol(limit_s, &end, 10);
        if (*limit_s == '\0' || *end != '\0' || limit < 0) {
            http_reply_error(reply, 400, "limit '%s' is not a count", limit_s);
            return;
        }
    }
    json_t *events = eventlog_to_json(daemon_events(d), (size_t)limit);
    http_reply_json(reply, 200, json_pack("{s:o}", "events", events ? events : json_array()));
}

static void method_not_allowed(struct http_reply *reply, const char *allow)
{
    http_reply_error(reply, 405, "method not allowed; use %s", allow);
    http_reply_header(reply, "Allow", allow);
}

static bool is_method(const struct http_request *req, const char *m)
{
    return strcmp(req->method, m) == 0 || (strcmp(m, "GET") == 0 && !strcmp(req->method, "HEAD"));
}

static int audit(struct daemon *d, const struct http_request *req, json_t *body, unsigned status,
                 const char *outcome)
{
    if (!daemon_audit(d))
        return -EBADF; /* the log could not be opened at start; already reported then */
    int r = audit_record(daemon_audit(d), req->peer.uid, req->peer.gid, req->peer.pid, req->method,
                         req->path, body, status, outcome);
    if (r < 0)
        log_error_errno(r, "Cannot write the audit log");
    return r;
}

/* Writes: authorisation, the audit record, body parsing and dispatch. */
static void handle_write(struct daemon *d, const struct http_request *req, struct http_reply *reply)
{
    json_error_t jerr;
    bool is_drill = strcmp(req->path, "/v1/drill") == 0;
    /* Refused before the body is even parsed; the record of a refusal leaves the body out, so
     * anyone may knock but nobody can fill the log with what they send. */
    if (!daemon_may_write(d, req->peer.uid, req->peer.gid)) {
        const char *group = daemon_admin_group(d);
        http_reply_error(reply, 403, "uid %u may not change the controller; %s%s%s",
                         (unsigned)req->peer.uid, group ? "members of group '" : "only root may",
                         group ? group : "", group ? "' and root may" : "");
        audit(d, req, NULL, reply->status, "denied");
        return;
    }
    json_t *body =
        is_drill ? NULL : json_loadb(req->body ? req->body : "", req->body_len, 0, &jerr);
    /* Fail closed: a change that cannot be recorded (full disk, log removed) is not made. */
    if (audit(d, req, body, 0, "requested") < 0) {
        http_reply_error(reply, 503, "the audit log cannot be written; nothing was changed");
        json_decref(body);
        return;
    }
    if (is_drill)
        handle_drill(d, reply);
    else if (!body)
        http_reply_error(reply, 400, "the body is not JSON: %s", jerr.text);
    else
        handle_settings_put(d, body, reply);
    audit(d, req, body, reply->status, reply->status == 200 ? "applied" : "failed");
    json_decref(body);
}

void api_handle(const struct http_request *req, struct http_reply *reply, void *userdata)
{
    struct daemon *d = userdata;
    const char *path = req->path;
    if (strcmp(path, "/v1/status") == 0) {
        if (!is_method(req, "GET"))
            return method_not_allowed(reply, "GET");
        struct coold_view v;
        daemon_view(d, &v);
        http_reply_json(reply, 200, api_status_json(&v));
    } else if (strcmp(path, "/v1/settings") == 0) {
        if (is_method(req, "GET"))
            handle_settings_get(d, NULL, reply);
        else if (is_method(req, "PUT"))
            handle_write(d, req, reply);
        else
            method_not_allowed(reply, "GET, PUT");
    } else if (strncmp(path, SETTINGS_PREFIX, strlen(SETTINGS_PREFIX)) == 0) {
        if (!is_method(req, "GET"))
            return method_not_allowed(reply, "GET");
        handle_settings_get(d, path + strlen(SETTINGS_PREFIX), reply);
    } else if (strcmp(path, "/v1/events") == 0) {
        if (!is_method(req, "GET"))
            return method_not_allowed(reply, "GET");
        handle_events(d, req, reply);
    } else if (strcmp(path, "/v1/drill") == 0) {
        if (!is_method(req, "POST"))
            return method_not_allowed(reply, "POST");
        handle_write(d, req, reply);
    } else {
        http_reply_error(reply, 404, "no such resource '%s'", path);
    }
}

void api_handle_metrics(const struct http_request *req, struct http_reply *reply, void *userdata)
{
    struct daemon *d = userdata;
    if (strcmp(req->path, "/metrics") != 0) {
        http_reply_error(reply, 404, "no such resource '%s'; metrics are at /metrics", req->path);
        return;
    }
    if (!is_method(req, "GET"))
        return method_not_allowed(reply, "GET");
    struct coold_view v;
    daemon_view(d, &v);
    enum prom_format format = prom_format_from_accept(http_request_header(req, "Accept"));
    char *text = NULL;
    size_t len = 0;
    int r = metrics_render(&v, format, &text, &len);
    if (r < 0) {
        http_reply_error(reply, 500, "cannot render metrics: %s", strerror(-r));
        return;
    }
    http_reply_take(reply, 200, prom_content_type(format), text, len, true);
}
