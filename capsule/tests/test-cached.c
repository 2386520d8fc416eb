/* Tests for capsule-cached's logic without the program: its config file (defaults, values,
 * errors naming file and line) and who used which image (kept across a restart in uses.json,
 * a damaged file forgotten, each user's share for max_user_size). */
#include <errno.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cmocka.h>

#include "capsule/cached/cached.h"
#include "capsule/image/digest.h"
#include "lib/rm-tree.h"

struct ctx {
    char dir[64];
    char conf[128];
};

static int setup(void **state)
{
    struct ctx *c = calloc(1, sizeof(*c));
    snprintf(c->dir, sizeof(c->dir), "/tmp/test-cached.XXXXXX");
    if (!c || !mkdtemp(c->dir))
        return -1;
    snprintf(c->conf, sizeof(c->conf), "%s/cached.conf", c->dir);
    *state = c;
    return 0;
}

static int teardown(void **state)
{
    struct ctx *c = *state;
    int r = rm_tree(c->dir);
    free(c);
    return r;
}

static void write_conf(const struct ctx *c, const char *text)
{
    FILE *f = fopen(c->conf, "w");
    assert_non_null(f);
    fputs(text, f);
    fclose(f);
}

static void test_config_values(void **state)
{
    struct ctx *c = *state;
    write_conf(c, "[cache]\n"
                  "dir = /srv/cache\n"
                  "insecure_registries = reg.lan:5000 127.0.0.1:5000\n"
                  "parallel_downloads = 8\n"
                  "max_size = 500G\n"
                  "max_user_size = 50G\n");
    struct cached_config cfg;
    struct errmsg e = {{0}};
    assert_int_equal(cached_config_load(c->conf, &cfg, &e), 0);
    assert_string_equal(cfg.dir, "/srv/cache");
    assert_string_equal(cfg.socket, CACHED_SOCKET_DEFAULT);
    assert_string_equal(cfg.insecure[0], "reg.lan:5000");
    assert_string_equal(cfg.insecure[1], "127.0.0.1:5000");
    assert_null(cfg.insecure[2]);
    assert_int_equal(cfg.parallel, 8);
    assert_true(cfg.max_size == 500ull << 30);
    assert_true(cfg.max_user_size == 50ull << 30);
    cached_config_done(&cfg);
}

static void expect_error(struct ctx *c, const char *text, const char *want)
{
    write_conf(c, text);
    struct cached_config cfg;
    struct errmsg e = {{0}};
    assert_true(cached_config_load(c->conf, &cfg, &e) < 0);
    if (!strstr(e.text, want))
        fail_msg("'%s' does not say '%s'", e.text, want);
}

static void test_config_errors(void **state)
{
    struct ctx *c = *state;
    expect_error(c, "[cache]\nmax_user_size = lots\n", "cached.conf:2");
    expect_error(c, "[cache]\n\ndir = var/cache\n",
                 "cached.conf:3: [cache] dir: 'var/cache' is "
                 "not an absolute path");
    expect_error(c, "[cache]\nmax_users = 1\n", "max_users");
    expect_error(c, "[cache]\nparallel_downloads = 33\n", "parallel_downloads");
    /* The default file may be missing; a file named on the command line must be there. */
    struct cached_config cfg;
    struct errmsg e = {{0}};
    char missing[160];
    snprintf(missing, sizeof(missing), "%s/none.conf", c->dir);
    assert_int_equal(cached_config_load(missing, &cfg, &e), -ENOENT);
}

/* A service over the test's node store, as capsule-cached's main makes it. */
static void open_service(struct ctx *c, struct cached_config *cfg, struct cached *svc)
{
    char store[128];
    snprintf(store, sizeof(store), "%s/node", c->dir);
    write_conf(c, "");
    struct errmsg e = {{0}};
    assert_int_equal(cached_config_load(c->conf, cfg, &e), 0);
    free(cfg->dir);
    cfg->dir = strdup(store);
    if (cached_init(svc, cfg, &e) < 0)
        fail_msg("cached_init: %s", e.text);
}

static void close_service(struct cached_config *cfg, struct cached *svc)
{
    cached_done(svc);
    cached_config_done(cfg);
}

static void save_record(struct cached *svc, const char *name, int64_t size)
{
    char d[DIGEST_STRING_MAX];
    digest_sha256(name, strlen(name), d);
    struct image_record r = {.name = (char *)name,
                             .manifest_digest = d,
                             .config_digest = d,
                             .size = size,
                             .pulled_at = 1700000000};
    struct errmsg e = {{0}};
    assert_int_equal(store_image_save(svc->store, &r, &e), 0);
}

static void test_uses_survive_a_restart(void **state)
{
    struct ctx *c = *state;
    struct cached_config cfg;
    struct cached svc;
    open_service(c, &cfg, &svc);
    save_record(&svc, "reg.lan/a:1", 1000);
    save_record(&svc, "reg.lan/b:1", 300);
    cached_note_use(&svc, "reg.lan/a:1", 1001);
    cached_note_use(&svc, "reg.lan/a:1", 1001);
    cached_note_use(&svc, "reg.lan/b:1", 1001);
    cached_note_use(&svc, "reg.lan/b:1", 1002);
    assert_int_equal(cached_users(&svc, "reg.lan/a:1"), 1);
    assert_int_equal(cached_users(&svc, "reg.lan/b:1"), 2);
    /* Only what 1001 alone uses counts against its share. */
    uint64_t bytes = 0;
    struct errmsg e = {{0}};
    assert_int_equal(cached_user_bytes(&svc, 1001, &bytes, &e), 0);
    assert_true(bytes == 1000);
    assert_int_equal(cached_user_bytes(&svc, 1002, &bytes, &e), 0);
    assert_true(bytes == 0);
    close_service(&cfg, &svc);

    char uses[160];
    snprintf(uses, sizeof(uses), "%s/node/uses.json", c->dir);
    struct stat st;
    assert_int_equal(stat(uses, &st), 0);
    assert_int_equal(st.st_mode & 07777, 0600);

    open_service(c, &cfg, &svc);
    assert_int_equal(cached_users(&svc, "reg.lan/b:1"), 2);
    struct image_record r = {.name = "reg.lan/a:1", .pulled_at = 5};
    assert_true(cached_last_use(&svc, &r) > 1700000000);
    /* An evicted image is forgotten, also by the next start. */
    cached_forget_use(&svc, "reg.lan/a:1");
    assert_int_equal(cached_users(&svc, "reg.lan/a:1"), 0);
    close_service(&cfg, &svc);
    open_service(c, &cfg, &svc);
    assert_int_equal(cached_users(&svc, "reg.lan/a:1"), 0);
    assert_int_equal(cached_users(&svc, "reg.lan/b:1"), 2);
    close_service(&cfg, &svc);
}

/* A user's share counts the images only they use and their pulls under way: pulls started at
 * once cannot each spend the same rest. */
static void test_share_counts_pulls_under_way(void **state)
{
    struct ctx *c = *state;
    struct cached_config cfg;
    struct cached svc;
    open_service(c, &cfg, &svc);
    cfg.max_user_size = 1000;
    save_record(&svc, "reg.lan/mine:1", 600);
    cached_note_use(&svc, "reg.lan/mine:1", 7);
    struct errmsg e = {{0}};
    assert_int_equal(cached_share_reserve(&svc, 7, 300, &e), 0);
    assert_int_equal(cached_share_reserve(&svc, 7, 200, &e), -EDQUOT);
    assert_non_null(strstr(e.text, "100 B of the share is left"));
    /* Another user's share is theirs. */
    assert_int_equal(cached_share_reserve(&svc, 8, 900, &e), 0);
    /* A pull with nothing to fetch costs nothing, even past the share. */
    assert_int_equal(cached_share_reserve(&svc, 7, 0, &e), 0);
    cached_share_release(&svc, 7, 300);
    assert_int_equal(cached_share_reserve(&svc, 7, 200, &e), 0);
    close_service(&cfg, &svc);
}

static void test_damaged_uses_are_forgotten(void **state)
{
    struct ctx *c = *state;
    static const char *const damaged[] = {
        "{\"a\": ",
        "[]",
        "{\"a\": {\"last_used\": 1, \"uids\": [-1]}}",
        "{\"a\": {\"last_used\": \"x\", \"uids\": []}}",
        "{\"a\": {\"last_used\": 1, \"uids\": [4294967296]}}",
        /* Good before the damage: forgotten too. */
        "{\"a\": {\"last_used\": 1, \"uids\": [5]}, \"b\": {\"uids\": 3}}",
    };
    char node[128], uses[160];
    snprintf(node, sizeof(node), "%s/node", c->dir);
    snprintf(uses, sizeof(uses), "%s/uses.json", node);
    for (size_t i = 0; i < sizeof(damaged) / sizeof(damaged[0]); i++) {
        struct cached_config cfg;
        struct cached svc;
        open_service(c, &cfg, &svc); /* makes the store */
        close_service(&cfg, &svc);
        FILE *f = fopen(uses, "w");
        assert_non_null(f);
        fputs(damaged[i], f);
        fclose(f);
        open_service(c, &cfg, &svc);
        assert_int_equal(cached_users(&svc, "a"), 0);
        cached_note_use(&svc, "a", 7);
        assert_int_equal(cached_users(&svc, "a"), 1);
        close_service(&cfg, &svc);
    }
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test_setup_teardown(test_config_values, setup, teardown),
        cmocka_unit_test_setup_teardown(test_config_errors, setup, teardown),
        cmocka_unit_test_setup_teardown(test_uses_survive_a_restart, setup, teardown),
        cmocka_unit_test_setup_teardown(test_damaged_uses_are_forgotten, setup, teardown),
        cmocka_unit_test_setup_teardown(test_share_counts_pulls_under_way, setup, teardown),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
