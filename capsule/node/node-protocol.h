/* The node cache's protocol between capsule (as the user) and capsule-cached, HTTP+JSON over the
 * service's Unix socket (docs/capsule.md, "The node cache"). Written once here, since both sides
 * read and write it.
 *
 *   POST /v1/pull   {"image": "REGISTRY/REPOSITORY@sha256:…",   (the platform manifest)
 *                    "authorization": "Bearer …" | "Basic …"}    (optional: the requester's own
 *                                                                 registry credentials)
 *     200 {"image": NAME, "manifest_digest": D, "config_digest": D,
 *          "layers": [{"digest": D, "path": "/var/cache/capsule/layers/HEX"}, …]}
 *     401 {"error": …}  the registry stopped taking the token the service had: ask again with a
 *                       new one (what was fetched stays)
 *     421 {"error": …}  a registry the service does not take (plain HTTP its administrator has
 *                       not listed, or TLS it cannot check): the requester pulls it alone
 *     503 {"error": …}  the service makes way for a new key: ask again
 *     4xx/5xx {"error": "what went wrong, naming the image or layer"}
 *   GET /v1/images  (everyone) [{"image", "size", "layers", "pulled_at", "last_used", "users"}, …]
 *   POST /v1/gc[?rekey]  (root and the admin group) {"removed_layers", "freed_bytes",
 *                   "busy_layers", "renamed_layers"}; with rekey, a new node key first, so that
 *                   every path handed out before leads nowhere
 *   GET /metrics    Prometheus text
 *
 * The credentials live in the service only for the request that carries them. */
#pragma once

#include <jansson.h>
#include <stdbool.h>
#include <stddef.h>

#include "capsule/image/manifest.h"
#include "capsule/image/ref.h"
#include "lib/errmsg.h"

#define NODE_PULL_PATH   "/v1/pull"
#define NODE_IMAGES_PATH "/v1/images"
#define NODE_GC_PATH     "/v1/gc"
/* The largest authorization value accepted: registry tokens are JWTs of a few KiB. */
#define NODE_AUTH_MAX         (16u * 1024u)
#define NODE_STATUS_EXPIRED   401
#define NODE_STATUS_NOT_TAKEN 421
#define NODE_STATUS_AGAIN     503

/* Whether s is an authorization value the service may send as a header: "Bearer " or "Basic "
 * followed by printable ASCII without blanks, at most NODE_AUTH_MAX bytes. */
bool node_authorization_valid(const char *s);

/* Whether path can be a node cache layer directory handed to fuse-overlayfs: absolute, no "..",
 * and none of the characters its lowerdir list splits or escapes on (':', ',', '\\'). */
bool node_layer_path_valid(const char *path);

/* The service's side: a POST /v1/pull body. Fills *ref (an image by digest, without tag) and
 * *ret_auth (the header line "Authorization: ...", malloc'd, or NULL without one). -EINVAL with
 * a message saying what is wrong, -ENOMEM. The body's copy of the credentials is wiped. */
int node_pull_request_parse(const char *body, size_t len, struct image_ref *ref, char **ret_auth,
                            struct errmsg *e);

/* capsule's side: the layer directories of a 200 answer to POST /v1/pull, in the manifest's
 * order, each for the digest the manifest names there (NULL-terminated, malloc'd). -EPROTO with a
 * message for an answer that does not fit m, -ENOMEM. */
int node_pull_answer_paths(json_t *answer, const struct manifest *m, char ***ret, struct errmsg *e);
