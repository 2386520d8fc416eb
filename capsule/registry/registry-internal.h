/* What registry.c and registry-auth.c share: the client's state and the request helpers. Not
 * for use outside the registry client. */
#pragma once

#include <pthread.h>
#include <stdatomic.h>
#include <stdbool.h>
#include <stdint.h>

#include "capsule/image/creds.h"
#include "lib/http-client.h"
#include "capsule/registry/registry.h"
#include "lib/strv.h"

/* Bearer tokens kept per client: one per scope; a pull needs one scope, a few at most. */
#define REG_TOKENS_MAX 8

struct reg_token {
    char *scope;
    char *header;       /* "Authorization: Bearer ..." */
    int64_t expires_ms; /* CLOCK_MONOTONIC, with a safety margin taken off */
};

struct registry {
    char *registry; /* as the reference names it: credentials are looked up under this */
    char *api_host; /* host[:port] requests go to */
    char *repository;
    char *user; /* enroot's USER@, or NULL */
    char *name; /* "registry/repository", for messages */
    char *netrc_path, *docker_config_path, *ca_file;
    char *config_name; /* for messages: never NULL */
    char **insecure;
    unsigned retries;
    long connect_timeout_ms, stall_timeout_s;
    bool http_allowed;
    atomic_bool cancelled;
    const atomic_bool *cancel; /* registry_opts.cancel */
    /* The registry has answered 2xx to fixed_header: a later 401 means it expired. */
    atomic_bool fixed_accepted;

    /* Everything below is guarded by lock. */
    pthread_mutex_t lock;
    bool lock_init;
    char *base_url; /* "https://host[:port]" once a ping settled the scheme */
    bool creds_loaded, have_creds;
    struct creds creds;
    char *basic_header; /* set once the registry asked for Basic auth */
    char *fixed_header; /* registry_opts.authorization: the only credentials sent */
    char *scope;        /* the scope of the last Bearer challenge */
    struct reg_token tokens[REG_TOKENS_MAX];
    size_t n_tokens;
    unsigned auth_gen; /* bumped whenever the credentials sent change */
};

/* One request to the registry. */
struct reg_request {
    const char *method; /* NULL: GET */
    const char *what;   /* "registry/repo:tag" or "...@digest", for messages */
    const char *path;   /* "/v2/..." */
    const char *accept;
    const char *range; /* a whole "Range: bytes=N-" header line, or NULL */
    long timeout_ms;
    size_t max_body;
    bool follow_redirects;
    http_sink_fn sink;
    void *sink_userdata;
};

bool registry_host_listed(const struct registry *r, const char *hostport);
bool registry_transient_errno(int r);
bool registry_transient_status(long status);
/* Sleeps before retry number attempt (>= 1), honouring Retry-After in resp (may be NULL).
 * Returns 0 or -ECANCELED. */
int registry_backoff(struct registry *r, unsigned attempt, const struct http_response *resp);
/* Settles HTTPS or HTTP with a ping of /v2/ on first use. */
int registry_ensure_base(struct registry *r, struct errmsg *e);
/* One exchange with the current credentials; *ret_auth_gen tells registry_authorize which
 * credentials it carried. Transport errors only; any status is returned in *resp. */
int registry_attempt(struct registry *r, const struct reg_request *q, struct http_response *resp,
                     unsigned *ret_auth_gen, struct errmsg *e);
/* The error for a final non-2xx status: -ENOENT, -EACCES or -EIO with the registry's code. */
int registry_status_error(struct registry *r, const char *what, const struct http_response *resp,
                          struct errmsg *e);

/* registry-auth.c */

void registry_auth_done(struct registry *r);
/* The Authorization header line to send now (malloc'd), or NULL when there is none yet. */
int registry_auth_header(struct registry *r, char **ret, unsigned *ret_auth_gen);
/* Answers a 401: reads its challenge, then fetches a token or takes Basic credentials. Returns
 * 0 when the request should be sent again, or -EACCES/-EPROTO/... with a message. */
int registry_authorize(struct registry *r, const char *what, const struct http_response *resp,
                       unsigned sent_gen, struct errmsg *e);
/* -EACCES with a message saying whether credentials were found (where) or rejected. */
int registry_access_denied(struct registry *r, const char *what, long status, struct errmsg *e);

/* Whether registry_cancel() or the caller's flag (registry_opts.cancel) asked to stop. */
static inline bool registry_cancelled(const struct registry *r)
{
    return atomic_load(&r->cancelled) || (r->cancel && atomic_load(r->cancel));
}
