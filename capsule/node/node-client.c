/* Asks capsule-cached for an image's layers (node-protocol.h) and checks its answer against the
 * manifest the user fetched. */
#include "capsule/node/node-client.h"

#include <errno.h>
#include <stdint.h>
#include <jansson.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "capsule/image/creds.h"
#include "capsule/node/node-protocol.h"
#include "lib/http-client.h"
#include "lib/log.h"
#include "lib/macro.h"
#include "lib/strv.h"

#define AUTH_PREFIX "Authorization: "
/* How long a pull waits for a connection the service would take. */
#define NODE_RETRY_MS (15u * 60u * 1000u)
/* How often a pull asks again with a new token after the registry stopped taking the last. */
#define NODE_TOKEN_ROUNDS 50u

/* "REGISTRY/REPOSITORY@DIGEST" for the manifest the user resolved. */
static int pinned_name(const char *image_name, const char *manifest_digest, char **ret,
                       struct errmsg *e)
{
    struct image_ref ref = {0};
    int r = image_ref_parse(image_name, &ref, e);
    if (r < 0)
        return r;
    free(ref.tag);
    free(ref.digest);
    ref.tag = NULL;
    ref.digest = strdup(manifest_digest);
    r = ref.digest && image_ref_format(&ref, ret) >= 0 ? 0
                                                       : errmsg_set(e, -ENOMEM, "out of memory");
    image_ref_done(&ref);
    return r;
}

static json_t *pull_request(struct registry *reg, const char *pinned)
{
    char *header = NULL;
    if (registry_authorization(reg, &header) < 0)
        return NULL;
    json_t *body = json_pack("{s:s}", "image", pinned);
    if (body && header && strncmp(header, AUTH_PREFIX, strlen(AUTH_PREFIX)) == 0 &&
        json_object_set_new(body, "authorization", json_string(header + strlen(AUTH_PREFIX))) < 0) {
        json_decref(body);
        body = NULL;
    }
    if (header) {
        explicit_bzero(header, strlen(header));
        free(header);
    }
    return body;
}

/* One pull request, again while the service closes the connection at once: it does that when this
 * user already holds its share of connections (a job array's tasks pulling at once), and when it
 * died and is being restarted; and again after a 503, while it makes way for a new key. */
static int ask_pull(const char *socket, json_t *body, long *status, json_t **answer,
                    struct errmsg *e)
{
    unsigned delay_ms = 250;
    for (uint64_t waited = 0;; waited += delay_ms) {
        /* No time limit: the service may be fetching twenty gigabytes for us and for others. */
        int r = http_request_json("POST", "http://localhost" NODE_PULL_PATH, socket, body, 0,
                                  status, answer, e);
        bool again = r == -ECONNRESET || (r >= 0 && *status == NODE_STATUS_AGAIN);
        if (!again || waited >= NODE_RETRY_MS)
            return r;
        if (r >= 0) {
            json_decref(*answer);
            *answer = NULL;
        }
        struct timespec ts = {delay_ms / 1000, (long)(delay_ms % 1000) * 1000000L};
        nanosleep(&ts, NULL);
        if (delay_ms < 4000)
            delay_ms *= 2;
    }
}

/* One request with the requester's current credentials, which go no further than the socket. */
static int ask_with_token(const char *socket, struct registry *reg, const char *pinned,
                          long *status, json_t **answer, struct errmsg *e)
{
    json_t *body = pull_request(reg, pinned);
    if (!body)
        return errmsg_set(e, -ENOMEM, "out of memory");
    int r = ask_pull(socket, body, status, answer, e);
    json_object_clear(body);
    json_decref(body);
    /* curl's words for a Unix socket that does not answer name a TCP port: say it plainly. */
    if (r < 0)
        return errmsg_set(e, r,
                          "node cache at %s: %s (is capsule-cached running? capsule check "
                          "tells)",
                          socket, strerror(-r));
    return 0;
}

/* Whether the registry client's credentials are still *last (then asking again is no use);
 * *last becomes them. */
static bool token_unchanged(struct registry *reg, char **last)
{
    char *now = NULL;
    if (registry_authorization(reg, &now) < 0)
        return true;
    bool same = now && *last ? strcmp(now, *last) == 0 : now == *last;
    creds_wipe_free(*last);
    *last = now;
    return same;
}

int node_layer_source(void *userdata, struct registry *reg, const char *image_name,
                      const char *manifest_digest, const struct manifest *m, char ***ret_paths,
                      struct errmsg *e)
{
    const char *socket = userdata;
    _cleanup_free_ char *pinned = NULL;
    int r = pinned_name(image_name, manifest_digest, &pinned, e);
    if (r < 0)
        return r;
    long status = 0;
    json_t *answer = NULL;
    char *last = NULL;
    (void)token_unchanged(reg, &last);
    for (unsigned round = 0;; round++) {
        r = ask_with_token(socket, reg, pinned, &status, &answer, e);
        if (r < 0)
            break;
        /* 401: the registry stopped taking the token while the service downloaded (a bearer
         * token often lives 5 minutes, a large image takes longer). Each round gets further:
         * what was fetched stays, downloads resume. A request of our own to the registry gets
         * the new token; without a new one, asking again is no use. */
        if (status != NODE_STATUS_EXPIRED || round >= NODE_TOKEN_ROUNDS)
            break;
        if ((r = registry_check_blob(reg, m->config.digest, e)) < 0 || token_unchanged(reg, &last))
            break;
        json_decref(answer);
        answer = NULL;
    }
    creds_wipe_free(last);
    if (r < 0) {
        json_decref(answer);
        return r;
    }
    const char *why = json_string_value(json_object_get(answer, "error"));
    /* A registry the service does not take (node-protocol.h): this user's own cache takes it. */
    if (status == NODE_STATUS_NOT_TAKEN) {
        log_warning("node cache: %s; pulling into your own cache", why ? why : "not taken");
        json_decref(answer);
        return 1;
    }
    if (status != 200) {
        r = errmsg_set(e,
                       status == 403 || status == 401 ? -EACCES
                       : status == 404                ? -ENOENT
                       : status == 507                ? -ENOSPC
                                                      : -EIO,
                       "node cache: %s", why ? why : "the service answered without a reason");
        json_decref(answer);
        return r;
    }
    r = node_pull_answer_paths(answer, m, ret_paths, e);
    json_decref(answer);
    return r;
}
