/* capsule/launch's image resolution: the pull policies, as `run --pull` and the Slurm plugin
 * use them, with the pull itself a callback (a fake one here that saves a record). */
#include <errno.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#include <cmocka.h>

#include "test-main.h"

#include "capsule/image/digest.h"
#include "capsule/launch.h"
#include "lib/rm-tree.h"
#include "capsule/store/store.h"

#define CONFIG "sha256:feed000000000000000000000000000000000000000000000000000000000000"

struct ctx {
    char base[64];
    struct store *s;
    int pulls;
    char pulled[256];
    int pull_result;
};

static int setup(void **state)
{
    struct ctx *c = calloc(1, sizeof(*c));
    snprintf(c->base, sizeof(c->base), "/tmp/test-launch.XXXXXX");
    if (!mkdtemp(c->base))
        return -1;
    struct errmsg e = {""};
    if (store_open(c->base, &c->s, &e) < 0)
        return -1;
    *state = c;
    return 0;
}

static int teardown(void **state)
{
    struct ctx *c = *state;
    store_free(c->s);
    int r = rm_tree(c->base);
    free(c);
    return r;
}

static void save(struct store *s, const char *name)
{
    char d[DIGEST_STRING_MAX];
    digest_sha256(name, strlen(name), d);
    char *layers[] = {NULL};
    struct image_record r = {.name = (char *)name,
                             .manifest_digest = d,
                             .config_digest = CONFIG,
                             .layers = layers,
                             .size = 1,
                             .pulled_at = 1700000000};
    struct errmsg e = {""};
    assert_int_equal(store_image_save(s, &r, &e), 0);
}

/* The fake pull: remembers what it was asked for and, when it succeeds, caches that name. */
static int fake_pull(void *userdata, const char *name, const char *file)
{
    struct ctx *c = userdata;
    c->pulls++;
    snprintf(c->pulled, sizeof(c->pulled), "%s", name);
    if (c->pull_result == 0)
        save(c->s, name);
    return c->pull_result;
}

static void test_policies(void **state)
{
    struct ctx *c = *state;
    struct image_record r = {0};
    struct errmsg e = {""};
    /* never: what is not cached is an error that says how to get it, and nothing is pulled. */
    assert_int_equal(launch_resolve_image(c->s, "ubuntu", LAUNCH_PULL_NEVER, fake_pull, c, &r, &e),
                     -ENOENT);
    assert_string_equal(e.text, "image 'docker.io/library/ubuntu:latest' is not in the cache; "
                                "capsule pull docker.io/library/ubuntu:latest");
    assert_int_equal(c->pulls, 0);
    /* missing: pulled once by its canonical name, then found without a pull. */
    assert_int_equal(
        launch_resolve_image(c->s, "ubuntu", LAUNCH_PULL_MISSING, fake_pull, c, &r, &e), 0);
    assert_string_equal(c->pulled, "docker.io/library/ubuntu:latest");
    assert_string_equal(r.name, "docker.io/library/ubuntu:latest");
    image_record_done(&r);
    assert_int_equal(
        launch_resolve_image(c->s, "ubuntu:latest", LAUNCH_PULL_MISSING, fake_pull, c, &r, &e), 0);
    image_record_done(&r);
    assert_int_equal(c->pulls, 1);
    /* An ID prefix of a cached image: found, never pulled. */
    assert_int_equal(
        launch_resolve_image(c->s, "feed00", LAUNCH_PULL_MISSING, fake_pull, c, &r, &e), 0);
    assert_string_equal(r.name, "docker.io/library/ubuntu:latest");
    image_record_done(&r);
    assert_int_equal(c->pulls, 1);
    /* always: pulled again although cached. */
    assert_int_equal(launch_resolve_image(c->s, "ubuntu", LAUNCH_PULL_ALWAYS, fake_pull, c, &r, &e),
                     0);
    image_record_done(&r);
    assert_int_equal(c->pulls, 2);
    /* A failed pull is said as such. */
    c->pull_result = 1;
    assert_int_equal(
        launch_resolve_image(c->s, "debian:12", LAUNCH_PULL_MISSING, fake_pull, c, &r, &e),
        -ENOENT);
    assert_string_equal(e.text, "cannot run 'docker.io/library/debian:12': the pull failed");
    /* Not a reference at all: refused before any pull. */
    assert_int_equal(
        launch_resolve_image(c->s, "Bad//Name", LAUNCH_PULL_MISSING, fake_pull, c, &r, &e),
        -EINVAL);
    assert_int_equal(c->pulls, 3);
}

/* An image from the node cache whose layers the service has since evicted: "missing" pulls it
 * again (the service fetches it anew); "never" leaves it to the start to say so. */
static void test_node_layers_gone(void **state)
{
    struct ctx *c = *state;
    char layer[128], d[DIGEST_STRING_MAX];
    snprintf(layer, sizeof(layer), "%s/node-layer", c->base);
    assert_int_equal(mkdir(layer, 0755), 0);
    const char *name = "registry.example/app:1";
    digest_sha256(name, strlen(name), d);
    char *layers[] = {d, NULL}, *paths[] = {layer, NULL};
    struct image_record rec = {.name = (char *)name,
                               .manifest_digest = d,
                               .config_digest = CONFIG,
                               .layers = layers,
                               .n_layers = 1,
                               .layer_paths = paths,
                               .size = 1,
                               .pulled_at = 1700000000};
    struct errmsg e = {""};
    assert_int_equal(store_image_save(c->s, &rec, &e), 0);
    struct image_record r = {0};
    assert_int_equal(launch_resolve_image(c->s, name, LAUNCH_PULL_MISSING, fake_pull, c, &r, &e),
                     0);
    assert_non_null(r.layer_paths);
    image_record_done(&r);
    assert_int_equal(c->pulls, 0);

    assert_int_equal(rmdir(layer), 0);
    assert_int_equal(launch_resolve_image(c->s, name, LAUNCH_PULL_NEVER, fake_pull, c, &r, &e), 0);
    image_record_done(&r);
    assert_int_equal(c->pulls, 0);
    /* By ID, that one image: the start says it is gone rather than pull another. */
    char id[16];
    snprintf(id, sizeof(id), "%.12s", digest_hex(CONFIG));
    assert_int_equal(launch_resolve_image(c->s, id, LAUNCH_PULL_MISSING, fake_pull, c, &r, &e), 0);
    image_record_done(&r);
    assert_int_equal(c->pulls, 0);
    assert_int_equal(launch_resolve_image(c->s, name, LAUNCH_PULL_MISSING, fake_pull, c, &r, &e),
                     0);
    assert_int_equal(c->pulls, 1);
    assert_string_equal(c->pulled, name);
    assert_null(r.layer_paths); /* the fake pull's new record */
    image_record_done(&r);
}

static void test_policy_names(void **state)
{
    enum launch_pull_policy p;
    assert_int_equal(launch_pull_policy_parse("never", &p), 0);
    assert_int_equal(p, LAUNCH_PULL_NEVER);
    assert_int_equal(launch_pull_policy_parse("always", &p), 0);
    assert_int_equal(p, LAUNCH_PULL_ALWAYS);
    assert_int_equal(launch_pull_policy_parse("missing", &p), 0);
    assert_int_equal(p, LAUNCH_PULL_MISSING);
    assert_int_equal(launch_pull_policy_parse("sometimes", &p), -EINVAL);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test_setup_teardown(test_policies, setup, teardown),
        cmocka_unit_test_setup_teardown(test_node_layers_gone, setup, teardown),
        cmocka_unit_test(test_policy_names),
    };
    return test_run_cases(tests);
}
