/* Tests for capsule/image/manifest.c: manifests, indexes, platform selection and image configs. */
#include <dirent.h>
#include <errno.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>

#include "test-main.h"

#include "capsule/image/capsule-limits.h"
#include "test-skip.h"

#include "capsule/image/digest.h"
#include "capsule/image/manifest.h"

#define D1 "sha256:1111111111111111111111111111111111111111111111111111111111111111"
#define D2 "sha256:2222222222222222222222222222222222222222222222222222222222222222"
#define D3 "sha256:3333333333333333333333333333333333333333333333333333333333333333"

#define FOREIGN "application/vnd.docker.image.rootfs.foreign.diff.tar.gzip"

#define DESC(media, digest, size)                                                                  \
    "{\"mediaType\": \"" media "\", \"digest\": \"" digest "\", \"size\": " #size "}"

static int parse(const char *json, const char *content_type, struct manifest *m, struct errmsg *e)
{
    return manifest_parse(json, strlen(json), content_type, m, e);
}

/* Expects json to be refused with r and a message containing want. */
static void expect_refused(const char *json, const char *content_type, int r, const char *want)
{
    struct manifest m = {};
    struct errmsg e = {""};
    assert_int_equal(parse(json, content_type, &m, &e), r);
    if (!strstr(e.text, want))
        fail_msg("message '%s' lacks '%s'", e.text, want);
    assert_null(m.media_type);
}

/* Same for an OCI image manifest with a valid config and the given "layers" JSON. */
static void expect_layers_refused(const char *layers, int r, const char *want)
{
    char *json = NULL;
    assert_true(asprintf(&json, "{\"schemaVersion\": 2, \"config\": %s, \"layers\": %s}",
                         DESC(MEDIA_OCI_CONFIG, D1, 1), layers) > 0);
    expect_refused(json, NULL, r, want);
    free(json);
}

static const char docker_manifest[] =
    "{\"schemaVersion\": 2, \"mediaType\": \"" MEDIA_DOCKER_MANIFEST "\",\n"
    " \"config\": " DESC(MEDIA_DOCKER_CONFIG, D1,
                         1470) ",\n"
                               " \"layers\": [" DESC(MEDIA_DOCKER_LAYER, D2, 29534055) ", " DESC(
                                   MEDIA_DOCKER_LAYER, D3, 32) "]}";

static void test_docker_manifest(void **state)
{
    struct manifest m = {};
    struct errmsg e = {""};
    assert_int_equal(parse(docker_manifest, MEDIA_DOCKER_MANIFEST, &m, &e), 0);
    assert_int_equal(m.kind, MANIFEST_IMAGE);
    assert_string_equal(m.media_type, MEDIA_DOCKER_MANIFEST);
    assert_string_equal(m.config.digest, D1);
    assert_int_equal(m.config.size, 1470);
    assert_int_equal(m.n_layers, 2);
    assert_string_equal(m.layers[0].digest, D2); /* bottom layer first */
    assert_int_equal(m.layers[0].size, 29534055);
    assert_string_equal(m.layers[1].digest, D3);
    assert_int_equal(layer_compression_from_media_type(m.layers[0].media_type), LAYER_GZIP);
    assert_int_equal(m.n_manifests, 0);
    manifest_done(&m);
    manifest_done(&m);
}

static void test_oci_manifest_layer_types(void **state)
{
    const char *json =
        "{\"schemaVersion\": 2, \"config\": " DESC(MEDIA_OCI_CONFIG, D1, 7) ", \"layers\": [" DESC(
            MEDIA_OCI_LAYER_GZIP, D1, 1) "," DESC(MEDIA_OCI_LAYER_ZSTD, D2,
                                                  2) "," DESC(MEDIA_OCI_LAYER, D3, 0) "]}";
    struct manifest m = {};
    assert_int_equal(parse(json, "application/json", &m, NULL), 0);
    /* No mediaType and a generic Content-Type: the shape says it is an image manifest. */
    assert_int_equal(m.kind, MANIFEST_IMAGE);
    assert_string_equal(m.media_type, MEDIA_OCI_MANIFEST);
    assert_int_equal(layer_compression_from_media_type(m.layers[0].media_type), LAYER_GZIP);
    assert_int_equal(layer_compression_from_media_type(m.layers[1].media_type), LAYER_ZSTD);
    assert_int_equal(layer_compression_from_media_type(m.layers[2].media_type), LAYER_UNCOMPRESSED);
    assert_int_equal(m.layers[2].size, 0);
    manifest_done(&m);
    assert_int_equal(layer_compression_from_media_type("application/x-tar"), -ENOTSUP);
    assert_int_equal(layer_compression_from_media_type(NULL), -ENOTSUP);
}

static const char index_json[] =
    "{\"schemaVersion\": 2, \"manifests\": ["
    "{\"mediaType\": \"" MEDIA_OCI_MANIFEST "\", \"digest\": \"" D1 "\", \"size\": 1,"
    " \"platform\": {\"os\": \"unknown\", \"architecture\": \"unknown\"}},"
    "{\"mediaType\": \"" MEDIA_OCI_MANIFEST "\", \"digest\": \"" D2 "\", \"size\": 2,"
    " \"platform\": {\"os\": \"linux\", \"architecture\": \"arm64\", \"variant\": \"v8\"}},"
    "{\"mediaType\": \"" MEDIA_OCI_MANIFEST "\", \"digest\": \"" D3 "\", \"size\": 3,"
    " \"platform\": {\"os\": \"linux\", \"architecture\": \"arm\", \"variant\": \"v7\"}},"
    "{\"mediaType\": \"" MEDIA_OCI_MANIFEST "\", \"digest\": \"" D1 "\", \"size\": 4,"
    " \"platform\": {\"os\": \"linux\", \"architecture\": \"ppc64le\"}},"
    "{\"mediaType\": \"" MEDIA_OCI_MANIFEST "\", \"digest\": \"" D2 "\", \"size\": 5}"
    "]}";

static void test_index_select(void **state)
{
    struct manifest m = {};
    struct errmsg e = {""};
    const struct descriptor *d;

    /* The Content-Type decides when the document has no mediaType. */
    assert_int_equal(parse(index_json, MEDIA_OCI_INDEX "; charset=utf-8", &m, &e), 0);
    assert_int_equal(m.kind, MANIFEST_INDEX);
    assert_string_equal(m.media_type, MEDIA_OCI_INDEX);
    assert_int_equal(m.n_manifests, 5);
    assert_string_equal(m.manifests[4].os, ""); /* no platform */

    d = manifest_index_select(&m, "linux", "arm64", NULL, &e);
    assert_non_null(d);
    assert_int_equal(d->size, 2);
    /* arm64 is v8 whether or not the index says so. */
    assert_ptr_equal(manifest_index_select(&m, "linux", "arm64", "v8", &e), d);
    assert_ptr_equal(manifest_index_select(&m, "linux", "arm64", "", &e), d);
    d = manifest_index_select(&m, "linux", "arm", "v7", &e);
    assert_non_null(d);
    assert_int_equal(d->size, 3);
    assert_null(manifest_index_select(&m, "linux", "arm", "v6", &e));
    assert_string_equal(e.text, "no linux/arm/v6 image; the index has linux/arm64/v8, "
                                "linux/arm/v7, linux/ppc64le");

    /* The attestation (unknown/unknown) is neither chosen nor offered. */
    assert_null(manifest_index_select(&m, "linux", "amd64", NULL, &e));
    assert_string_equal(e.text, "no linux/amd64 image; the index has linux/arm64/v8, "
                                "linux/arm/v7, linux/ppc64le");
    assert_null(manifest_index_select(&m, "unknown", "unknown", NULL, &e));
    manifest_done(&m);

    /* An image manifest is not an index. */
    assert_int_equal(parse(docker_manifest, NULL, &m, &e), 0);
    assert_null(manifest_index_select(&m, "linux", "amd64", NULL, &e));
    manifest_done(&m);
}

static void test_index_first_match_wins(void **state)
{
    const char *json =
        "{\"schemaVersion\": 2, \"mediaType\": \"" MEDIA_DOCKER_LIST "\", \"manifests\": ["
        "{\"mediaType\": \"" MEDIA_DOCKER_MANIFEST "\", \"digest\": \"" D1 "\", \"size\": 1,"
        " \"platform\": {\"os\": \"windows\", \"architecture\": \"amd64\"}},"
        "{\"mediaType\": \"" MEDIA_DOCKER_MANIFEST "\", \"digest\": \"" D2 "\", \"size\": 2,"
        " \"platform\": {\"os\": \"linux\", \"architecture\": \"amd64\", \"variant\": \"v3\"}},"
        "{\"mediaType\": \"" MEDIA_DOCKER_MANIFEST "\", \"digest\": \"" D3 "\", \"size\": 3,"
        " \"platform\": {\"os\": \"linux\", \"architecture\": \"amd64\"}}]}";
    struct manifest m = {};
    struct errmsg e = {""};

    /* The Content-Type is only a hint: the document's mediaType decides. */
    assert_int_equal(parse(json, MEDIA_OCI_MANIFEST, &m, &e), 0);
    assert_int_equal(m.kind, MANIFEST_INDEX);
    assert_string_equal(m.media_type, MEDIA_DOCKER_LIST);
    assert_int_equal(manifest_index_select(&m, "linux", "amd64", NULL, &e)->size, 2);
    assert_int_equal(manifest_index_select(&m, "linux", "amd64", "", &e)->size, 3);
    assert_int_equal(manifest_index_select(&m, "windows", "amd64", NULL, &e)->size, 1);
    manifest_done(&m);

    const char *empty = "{\"schemaVersion\": 2, \"manifests\": []}";
    assert_int_equal(parse(empty, NULL, &m, &e), 0);
    assert_null(manifest_index_select(&m, "linux", "amd64", NULL, &e));
    assert_string_equal(e.text, "no linux/amd64 image; the index names no platforms");
    manifest_done(&m);
}

static void test_refused_kinds(void **state)
{
    expect_refused("{\"schemaVersion\": 1, \"name\": \"x\", \"fsLayers\": []}", NULL, -ENOTSUP,
                   "manifest: Docker schema 1 manifests are not supported");
    expect_refused("{\"schemaVersion\": 2}",
                   "application/vnd.docker.distribution.manifest.v1+prettyjws", -ENOTSUP,
                   "schema 1");
    expect_refused("{\"schemaVersion\": 3, \"layers\": []}", NULL, -ENOTSUP,
                   "schemaVersion: 3 is not supported");
    expect_refused("{\"layers\": []}", NULL, -EINVAL, "manifest: schemaVersion: missing");
    expect_refused("{\"schemaVersion\": 2, \"mediaType\": "
                   "\"application/vnd.oci.artifact.manifest.v1+json\"}",
                   NULL, -ENOTSUP,
                   "mediaType: 'application/vnd.oci.artifact.manifest.v1+json' is not an image "
                   "manifest or index");
    expect_refused("{\"schemaVersion\": 2, \"config\": " DESC(
                       "application/vnd.cncf.helm.config.v1+json", D1, 1) ", \"layers\": []}",
                   NULL, -ENOTSUP,
                   "config.mediaType: 'application/vnd.cncf.helm.config.v1+json' is not a "
                   "container image config");
    expect_layers_refused("[" DESC(MEDIA_DOCKER_LAYER, D2, 1) ", " DESC(FOREIGN, D3, 1) "]",
                          -ENOTSUP,
                          "manifest: layers[1].mediaType: '" FOREIGN "' is a foreign layer");
    expect_layers_refused("[" DESC(MEDIA_OCI_LAYER_GZIP "+encrypted", D3, 1) "]", -ENOTSUP,
                          "layers[0].mediaType: '" MEDIA_OCI_LAYER_GZIP "+encrypted' is an "
                          "encrypted layer");
}

static void test_field_errors(void **state)
{
    const char *layer = DESC(MEDIA_OCI_LAYER, D1, 1);
    char *four = NULL;
    assert_true(asprintf(&four, "[%s, %s, %s, %s]", layer, layer, layer,
                         DESC(MEDIA_OCI_LAYER, "sha256:12", 1)) > 0);
    expect_layers_refused(four, -EINVAL,
                          "manifest: layers[3].digest: 'sha256:12' is not a valid digest");
    free(four);
    expect_layers_refused("[" DESC(MEDIA_OCI_LAYER, D1, -1) "]", -EINVAL,
                          "manifest: layers[0].size: -1 is negative");
    expect_layers_refused("[" DESC(MEDIA_OCI_LAYER, D1, 1.5) "]", -EINVAL,
                          "layers[0].size: expected an integer, got a number");
    expect_layers_refused("[{\"mediaType\": \"" MEDIA_OCI_LAYER "\", \"digest\": \"" D1 "\"}]",
                          -EINVAL, "layers[0].size: missing");
    expect_layers_refused("[{\"mediaType\": 5, \"digest\": \"" D1 "\", \"size\": 1}]", -EINVAL,
                          "layers[0].mediaType: expected a string, got an integer");
    expect_layers_refused("[{\"mediaType\": \"" MEDIA_OCI_LAYER "\", \"size\": 1}]", -EINVAL,
                          "layers[0].digest: missing");
    expect_layers_refused("[\"" D1 "\"]", -EINVAL, "layers[0]: expected an object, got a string");
    expect_layers_refused("{}", -EINVAL, "layers: expected an array, got an object");
    expect_refused("{\"schemaVersion\": 2, \"config\": null, \"layers\": []}", NULL, -EINVAL,
                   "config: expected an object, got null");
    expect_refused("{\"schemaVersion\": 2, \"config\": " DESC(MEDIA_OCI_CONFIG, D1, 1) "}", NULL,
                   -EINVAL, "layers: missing");
    expect_refused("{\"schemaVersion\": \"2\"}", NULL, -EINVAL,
                   "schemaVersion: expected an integer, got a string");
    expect_refused("{\"schemaVersion\": 2, \"manifests\": [{\"mediaType\": \"" MEDIA_OCI_MANIFEST
                   "\", \"digest\": \"" D1 "\", \"size\": 1, \"platform\": \"linux/amd64\"}]}",
                   NULL, -EINVAL, "manifests[0].platform: expected an object, got a string");
    expect_refused("{\"schemaVersion\": 2, \"manifests\": [{\"mediaType\": \"" MEDIA_OCI_MANIFEST
                   "\", \"digest\": \"" D1 "\", \"size\": 1, \"platform\": {\"os\": 1}}]}",
                   NULL, -EINVAL, "manifests[0].platform.os: expected a string, got an integer");
    /* Values quoted in messages cannot carry terminal escapes. */
    expect_layers_refused("[" DESC(MEDIA_OCI_LAYER, "\\u001b[2J", 1) "]", -EINVAL,
                          "'?[2J' is not a valid digest");
}

static void test_bad_json(void **state)
{
    expect_refused("{\"schemaVersion\": 2,", NULL, -EINVAL, "manifest: not valid JSON");
    expect_refused("[1, 2]", NULL, -EINVAL, "manifest: expected a JSON object, got an array");
    expect_refused("{\"schemaVersion\": 2, \"schemaVersion\": 2}", NULL, -EINVAL,
                   "duplicate object key");
    expect_refused("", NULL, -EINVAL, "not valid JSON");

    struct manifest m = {};
    assert_int_equal(manifest_parse("{}", (size_t)5 << 20, NULL, &m, NULL), -EINVAL);
}

static void test_too_many_layers(void **state)
{
    size_t n = CAPSULE_LAYERS_MAX + 1, size = 200 + n * 200;
    char *json = malloc(size), *p = json;
    assert_non_null(json);
    p += sprintf(
        p, "{\"schemaVersion\": 2, \"config\": " DESC(MEDIA_OCI_CONFIG, D1, 1) ", \"layers\": [");
    for (size_t i = 0; i < n; i++)
        p += sprintf(p, "%s" DESC(MEDIA_OCI_LAYER_GZIP, D2, 1), i ? "," : "");
    strcpy(p, "]}");
    expect_refused(json, NULL, -EINVAL, "layers: 1025 entries; more than 1024 are refused");

    /* 1024 is still fine: deep images are real. */
    strcpy(strrchr(json, '{') - 1, "]}");
    struct manifest m = {};
    assert_int_equal(parse(json, NULL, &m, NULL), 0);
    assert_int_equal(m.n_layers, CAPSULE_LAYERS_MAX);
    manifest_done(&m);
    free(json);
}

/* --- image configs --- */

static int config(const char *json, struct image_config *c, struct errmsg *e)
{
    return image_config_parse(json, strlen(json), c, e);
}

#define ROOTFS "\"rootfs\": {\"type\": \"layers\", \"diff_ids\": [\"" D1 "\", \"" D2 "\"]}"

static void test_config_ubuntu(void **state)
{
    const char *json =
        "{\"architecture\": \"amd64\", \"os\": \"linux\", \"config\": {\"Hostname\": \"\","
        " \"User\": \"\", \"Env\": [\"PATH=/usr/local/sbin:/usr/bin:/bin\"], \"Cmd\": "
        "[\"/bin/bash\"], \"Image\": \"sha256:abc\", \"Volumes\": null, \"WorkingDir\": \"\","
        " \"Entrypoint\": null, \"OnBuild\": null, \"Labels\": {}},"
        " \"history\": [{\"created_by\": \"/bin/sh\"}], " ROOTFS "}";
    struct image_config c = {};
    struct errmsg e = {""};

    assert_int_equal(config(json, &c, &e), 0);
    assert_string_equal(c.architecture, "amd64");
    assert_string_equal(c.os, "linux");
    assert_string_equal(c.env[0], "PATH=/usr/local/sbin:/usr/bin:/bin");
    assert_null(c.env[1]);
    assert_null(c.entrypoint);
    assert_string_equal(c.cmd[0], "/bin/bash");
    assert_null(c.cmd[1]);
    assert_null(c.working_dir);
    assert_null(c.user);
    assert_int_equal(c.n_diff_ids, 2);
    assert_string_equal(c.diff_ids[0], D1);
    assert_string_equal(c.diff_ids[1], D2);
    assert_null(c.diff_ids[2]);
    image_config_done(&c);
    image_config_done(&c);
}

static void test_config_entrypoint_forms(void **state)
{
    struct image_config c = {};

    /* null, absent and [] all mean "none", as Docker reads them. */
    assert_int_equal(
        config("{\"config\": {\"Entrypoint\": [], \"Cmd\": []}, " ROOTFS "}", &c, NULL), 0);
    assert_null(c.entrypoint);
    assert_null(c.cmd);
    image_config_done(&c);
    assert_int_equal(config("{\"config\": {}, " ROOTFS "}", &c, NULL), 0);
    assert_null(c.entrypoint);
    assert_null(c.cmd);
    assert_non_null(c.env);
    assert_null(c.env[0]);
    assert_string_equal(c.architecture, "");
    image_config_done(&c);
    /* No "config" at all (a scratch image): everything empty, nothing NULL that must not be. */
    assert_int_equal(config("{" ROOTFS "}", &c, NULL), 0);
    assert_non_null(c.env);
    assert_null(c.env[0]);
    image_config_done(&c);
    assert_int_equal(config("{\"config\": null, " ROOTFS "}", &c, NULL), 0);
    image_config_done(&c);

    /* A string is a one-element list (Docker's strslice). */
    assert_int_equal(config("{\"config\": {\"Entrypoint\": [\"/opt/nvidia/nvidia_entrypoint.sh\"],"
                            " \"Cmd\": \"/bin/sh\", \"WorkingDir\": \"/workspace\", \"User\": "
                            "\"1000:1000\"}, " ROOTFS "}",
                            &c, NULL),
                     0);
    assert_string_equal(c.entrypoint[0], "/opt/nvidia/nvidia_entrypoint.sh");
    assert_null(c.entrypoint[1]);
    assert_string_equal(c.cmd[0], "/bin/sh");
    assert_null(c.cmd[1]);
    assert_string_equal(c.working_dir, "/workspace");
    assert_string_equal(c.user, "1000:1000");
    image_config_done(&c);
}

static void test_config_env(void **state)
{
    struct image_config c = {};
    /* Entries that set nothing are left out; values may contain '='. */
    assert_int_equal(config("{\"config\": {\"Env\": [\"A=1\", \"NOVALUE\", \"=x\", \"B=x=y\","
                            " \"C=\"]}, " ROOTFS "}",
                            &c, NULL),
                     0);
    assert_string_equal(c.env[0], "A=1");
    assert_string_equal(c.env[1], "B=x=y");
    assert_string_equal(c.env[2], "C=");
    assert_null(c.env[3]);
    image_config_done(&c);
}

static void expect_config_refused(const char *json, int r, const char *want)
{
    struct image_config c = {};
    struct errmsg e = {""};
    assert_int_equal(config(json, &c, &e), r);
    if (!strstr(e.text, want))
        fail_msg("message '%s' lacks '%s'", e.text, want);
}

static void test_config_errors(void **state)
{
    expect_config_refused("{\"config\": {\"Env\": [\"A=1\", \"B=2\", 3]}, " ROOTFS "}", -EINVAL,
                          "config: config.Env[2]: expected a string, got an integer");
    expect_config_refused("{\"config\": {\"Entrypoint\": {}}, " ROOTFS "}", -EINVAL,
                          "config.Entrypoint: expected an array of strings, got an object");
    expect_config_refused("{\"config\": {\"WorkingDir\": 7}, " ROOTFS "}", -EINVAL,
                          "config.WorkingDir: expected a string, got an integer");
    expect_config_refused("{\"config\": [], " ROOTFS "}", -EINVAL,
                          "config: config: expected an object, got an array");
    expect_config_refused("{\"config\": {}}", -EINVAL, "config: rootfs: missing");
    expect_config_refused("{\"rootfs\": {\"type\": \"layers\"}}", -EINVAL,
                          "rootfs.diff_ids: missing");
    expect_config_refused("{\"rootfs\": {\"type\": \"squashfs\", \"diff_ids\": []}}", -ENOTSUP,
                          "rootfs.type: 'squashfs' is not supported");
    expect_config_refused("{\"rootfs\": {\"type\": \"layers\", \"diff_ids\": [\"" D1
                          "\", \"sha256:zz\"]}}",
                          -EINVAL, "config: rootfs.diff_ids[1]: 'sha256:zz' is not a valid digest");
    expect_config_refused("{\"architecture\": 1, " ROOTFS "}", -EINVAL,
                          "architecture: expected a string, got an integer");
    expect_config_refused("{\"os\": \"linux\", \"os\": \"windows\", " ROOTFS "}", -EINVAL,
                          "duplicate object key");
    expect_config_refused("null", -EINVAL, "config: not valid JSON");
}

/* Every seed of the fuzz corpora is a real-looking document: the good ones must parse, the
 * "bad-" ones must be refused. */
static void parse_corpus(const char *name, bool manifest)
{
    char dir[4096];
    const char *src = getenv("CAPSULE_TEST_SOURCE_DIR");
    if (!src)
        test_skip("CAPSULE_TEST_SOURCE_DIR is not set (meson test sets it)");
    snprintf(dir, sizeof(dir), "%s/../fuzz/corpus/%s", src, name);
    DIR *d = opendir(dir);
    assert_non_null(d);
    size_t good = 0;
    for (struct dirent *de; (de = readdir(d));) {
        char path[8192], *buf = malloc(1 << 20);
        struct errmsg e = {""};
        if (de->d_name[0] == '.') {
            free(buf);
            continue;
        }
        snprintf(path, sizeof(path), "%s/%s", dir, de->d_name);
        FILE *f = fopen(path, "re");
        assert_non_null(f);
        size_t n = fread(buf, 1, 1 << 20, f);
        fclose(f);
        struct manifest m = {};
        struct image_config c = {};
        int r =
            manifest ? manifest_parse(buf, n, NULL, &m, &e) : image_config_parse(buf, n, &c, &e);
        bool bad = strncmp(de->d_name, "bad-", 4) == 0;
        if (bad ? r >= 0 : r < 0)
            fail_msg("%s: %d %s", path, r, e.text);
        good += !bad;
        if (manifest && r >= 0 && m.kind == MANIFEST_INDEX)
            assert_non_null(manifest_index_select(&m, "linux", "amd64", NULL, &e));
        manifest_done(&m);
        image_config_done(&c);
        free(buf);
    }
    closedir(d);
    assert_true(good >= 3);
}

static void test_corpus_manifests(void **state)
{
    parse_corpus("fuzz-manifest", true);
}

static void test_corpus_configs(void **state)
{
    parse_corpus("fuzz-image-config", false);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_docker_manifest),  cmocka_unit_test(test_oci_manifest_layer_types),
        cmocka_unit_test(test_index_select),     cmocka_unit_test(test_index_first_match_wins),
        cmocka_unit_test(test_refused_kinds),    cmocka_unit_test(test_field_errors),
        cmocka_unit_test(test_bad_json),         cmocka_unit_test(test_too_many_layers),
        cmocka_unit_test(test_config_ubuntu),    cmocka_unit_test(test_config_entrypoint_forms),
        cmocka_unit_test(test_config_env),       cmocka_unit_test(test_config_errors),
        cmocka_unit_test(test_corpus_manifests), cmocka_unit_test(test_corpus_configs),
    };
    return test_run_cases(tests);
}
