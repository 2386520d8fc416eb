/* The fake coold of fake-coold.h. Its settings behave like the controller's (the protocol
 * module's ctl_settings_apply, all or none, read back formatted as the controller reports them),
 * so a test sees the same answers coolctl will get from the real daemon. */
#include "fake-coold.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#define FAKE_FIELDS_MAX 32

static const char fake_status[] =
    "{\"controller\": {\"link\": \"up\", \"stale\": false, \"fw\": \"2.4.1\", \"model\": \"CT-4\","
    " \"serial\": \"CT4-000123\", \"pumps\": 2, \"sensors\": [\"inlet\", \"outlet\", \"tank\"],"
    " \"last_frame_age_seconds\": 0.4, \"reconnects\": 0, \"frames_rejected\": 0},"
    " \"telemetry\": {\"level\": \"normal\", \"reason\": \"none\", \"cut_in_seconds\": null,"
    " \"halt\": false, \"host\": \"ok\", \"flow_lpm\": 12.4, \"uptime_seconds\": 5124,"
    " \"temperatures\": [{\"sensor\": \"inlet\", \"celsius\": 31.2, \"fault\": false},"
    " {\"sensor\": \"outlet\", \"celsius\": 35.05, \"fault\": false},"
    " {\"sensor\": \"tank\", \"celsius\": null, \"fault\": true}],"
    " \"pumps\": [{\"pump\": 1, \"rpm\": 2410, \"duty\": 55}, {\"pump\": 2, \"rpm\": 2398,"
    " \"duty\": 55}]},"
    " \"safety\": {\"state\": \"normal\", \"since\": \"2026-11-29T23:59:00Z\"},"
    " \"shutdown\": {\"stage\": \"idle\", \"stage_number\": 0, \"drill\": false}}";

static const char fake_events[] =
    "{\"events\": [{\"time\": \"2026-11-29T23:59:00Z\", \"source\": \"daemon\", \"type\": "
    "\"link\", \"message\": \"controller link up\", \"fields\": {}}, {\"time\": "
    "\"2026-11-30T00:00:05.250Z\", \"source\": \"controller\", \"type\": \"ALARM\", \"message\": "
    "\"precritical: pump 2 stopped\", \"fields\": {\"pump\": 2}}]}";

static const char fake_drill[] =
    "{\"stages\": [{\"name\": \"announce\", \"ok\": true, \"seconds\": 0.01, \"detail\": \"\"},"
    " {\"name\": \"containers\", \"ok\": true, \"seconds\": 0.5, \"detail\": \"3 containers\"},"
    " {\"name\": \"wait\", \"ok\": true, \"seconds\": 0, \"detail\": \"\"},"
    " {\"name\": \"halt\", \"ok\": true, \"seconds\": 0.2, \"detail\": \"cut_in=60\"},"
    " {\"name\": \"command\", \"ok\": true, \"seconds\": 0, \"detail\": \"skipped (drill)\"}]}";

struct key_collect {
    const struct ctl_settings *s;
    json_t *out;
};

static void collect_key(const char *key, void *userdata)
{
    struct key_collect *k = userdata;
    char value[128];
    if (ctl_settings_get(k->s, key, value, sizeof(value)) >= 0)
        json_object_set_new(k->out, key, json_string(value));
}

static void reply_settings(struct fake_coold *f, struct http_reply *reply, const char *only)
{
    json_t *all = json_object();
    struct key_collect k = {.s = &f->settings, .out = all};
    ctl_settings_keys(&f->settings, collect_key, &k);
    if (only) {
        json_t *v = json_object_get(all, only);
        if (!v) {
            json_decref(all);
            http_reply_error(reply, 404, "no such setting '%s'", only);
            return;
        }
        json_t *one = json_pack("{sO}", only, v);
        json_decref(all);
        all = one;
    }
    http_reply_json(reply, 200, json_pack("{so}", "settings", all));
}

static void put_settings(struct fake_coold *f, const struct http_request *req,
                         struct http_reply *reply)
{
    f->n_puts++;
    json_decref(f->last_put);
    f->last_put = json_loadb(req->body, req->body_len, 0, NULL);
    json_t *s = json_object_get(f->last_put, "settings");
    struct ctl_field fields[FAKE_FIELDS_MAX];
    unsigned n = 0;
    const char *key;
    json_t *v;
    if (!json_is_object(s) || json_object_size(s) == 0 || json_object_size(s) > FAKE_FIELDS_MAX) {
        http_reply_error(reply, 400, "body must be {\"settings\": {...}}");
        return;
    }
    json_object_foreach(s, key, v) fields[n++] =
        (struct ctl_field){.key = key, .value = json_string_value(v)};

    char why[256];
    int r = ctl_settings_apply(&f->settings, fields, n, why, sizeof(why));
    if (r < 0) {
        http_reply_json(
            reply, 400,
            json_pack("{ss ss}", "error", why, "code", r == -CTL_E_BADKEY ? "badkey" : "badvalue"));
        return;
    }
    json_t *back = json_object();
    struct key_collect k = {.s = &f->settings, .out = back};
    json_object_foreach(s, key, v) collect_key(key, &k);
    http_reply_json(reply, 200, json_pack("{so}", "settings", back));
}

static void route(struct fake_coold *f, const struct http_request *req, struct http_reply *reply)
{
    bool get = strcmp(req->method, "GET") == 0;
    if (get && strcmp(req->path, "/v1/status") == 0)
        http_reply_json(reply, 200, json_deep_copy(f->status));
    else if (get && strcmp(req->path, "/v1/settings") == 0)
        reply_settings(f, reply, NULL);
    else if (get && strncmp(req->path, "/v1/settings/", 13) == 0)
        reply_settings(f, reply, req->path + 13);
    else if (strcmp(req->method, "PUT") == 0 && strcmp(req->path, "/v1/settings") == 0)
        put_settings(f, req, reply);
    else if (get && strcmp(req->path, "/v1/events") == 0) {
        const char *limit = http_request_query(req, "limit");
        snprintf(f->last_query_limit, sizeof(f->last_query_limit), "%s", limit ? limit : "");
        http_reply_json(reply, 200, json_deep_copy(f->events));
    } else if (strcmp(req->method, "POST") == 0 && strcmp(req->path, "/v1/drill") == 0) {
        f->n_posts++;
        http_reply_json(reply, 200, json_deep_copy(f->drill));
    } else
        http_reply_error(reply, 404, "no such resource %s %s", req->method, req->path);
}

static void fake_handler(const struct http_request *req, struct http_reply *reply, void *userdata)
{
    struct fake_coold *f = userdata;
    bool write = strcmp(req->method, "GET") != 0;
    pthread_mutex_lock(&f->lock);
    unsigned delay_ms = f->delay_ms;
    unsigned status = f->all_status ? f->all_status : write ? f->write_status : 0;
    f->n_requests++;
    if (status == 403 && f->group[0])
        http_reply_json(reply, 403, json_pack("{ss ss}", "error", f->message, "group", f->group));
    else if (status)
        http_reply_error(reply, status, "%s", f->message);
    else
        route(f, req, reply);
    pthread_mutex_unlock(&f->lock);
    if (delay_ms)
        usleep(delay_ms * 1000u);
}

int fake_coold_start(struct fake_coold *f)
{
    *f = (struct fake_coold){0};
    snprintf(f->dir, sizeof(f->dir), "/tmp/coolctl-test-XXXXXX");
    if (!mkdtemp(f->dir))
        return -errno;
    snprintf(f->socket, sizeof(f->socket), "%s/coold.sock", f->dir);
    pthread_mutex_init(&f->lock, NULL);
    ctl_settings_defaults(&f->settings, 2);
    f->status = json_loads(fake_status, 0, NULL);
    f->events = json_loads(fake_events, 0, NULL);
    f->drill = json_loads(fake_drill, 0, NULL);
    if (!f->status || !f->events || !f->drill)
        return -EINVAL;
    return http_server_new_unix(f->socket, 0666, fake_handler, f, &f->server, NULL);
}

void fake_coold_stop(struct fake_coold *f)
{
    http_server_free(f->server);
    f->server = NULL;
    json_decref(f->status);
    json_decref(f->events);
    json_decref(f->drill);
    json_decref(f->last_put);
    pthread_mutex_destroy(&f->lock);
    unlink(f->socket);
    rmdir(f->dir);
}
