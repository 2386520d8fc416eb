/* capsule's side of the node cache: a pull whose layers the node's service (capsule-cached)
 * fetches and unpacks once for every user, with the requester's own registry credentials. The
 * user's capsule resolves the reference and fetches manifest and config itself (which proves the
 * user may pull the image), then hands the service the manifest's digest and its credentials;
 * the image record in the user's own store keeps the directories the service answers. */
#pragma once

#include "capsule/registry/pull.h"

/* A pull_opts.layer_source: userdata is the service's socket path (const char *). Errors:
 * -ECONNREFUSED/-ENOENT "node cache at SOCKET: …" when the service is not there, the service's
 * own message (prefixed "node cache: ") for a refused request, -EPROTO for an answer that does
 * not fit the manifest. */
int node_layer_source(void *userdata, struct registry *reg, const char *image_name,
                      const char *manifest_digest, const struct manifest *m, char ***ret_paths,
                      struct errmsg *e);
