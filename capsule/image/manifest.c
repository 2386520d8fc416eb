/* Image manifests, indexes and configs (Docker schema 2, OCI), parsed with jansson. */
#include "capsule/image/manifest.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

#include <jansson.h>

#include "capsule/image/capsule-limits.h"
#include "capsule/image/digest.h"
#include "lib/macro.h"

#define MEDIA_DOCKER_SCHEMA1        "application/vnd.docker.distribution.manifest.v1+json"
#define MEDIA_DOCKER_SCHEMA1_SIGNED "application/vnd.docker.distribution.manifest.v1+prettyjws"

/* jansson brings json_decrefp (NULL-safe) for its own json_auto_t. */
#define _cleanup_json_ _cleanup_(json_decrefp)

/* A value from the document as messages quote it: bounded, control characters replaced. */
static const char *quote(const char *s, char out[128])
{
    size_t i = 0;
    for (; s[i] && i < 100; i++)
        out[i] = ((unsigned char)s[i] < 0x20 || s[i] == 0x7f) ? '?' : s[i];
    if (s[i]) {
        memcpy(out + i, "...", 3);
        i += 3;
    }
    out[i] = '\0';
    return out;
}

static const char *type_name(const json_t *j)
{
    switch (json_typeof(j)) {
    case JSON_OBJECT:
        return "an object";
    case JSON_ARRAY:
        return "an array";
    case JSON_STRING:
        return "a string";
    case JSON_INTEGER:
        return "an integer";
    case JSON_REAL:
        return "a number";
    case JSON_TRUE:
    case JSON_FALSE:
        return "a boolean";
    default:
        return "null";
    }
}

/* "path.key", or "key" at the top level. */
static void join_path(char out[256], const char *path, const char *key)
{
    snprintf(out, 256, "%s%s%s", path, *path ? "." : "", key);
}

static int load_json(const void *data, size_t len, size_t max, const char *what, json_t **ret,
                     struct errmsg *e)
{
    json_error_t err;

    if (len > max)
        return errmsg_set(e, -EINVAL, "%s: %zu bytes is more than the %zu MiB this program reads",
                          what, len, (size_t)max >> 20);
    json_t *root = json_loadb(data, len, JSON_REJECT_DUPLICATES, &err);
    if (!root)
        return errmsg_set(e, -EINVAL, "%s: not valid JSON: %s (line %d, column %d)", what, err.text,
                          err.line, err.column);
    if (!json_is_object(root)) {
        int r = errmsg_set(e, -EINVAL, "%s: expected a JSON object, got %s", what, type_name(root));
        json_decref(root);
        return r;
    }
    *ret = root;
    return 0;
}

/* A string member: 0 and *ret (borrowed from the document; NULL when absent or null and not
 * required), or -EINVAL. */
static int get_string(const json_t *obj, const char *path, const char *key, bool required,
                      const char **ret, struct errmsg *e)
{
    char p[256];
    json_t *v = json_object_get(obj, key);

    join_path(p, path, key);
    if (!v || json_is_null(v)) {
        if (required)
            return errmsg_set(e, -EINVAL, "%s: missing", p);
        *ret = NULL;
        return 0;
    }
    if (!json_is_string(v))
        return errmsg_set(e, -EINVAL, "%s: expected a string, got %s", p, type_name(v));
    *ret = json_string_value(v);
    return 0;
}

static int dup_string(const char *s, char **ret)
{
    *ret = strdup(s ? s : "");
    return *ret ? 0 : -ENOMEM;
}

static void descriptor_done(struct descriptor *d)
{
    free(d->media_type);
    free(d->digest);
    free(d->os);
    free(d->architecture);
    free(d->variant);
    *d = (struct descriptor){};
}

static int parse_platform(const json_t *obj, const char *path, struct descriptor *d,
                          struct errmsg *e)
{
    const char *os = NULL, *arch = NULL, *variant = NULL;
    char p[256];
    int r;

    join_path(p, path, "platform");
    json_t *pl = json_object_get(obj, "platform");
    if (pl && !json_is_null(pl)) {
        if (!json_is_object(pl))
            return errmsg_set(e, -EINVAL, "%s: expected an object, got %s", p, type_name(pl));
        if ((r = get_string(pl, p, "os", false, &os, e)) < 0 ||
            (r = get_string(pl, p, "architecture", false, &arch, e)) < 0 ||
            (r = get_string(pl, p, "variant", false, &variant, e)) < 0)
            return r;
    }
    if (dup_string(os, &d->os) < 0 || dup_string(arch, &d->architecture) < 0 ||
        dup_string(variant, &d->variant) < 0)
        return -ENOMEM;
    return 0;
}

/* A descriptor at path ("layers[3]"); index entries also carry a platform. */
static int parse_descriptor(const json_t *obj, const char *path, bool with_platform,
                            struct descriptor *d, struct errmsg *e)
{
    const char *media = NULL, *digest = NULL;
    char p[256], q[128];
    int r;

    if (!json_is_object(obj))
        return errmsg_set(e, -EINVAL, "%s: expected an object, got %s", path, type_name(obj));
    if ((r = get_string(obj, path, "mediaType", true, &media, e)) < 0 ||
        (r = get_string(obj, path, "digest", true, &digest, e)) < 0)
        return r;
    join_path(p, path, "digest");
    if (!digest_valid(digest))
        return errmsg_set(e, -EINVAL, "%s: '%s' is not a valid digest", p, quote(digest, q));
    join_path(p, path, "size");
    json_t *size = json_object_get(obj, "size");
    if (!size)
        return errmsg_set(e, -EINVAL, "%s: missing", p);
    if (!json_is_integer(size))
        return errmsg_set(e, -EINVAL, "%s: expected an integer, got %s", p, type_name(size));
    if (json_integer_value(size) < 0)
        return errmsg_set(e, -EINVAL, "%s: %lld is negative", p,
                          (long long)json_integer_value(size));

    d->size = json_integer_value(size);
    if (dup_string(media, &d->media_type) < 0 || dup_string(digest, &d->digest) < 0)
        return -ENOMEM;
    if (with_platform)
        return parse_platform(obj, path, d, e);
    if (dup_string("", &d->os) < 0 || dup_string("", &d->architecture) < 0 ||
        dup_string("", &d->variant) < 0)
        return -ENOMEM;
    return 0;
}

/* An array member of at most CAPSULE_LAYERS_MAX entries. */
static int get_array(const json_t *obj, const char *key, json_t **ret, struct errmsg *e)
{
    json_t *a = json_object_get(obj, key);
    if (!a)
        return errmsg_set(e, -EINVAL, "%s: missing", key);
    if (!json_is_array(a))
        return errmsg_set(e, -EINVAL, "%s: expected an array, got %s", key, type_name(a));
    if (json_array_size(a) > CAPSULE_LAYERS_MAX)
        return errmsg_set(e, -EINVAL, "%s: %zu entries; more than %d are refused", key,
                          json_array_size(a), CAPSULE_LAYERS_MAX);
    *ret = a;
    return 0;
}

static int parse_descriptors(const json_t *root, const char *key, bool with_platform,
                             struct descriptor **ret, size_t *ret_n, struct errmsg *e)
{
    json_t *a = NULL;
    int r;

    if ((r = get_array(root, key, &a, e)) < 0)
        return r;
    size_t n = json_array_size(a);
    *ret = calloc(n ? n : 1, sizeof(struct descriptor));
    if (!*ret)
        return -ENOMEM;
    for (size_t i = 0; i < n; i++) {
        char p[64];
        snprintf(p, sizeof(p), "%s[%zu]", key, i);
        /* Count it first so that manifest_done frees a half-filled entry too. */
        *ret_n = i + 1;
        if ((r = parse_descriptor(json_array_get(a, i), p, with_platform, &(*ret)[i], e)) < 0)
            return r;
    }
    return 0;
}

int layer_compression_from_media_type(const char *media_type)
{
    if (!media_type)
        return -ENOTSUP;
    if (strcmp(media_type, MEDIA_OCI_LAYER) == 0)
        return LAYER_UNCOMPRESSED;
    if (strcmp(media_type, MEDIA_OCI_LAYER_GZIP) == 0 ||
        strcmp(media_type, MEDIA_DOCKER_LAYER) == 0)
        return LAYER_GZIP;
    if (strcmp(media_type, MEDIA_OCI_LAYER_ZSTD) == 0)
        return LAYER_ZSTD;
    return -ENOTSUP;
}

static int check_layer_type(const struct descriptor *d, size_t i, struct errmsg *e)
{
    const char *why;
    char q[128];

    if (layer_compression_from_media_type(d->media_type) >= 0)
        return 0;
    if (strstr(d->media_type, "foreign") || strstr(d->media_type, "nondistributable"))
        why = "a foreign layer, which must be fetched from elsewhere (Windows base images); not "
              "supported";
    else if (strstr(d->media_type, "encrypted"))
        why = "an encrypted layer; decryption is not supported";
    else
        why = "not a layer type this program can unpack (tar, tar+gzip, tar+zstd)";
    return errmsg_set(e, -ENOTSUP, "layers[%zu].mediaType: '%s' is %s", i, quote(d->media_type, q),
                      why);
}

static int parse_image(const json_t *root, struct manifest *m, struct errmsg *e)
{
    char q[128];
    int r;

    json_t *config = json_object_get(root, "config");
    if (!config)
        return errmsg_set(e, -EINVAL, "config: missing");
    if ((r = parse_descriptor(config, "config", false, &m->config, e)) < 0)
        return r;
    if (strcmp(m->config.media_type, MEDIA_DOCKER_CONFIG) != 0 &&
        strcmp(m->config.media_type, MEDIA_OCI_CONFIG) != 0)
        return errmsg_set(e, -ENOTSUP,
                          "config.mediaType: '%s' is not a container image config (an OCI "
                          "artifact such as a Helm chart or a signature?)",
                          quote(m->config.media_type, q));
    if ((r = parse_descriptors(root, "layers", false, &m->layers, &m->n_layers, e)) < 0)
        return r;
    for (size_t i = 0; i < m->n_layers; i++)
        if ((r = check_layer_type(&m->layers[i], i, e)) < 0)
            return r;
    return 0;
}

/* "application/json; charset=utf-8" -> "application/json" into out; "" when NULL. */
static void strip_content_type(const char *ct, char out[256])
{
    size_t n = 0;
    if (ct) {
        while (*ct == ' ' || *ct == '\t')
            ct++;
        n = strcspn(ct, "; \t");
        if (n > 255)
            n = 255;
        memcpy(out, ct, n);
    }
    out[n] = '\0';
}

static bool is_schema1(const char *media)
{
    return strcasecmp(media, MEDIA_DOCKER_SCHEMA1) == 0 ||
           strcasecmp(media, MEDIA_DOCKER_SCHEMA1_SIGNED) == 0;
}

static int schema1_error(struct errmsg *e)
{
    return errmsg_set(e, -ENOTSUP,
                      "Docker schema 1 manifests are not supported (Docker "
                      "deprecated them in 2017); push the image again with a "
                      "current Docker, podman or skopeo");
}

/* Decides between image and index: the document's mediaType, else a specific Content-Type,
 * else the document's shape. *ret_media is what m->media_type becomes. */
static int decide_kind(const json_t *root, const char *content_type, const char **ret_media,
                       enum manifest_kind *ret_kind, struct errmsg *e)
{
    static const struct {
        const char *media;
        enum manifest_kind kind;
    } kinds[] = {
        {MEDIA_DOCKER_MANIFEST, MANIFEST_IMAGE},
        {MEDIA_OCI_MANIFEST, MANIFEST_IMAGE},
        {MEDIA_DOCKER_LIST, MANIFEST_INDEX},
        {MEDIA_OCI_INDEX, MANIFEST_INDEX},
    };
    const char *media = NULL;
    char ct[256], q[128];
    int r;

    if ((r = get_string(root, "", "mediaType", false, &media, e)) < 0)
        return r;
    strip_content_type(content_type, ct);
    if (!media && *ct && strcasecmp(ct, "application/json") != 0 &&
        strcasecmp(ct, "text/plain") != 0 && strcasecmp(ct, "application/octet-stream") != 0)
        media = ct;
    if (!media) {
        bool index = json_object_get(root, "manifests") != NULL;
        *ret_media = index ? MEDIA_OCI_INDEX : MEDIA_OCI_MANIFEST;
        *ret_kind = index ? MANIFEST_INDEX : MANIFEST_IMAGE;
        return 0;
    }
    if (is_schema1(media))
        return schema1_error(e);
    for (size_t i = 0; i < ELEMENTSOF(kinds); i++)
        if (strcasecmp(media, kinds[i].media) == 0) {
            *ret_media = kinds[i].media;
            *ret_kind = kinds[i].kind;
            return 0;
        }
    return errmsg_set(e, -ENOTSUP, "mediaType: '%s' is not an image manifest or index",
                      quote(media, q));
}

static int check_schema_version(const json_t *root, struct errmsg *e)
{
    json_t *v = json_object_get(root, "schemaVersion");
    if (!v)
        return errmsg_set(e, -EINVAL, "schemaVersion: missing");
    if (!json_is_integer(v))
        return errmsg_set(e, -EINVAL, "schemaVersion: expected an integer, got %s", type_name(v));
    if (json_integer_value(v) == 1)
        return schema1_error(e);
    if (json_integer_value(v) != 2)
        return errmsg_set(e, -ENOTSUP, "schemaVersion: %lld is not supported (2 is)",
                          (long long)json_integer_value(v));
    return 0;
}

static int parse_manifest_json(const json_t *root, const char *content_type, struct manifest *m,
                               struct errmsg *e)
{
    const char *media = NULL;
    char ct[256];
    int r;

    /* A schema 1 manifest says so in its Content-Type or schemaVersion, whichever comes. */
    strip_content_type(content_type, ct);
    if (is_schema1(ct))
        return schema1_error(e);
    if ((r = check_schema_version(root, e)) < 0 ||
        (r = decide_kind(root, content_type, &media, &m->kind, e)) < 0)
        return r;
    if (dup_string(media, &m->media_type) < 0)
        return -ENOMEM;
    if (m->kind == MANIFEST_INDEX)
        return parse_descriptors(root, "manifests", true, &m->manifests, &m->n_manifests, e);
    return parse_image(root, m, e);
}

int manifest_parse(const void *data, size_t len, const char *content_type, struct manifest *ret,
                   struct errmsg *e)
{
    _cleanup_json_ json_t *root = NULL;
    struct manifest m = {};
    int r;

    if ((r = load_json(data, len, CAPSULE_MANIFEST_MAX, "manifest", &root, e)) < 0)
        return r;
    r = parse_manifest_json(root, content_type, &m, e);
    if (r < 0) {
        manifest_done(&m);
        if (r == -ENOMEM)
            return errmsg_set(e, r, "manifest: out of memory");
        return errmsg_prefix(e, r, "manifest");
    }
    *ret = m;
    return 0;
}

void manifest_done(struct manifest *m)
{
    if (!m)
        return;
    free(m->media_type);
    descriptor_done(&m->config);
    for (size_t i = 0; i < m->n_layers; i++)
        descriptor_done(&m->layers[i]);
    free(m->layers);
    for (size_t i = 0; i < m->n_manifests; i++)
        descriptor_done(&m->manifests[i]);
    free(m->manifests);
    *m = (struct manifest){};
}

static bool platform_known(const struct descriptor *d)
{
    return d->os && d->architecture && *d->os && *d->architecture &&
           strcmp(d->os, "unknown") != 0 && strcmp(d->architecture, "unknown") != 0;
}

/* arm64's only variant is v8, and indexes write it or leave it out. */
static bool variant_matches(const struct descriptor *d, const char *variant)
{
    if (!variant || strcmp(d->variant, variant) == 0)
        return true;
    if (strcmp(d->architecture, "arm64") == 0)
        return (*d->variant == '\0' || strcmp(d->variant, "v8") == 0) &&
               (*variant == '\0' || strcmp(variant, "v8") == 0);
    return false;
}

/* "linux/arm64, linux/ppc64le": the distinct known platforms of m, for the message. */
static void list_platforms(const struct manifest *m, char *out, size_t size)
{
    size_t k = 0;
    out[0] = '\0';
    for (size_t i = 0; i < m->n_manifests && k < size; i++) {
        const struct descriptor *d = &m->manifests[i];
        bool seen = false;
        if (!platform_known(d))
            continue;
        for (size_t j = 0; j < i && !seen; j++) {
            const struct descriptor *o = &m->manifests[j];
            seen = platform_known(o) && strcmp(o->os, d->os) == 0 &&
                   strcmp(o->architecture, d->architecture) == 0 &&
                   strcmp(o->variant, d->variant) == 0;
        }
        if (seen)
            continue;
        int w = snprintf(out + k, size - k, "%s%s/%s%s%s", k ? ", " : "", d->os, d->architecture,
                         *d->variant ? "/" : "", d->variant);
        k = w < 0 ? size : k + (size_t)w;
    }
}

const struct descriptor *manifest_index_select(const struct manifest *m, const char *os,
                                               const char *architecture, const char *variant,
                                               struct errmsg *e)
{
    char have[ERRMSG_MAX];

    if (!m || m->kind != MANIFEST_INDEX) {
        errmsg_set(e, -EINVAL, "not a manifest list or index");
        return NULL;
    }
    for (size_t i = 0; i < m->n_manifests; i++) {
        const struct descriptor *d = &m->manifests[i];
        if (platform_known(d) && strcmp(d->os, os) == 0 &&
            strcmp(d->architecture, architecture) == 0 && variant_matches(d, variant))
            return d;
    }
    list_platforms(m, have, sizeof(have));
    if (*have)
        errmsg_set(e, -ENOENT, "no %s/%s%s%s image; the index has %s", os, architecture,
                   variant && *variant ? "/" : "", variant ? variant : "", have);
    else
        errmsg_set(e, -ENOENT, "no %s/%s%s%s image; the index names no platforms", os, architecture,
                   variant && *variant ? "/" : "", variant ? variant : "");
    return NULL;
}

static void strv_free(char **v)
{
    for (char **p = v; p && *p; p++)
        free(*p);
    free(v);
}

/* A member that Docker reads as a list of strings (its "strslice"): an array of strings, or a
 * single string meaning a one-element list. Absent, null and [] all give *ret = NULL: Docker
 * treats an explicit empty Entrypoint or Cmd like a missing one. Entries failing keep() are
 * dropped. */
static int get_strv(const json_t *obj, const char *path, const char *key,
                    bool (*keep)(const char *), char ***ret, size_t *ret_n, struct errmsg *e)
{
    char p[256];
    json_t *v = json_object_get(obj, key);
    size_t n = 0;

    join_path(p, path, key);
    *ret = NULL;
    if (ret_n)
        *ret_n = 0;
    if (!v || json_is_null(v) || (json_is_array(v) && json_array_size(v) == 0))
        return 0;
    if (!json_is_array(v) && !json_is_string(v))
        return errmsg_set(e, -EINVAL, "%s: expected an array of strings, got %s", p, type_name(v));
    size_t count = json_is_array(v) ? json_array_size(v) : 1;
    char **strv = calloc(count + 1, sizeof(char *));
    if (!strv)
        return -ENOMEM;
    for (size_t i = 0; i < count; i++) {
        json_t *s = json_is_array(v) ? json_array_get(v, i) : v;
        if (!json_is_string(s)) {
            strv_free(strv);
            return errmsg_set(e, -EINVAL, "%s[%zu]: expected a string, got %s", p, i, type_name(s));
        }
        if (keep && !keep(json_string_value(s)))
            continue;
        if (!(strv[n++] = strdup(json_string_value(s)))) {
            strv_free(strv);
            return -ENOMEM;
        }
    }
    *ret = strv;
    if (ret_n)
        *ret_n = n;
    return 0;
}

/* An environment entry without '=' or with an empty name sets nothing; Docker passes such
 * entries on unchanged, where they have no effect, so they are left out here. */
static bool env_entry_valid(const char *s)
{
    return s[0] != '=' && strchr(s, '=') != NULL;
}

/* A string member where "" means the same as absent. */
static int get_nonempty_string(const json_t *obj, const char *path, const char *key, char **ret,
                               struct errmsg *e)
{
    const char *s = NULL;
    int r = get_string(obj, path, key, false, &s, e);
    if (r < 0)
        return r;
    *ret = NULL;
    if (s && *s && !(*ret = strdup(s)))
        return -ENOMEM;
    return 0;
}

static int parse_run_config(const json_t *root, struct image_config *c, struct errmsg *e)
{
    int r;

    json_t *cfg = json_object_get(root, "config");
    if (cfg && !json_is_null(cfg) && !json_is_object(cfg))
        return errmsg_set(e, -EINVAL, "config: expected an object, got %s", type_name(cfg));
    if (cfg && json_is_object(cfg)) {
        if ((r = get_strv(cfg, "config", "Env", env_entry_valid, &c->env, NULL, e)) < 0 ||
            (r = get_strv(cfg, "config", "Entrypoint", NULL, &c->entrypoint, NULL, e)) < 0 ||
            (r = get_strv(cfg, "config", "Cmd", NULL, &c->cmd, NULL, e)) < 0 ||
            (r = get_nonempty_string(cfg, "config", "WorkingDir", &c->working_dir, e)) < 0 ||
            (r = get_nonempty_string(cfg, "config", "User", &c->user, e)) < 0)
            return r;
    }
    if (!c->env && !(c->env = calloc(1, sizeof(char *))))
        return -ENOMEM;
    return 0;
}

static int parse_rootfs(const json_t *root, struct image_config *c, struct errmsg *e)
{
    const char *type = NULL;
    char q[128];
    int r;

    json_t *rootfs = json_object_get(root, "rootfs");
    if (!rootfs)
        return errmsg_set(e, -EINVAL, "rootfs: missing");
    if (!json_is_object(rootfs))
        return errmsg_set(e, -EINVAL, "rootfs: expected an object, got %s", type_name(rootfs));
    if ((r = get_string(rootfs, "rootfs", "type", true, &type, e)) < 0)
        return r;
    if (strcmp(type, "layers") != 0)
        return errmsg_set(e, -ENOTSUP, "rootfs.type: '%s' is not supported ('layers' is)",
                          quote(type, q));
    json_t *ids = json_object_get(rootfs, "diff_ids");
    if (!ids)
        return errmsg_set(e, -EINVAL, "rootfs.diff_ids: missing");
    if (!json_is_array(ids))
        return errmsg_set(e, -EINVAL, "rootfs.diff_ids: expected an array, got %s", type_name(ids));
    if (json_array_size(ids) > CAPSULE_LAYERS_MAX)
        return errmsg_set(e, -EINVAL, "rootfs.diff_ids: %zu entries; more than %d are refused",
                          json_array_size(ids), CAPSULE_LAYERS_MAX);
    if ((r = get_strv(rootfs, "rootfs", "diff_ids", NULL, &c->diff_ids, &c->n_diff_ids, e)) < 0)
        return r;
    if (!c->diff_ids && !(c->diff_ids = calloc(1, sizeof(char *))))
        return -ENOMEM;
    for (size_t i = 0; i < c->n_diff_ids; i++)
        if (!digest_valid(c->diff_ids[i]))
            return errmsg_set(e, -EINVAL, "rootfs.diff_ids[%zu]: '%s' is not a valid digest", i,
                              quote(c->diff_ids[i], q));
    return 0;
}

int image_config_parse(const void *data, size_t len, struct image_config *ret, struct errmsg *e)
{
    _cleanup_json_ json_t *root = NULL;
    struct image_config c = {};
    const char *arch = NULL, *os = NULL;
    int r;

    if ((r = load_json(data, len, CAPSULE_CONFIG_MAX, "config", &root, e)) < 0)
        return r;
    if ((r = get_string(root, "", "architecture", false, &arch, e)) < 0 ||
        (r = get_string(root, "", "os", false, &os, e)) < 0)
        goto fail;
    if ((r = dup_string(arch, &c.architecture)) < 0 || (r = dup_string(os, &c.os)) < 0)
        goto fail;
    /* The rootfs comes first: a config with the wrong shape is more likely a wrong blob than
     * a broken Env, and its message says so. */
    if ((r = parse_rootfs(root, &c, e)) < 0 || (r = parse_run_config(root, &c, e)) < 0)
        goto fail;
    *ret = c;
    return 0;
fail:
    image_config_done(&c);
    if (r == -ENOMEM)
        return errmsg_set(e, r, "config: out of memory");
    return errmsg_prefix(e, r, "config");
}

void image_config_done(struct image_config *c)
{
    if (!c)
        return;
    free(c->architecture);
    free(c->os);
    strv_free(c->env);
    strv_free(c->entrypoint);
    strv_free(c->cmd);
    free(c->working_dir);
    free(c->user);
    strv_free(c->diff_ids);
    *c = (struct image_config){};
}
