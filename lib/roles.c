#include "lib/roles.h"

#include <errno.h>
#include <grp.h>
#include <pwd.h>
#include <stdlib.h>
#include <string.h>

#include "lib/macro.h"

int roles_init(struct roles *r, const char *admin_group, struct errmsg *e)
{
    *r = (struct roles){0};
    if (!admin_group || !*admin_group)
        return 0;
    struct group gr, *found = NULL;
    char scratch[4096];
    if (getgrnam_r(admin_group, &gr, scratch, sizeof(scratch), &found) != 0 || !found)
        return 1;
    r->admin_group = strdup(admin_group);
    if (!r->admin_group)
        return errmsg_set(e, -ENOMEM, "out of memory");
    r->has_admin_gid = true;
    r->admin_gid = found->gr_gid;
    return 0;
}

void roles_done(struct roles *r)
{
    free(r->admin_group);
    *r = (struct roles){0};
}

bool roles_is_admin(const struct roles *r, uid_t uid, gid_t gid)
{
    if (uid == 0)
        return true;
    if (!r->has_admin_gid)
        return false;
    if (gid == r->admin_gid)
        return true;
    struct passwd pw, *found = NULL;
    char scratch[2048];
    if (getpwuid_r(uid, &pw, scratch, sizeof(scratch), &found) != 0 || !found)
        return false;
    gid_t groups[256];
    int n = ELEMENTSOF(groups);
    if (getgrouplist(found->pw_name, found->pw_gid, groups, &n) < 0)
        return false;
    for (int i = 0; i < n; i++)
        if (groups[i] == r->admin_gid)
            return true;
    return false;
}

const char *roles_admin_group(const struct roles *r)
{
    return r->has_admin_gid ? r->admin_group : NULL;
}
