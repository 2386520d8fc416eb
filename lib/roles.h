/* Who may change what through a daemon's control API: root, and the members of one admin group,
 * judged by the peer's credentials (SO_PEERCRED of the Unix socket, lib/http-server.h), never by
 * the socket file's mode. Every daemon of gpunode (coold, gpuqd) decides writes this way. */
#pragma once

#include <stdbool.h>
#include <sys/types.h>

#include "lib/errmsg.h"

struct roles {
    bool has_admin_gid;
    gid_t admin_gid;
    char *admin_group; /* the name, for messages; NULL without an admin group */
};

/* Looks the admin group up (NULL or "": root only). Returns 0, 1 when the group does not exist
 * (writes then stay root's, the safe side; the caller says so), or -ENOMEM. */
int roles_init(struct roles *r, const char *admin_group, struct errmsg *e);
void roles_done(struct roles *r);

/* Whether the peer is root or in the admin group, as its primary group or a supplementary one
 * (which SO_PEERCRED does not carry: the user is looked up). */
bool roles_is_admin(const struct roles *r, uid_t uid, gid_t gid);

/* The admin group's name, or NULL when only root may write. */
const char *roles_admin_group(const struct roles *r);
