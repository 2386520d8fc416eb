/* lib/roles: root, the admin group as primary or supplementary group, and nobody else. */
#include <errno.h>
#include <grp.h>
#include <pwd.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <unistd.h>

#include <cmocka.h>

#include "test-main.h"

#include "lib/roles.h"

static void test_roles(void **state)
{
    struct roles r;
    struct errmsg e = {{0}};
    /* No admin group: root only. */
    assert_int_equal(roles_init(&r, NULL, &e), 0);
    assert_true(roles_is_admin(&r, 0, 0));
    assert_false(roles_is_admin(&r, 1000, 1000));
    assert_null(roles_admin_group(&r));
    roles_done(&r);
    /* A group that does not exist: root only, said to the caller. */
    assert_int_equal(roles_init(&r, "no-such-group-gpunode", &e), 1);
    assert_false(roles_is_admin(&r, 1000, 1000));
    roles_done(&r);
    /* The "daemon" group (gid 1 on Debian): its gid as the peer's group admits; root's user
     * ("root", gid 0) is not a member, so a peer claiming uid 0 is admitted as root only. */
    struct group *g = getgrnam("daemon");
    assert_non_null(g);
    gid_t gid = g->gr_gid;
    assert_int_equal(roles_init(&r, "daemon", &e), 0);
    assert_string_equal(roles_admin_group(&r), "daemon");
    assert_true(roles_is_admin(&r, 4242, gid));
    assert_false(roles_is_admin(&r, 4242, gid + 1000));
    /* uid 1 (daemon) has the group as its primary one in /etc/passwd: a peer whose own gid is
     * another one is still a member through the user database. */
    struct passwd *pw = getpwuid(1);
    assert_non_null(pw);
    assert_int_equal(pw->pw_gid, gid);
    assert_true(roles_is_admin(&r, 1, 65534));
    roles_done(&r);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_roles),
    };
    return test_run_cases(tests);
}
