/* Registry mirrors (capsule.conf's registry_mirrors): "REGISTRY=URL" entries, e.g.
 *   registry_mirrors = docker.io=http://127.0.0.1:5000 nvcr.io=https://mirror.site
 * Compute nodes of most clusters reach no public registry: every pull of an image of REGISTRY
 * goes to its mirror first (a pull-through cache or a copy under the same repository names),
 * then to REGISTRY itself when the mirror fails. The image keeps the name the user wrote.
 * REGISTRY is matched as image references name it (Docker Hub's aliases index.docker.io and
 * registry-1.docker.io are docker.io); URL is http:// or https:// and a host[:port], nothing
 * more (no path, no user). */
#pragma once

#include "lib/errmsg.h"

/* 0 if entry is REGISTRY=URL as above, else -EINVAL with a message quoting it. */
int mirror_check(const char *entry, struct errmsg *e);

/* The mirror URL for registry among the entries (checked ones; NULL-terminated, may be NULL),
 * as written (it may end in '/'), pointing into the entry; NULL when there is none. */
const char *mirror_find(char *const *mirrors, const char *registry);
