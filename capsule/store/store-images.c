/* Image records: images/<escaped name>.json, one per canonical image name, written to tmp/ and
 * renamed into place. */
#include <dirent.h>
#include <ctype.h>
#include <errno.h>
#include <stdint.h>
#include <fcntl.h>
#include <jansson.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "capsule/image/digest.h"
#include "capsule/image/manifest.h"
#include "lib/log.h"
#include "capsule/image/ref.h"
#include "lib/strv.h"
#include "lib/strv-json.h"
#include "capsule/store/store-private.h"

#define RECORD_SCHEMA 1
/* Even 1024 layers fit many times over; anything bigger is not ours. */
#define RECORD_MAX (1024 * 1024)

void image_record_done(struct image_record *r)
{
    if (!r)
        return;
    free(r->name);
    free(r->manifest_digest);
    free(r->config_digest);
    for (size_t i = 0; r->layers && r->layers[i]; i++)
        free(r->layers[i]);
    free(r->layers);
    strv_free(r->layer_paths);
    *r = (struct image_record){0};
}

/* 64-bit FNV-1a: tells apart long names that share an escaped prefix. Not a security measure:
 * a record's own "name" field is what a lookup checks. */
static uint64_t fnv1a(const char *s)
{
    uint64_t h = 0xcbf29ce484222325ULL;
    for (; *s; s++)
        h = (h ^ (unsigned char)*s) * 0x100000001b3ULL;
    return h;
}

/* images/<name>.json with every byte outside [A-Za-z0-9._-] written as %XX, so the file name
 * says which image it is; names whose escaped form would be too long for a file name keep 200
 * bytes of it and a hash of the whole. No cryptographic hash: `capsule run` looks records up and
 * must not load OpenSSL for it (cli.h). */
static void record_path(const char *name, char buf[PATH_MAX])
{
    char esc[256];
    size_t n = 0;
    const unsigned char *p = (const unsigned char *)name;
    for (; *p && n < 200; p++) {
        if (isalnum(*p) || *p == '.' || *p == '_' || *p == '-')
            esc[n++] = (char)*p;
        else
            n += (size_t)snprintf(esc + n, sizeof(esc) - n, "%%%02X", *p);
    }
    esc[n] = '\0';
    if (!*p)
        snprintf(buf, PATH_MAX, "images/%s.json", esc);
    else
        snprintf(buf, PATH_MAX, "images/%s~%016llx.json", esc, (unsigned long long)fnv1a(name));
}

static int record_check(const struct image_record *r, struct errmsg *e)
{
    if (!r->name || !r->name[0])
        return errmsg_set(e, -EINVAL, "image record without a name");
    if (!digest_valid(r->manifest_digest) || !digest_valid(r->config_digest))
        return errmsg_set(e, -EINVAL, "image record '%s': invalid manifest or config digest",
                          r->name);
    for (size_t i = 0; i < r->n_layers; i++)
        if (!r->layers || !digest_valid(r->layers[i]))
            return errmsg_set(e, -EINVAL, "image record '%s': layer %zu has an invalid digest",
                              r->name, i + 1);
    return 0;
}

static json_t *record_to_json(const struct image_record *r)
{
    json_t *layers = json_array();
    for (size_t i = 0; layers && i < r->n_layers; i++)
        if (json_array_append_new(layers, json_string(r->layers[i])) < 0) {
            json_decref(layers);
            return NULL;
        }
    json_t *j = json_pack("{s:i, s:s, s:s, s:s, s:o, s:I, s:I}", "schema", RECORD_SCHEMA, "name",
                          r->name, "manifest_digest", r->manifest_digest, "config_digest",
                          r->config_digest, "layers", layers, "size", (json_int_t)r->size,
                          "pulled_at", (json_int_t)r->pulled_at);
    if (j && r->layer_paths &&
        json_object_set_new(j, "layer_paths", strv_to_json(r->layer_paths)) < 0) {
        json_decref(j);
        return NULL;
    }
    return j;
}

int store_image_save(struct store *s, const struct image_record *r, struct errmsg *e)
{
    int ret = record_check(r, e);
    if (ret < 0)
        return ret;
    json_t *j = record_to_json(r);
    char *text = j ? json_dumps(j, JSON_COMPACT) : NULL;
    json_decref(j);
    if (!text)
        return -ENOMEM;
    char rel[PATH_MAX];
    record_path(r->name, rel);
    /* A node cache image's record holds its layers' paths, which are secrets (see
     * store_node_view): only its owner reads it, whatever the cache's mode for others. */
    ret = store_write_atomic_mode(s, rel, text, strlen(text), r->layer_paths ? 0600 : s->file_mode,
                                  e);
    free(text);
    return ret;
}

static int layers_from_json(json_t *arr, struct image_record *r)
{
    size_t n = json_array_size(arr);
    r->layers = calloc(n + 1, sizeof(char *));
    if (!r->layers)
        return -ENOMEM;
    for (size_t i = 0; i < n; i++) {
        const char *d = json_string_value(json_array_get(arr, i));
        if (!digest_valid(d))
            return -EBADMSG;
        if (!(r->layers[i] = strdup(d)))
            return -ENOMEM;
        r->n_layers = i + 1;
    }
    return 0;
}

/* A node cache image's layer directories: absolute paths, one per layer. */
static int layer_paths_from_json(json_t *arr, struct image_record *r)
{
    size_t n = json_array_size(arr);
    if (!json_is_array(arr) || n != r->n_layers)
        return -EBADMSG;
    r->layer_paths = calloc(n + 1, sizeof(char *));
    if (!r->layer_paths)
        return -ENOMEM;
    for (size_t i = 0; i < n; i++) {
        const char *p = json_string_value(json_array_get(arr, i));
        if (!p || p[0] != '/')
            return -EBADMSG;
        if (!(r->layer_paths[i] = strdup(p)))
            return -ENOMEM;
    }
    return 0;
}

/* Parses a record; -EBADMSG for anything that is not one this program wrote. */
static int record_from_json(const char *text, size_t len, struct image_record *ret)
{
    json_t *j = json_loadb(text, len, 0, NULL);
    const char *name = NULL, *manifest = NULL, *config = NULL;
    json_t *layers = NULL;
    json_int_t size = 0, pulled = 0;
    int schema = 0;
    if (!j ||
        json_unpack(j, "{s:i, s:s, s:s, s:s, s:o, s:I, s:I}", "schema", &schema, "name", &name,
                    "manifest_digest", &manifest, "config_digest", &config, "layers", &layers,
                    "size", &size, "pulled_at", &pulled) < 0 ||
        schema != RECORD_SCHEMA || !name[0] || !digest_valid(manifest) || !digest_valid(config) ||
        !json_is_array(layers)) {
        json_decref(j);
        return -EBADMSG;
    }
    struct image_record r = {.size = size, .pulled_at = pulled};
    int k = -ENOMEM;
    if ((r.name = strdup(name)) && (r.manifest_digest = strdup(manifest)) &&
        (r.config_digest = strdup(config)))
        k = layers_from_json(layers, &r);
    json_t *paths = json_object_get(j, "layer_paths");
    if (k >= 0 && paths)
        k = layer_paths_from_json(paths, &r);
    json_decref(j);
    if (k < 0) {
        image_record_done(&r);
        return k;
    }
    *ret = r;
    return 0;
}

static int record_read(struct store *s, const char *rel, struct image_record *ret)
{
    _cleanup_free_ char *text = NULL;
    size_t len;
    int r = store_read_file(s->root_fd, rel, RECORD_MAX, &text, &len);
    if (r == -EFBIG)
        r = -EBADMSG;
    if (r < 0)
        return r;
    return record_from_json(text, len, ret);
}

static int record_cmp(const void *a, const void *b)
{
    return strcmp(((const struct image_record *)a)->name, ((const struct image_record *)b)->name);
}

static void records_free(struct image_record *v, size_t n)
{
    for (size_t i = 0; i < n; i++)
        image_record_done(&v[i]);
    free(v);
}

static int records_append(struct image_record **v, size_t *n, struct image_record *r)
{
    struct image_record *nv = realloc(*v, (*n + 1) * sizeof(**v));
    if (!nv)
        return -ENOMEM;
    nv[(*n)++] = *r;
    *v = nv;
    *r = (struct image_record){0};
    return 0;
}

static bool is_record_name(const char *n)
{
    size_t len = strlen(n);
    return len > 5 && strcmp(n + len - 5, ".json") == 0;
}

int store_image_list(struct store *s, struct image_record **ret, size_t *ret_n, struct errmsg *e)
{
    int fd = openat(s->root_fd, "images", O_RDONLY | O_DIRECTORY | O_CLOEXEC);
    DIR *d = fd >= 0 ? fdopendir(fd) : NULL;
    if (!d) {
        int r = errmsg_set(e, negative_errno(), "cannot read '%s/images': %m", s->root);
        if (fd >= 0)
            close(fd);
        return r;
    }
    struct image_record *v = NULL;
    size_t n = 0;
    int r = 0;
    struct dirent *de;
    while (r >= 0 && (de = readdir(d))) {
        if (!is_record_name(de->d_name))
            continue;
        char rel[PATH_MAX];
        snprintf(rel, sizeof(rel), "images/%s", de->d_name);
        struct image_record rec = {0};
        r = record_read(s, rel, &rec);
        if (r == -EBADMSG || r == -ENOENT) {
            /* Damaged, or removed meanwhile: the list shows what can be used. */
            log_debug("image record '%s/%s' skipped: %s", s->root, rel, strerror(-r));
            r = 0;
            continue;
        }
        if (r >= 0)
            r = records_append(&v, &n, &rec);
        image_record_done(&rec);
    }
    closedir(d);
    if (r < 0) {
        records_free(v, n);
        return errmsg_set(e, r, "cannot read the image records in '%s/images': %s", s->root,
                          strerror(-r));
    }
    if (n > 1)
        qsort(v, n, sizeof(*v), record_cmp);
    *ret = v;
    *ret_n = n;
    return 0;
}

/* An image ID prefix as users type it: >= 4 lower-case hex digits, maybe after "sha256:".
 * Returns the hex part or NULL. */
static const char *id_prefix(const char *name)
{
    const char *hex = strncmp(name, "sha256:", 7) == 0 ? name + 7 : name;
    size_t n = strspn(hex, "0123456789abcdef");
    return n >= 4 && n <= 64 && hex[n] == '\0' ? hex : NULL;
}

static int load_by_id(struct store *s, const char *name, const char *hex, struct image_record *ret,
                      struct errmsg *e)
{
    struct image_record *v = NULL;
    size_t n = 0, found = SIZE_MAX;
    int r = store_image_list(s, &v, &n, e);
    if (r < 0)
        return r;
    for (size_t i = 0; i < n; i++) {
        if (strncmp(digest_hex(v[i].config_digest), hex, strlen(hex)) != 0)
            continue;
        /* Several names of one image are one image; the first by name answers. */
        if (found != SIZE_MAX && strcmp(v[found].config_digest, v[i].config_digest) != 0) {
            r = errmsg_set(e, -EINVAL,
                           "image ID '%s' is ambiguous: %s and %s match; give more "
                           "digits",
                           name, v[found].name, v[i].name);
            break;
        }
        if (found == SIZE_MAX)
            found = i;
    }
    if (r >= 0 && found == SIZE_MAX)
        r = errmsg_set(e, -ENOENT, "image '%s' is not in the cache; capsule pull %s", name, name);
    if (r >= 0) {
        *ret = v[found];
        v[found] = (struct image_record){0};
    }
    records_free(v, n);
    return r;
}

int store_image_load(struct store *s, const char *name, struct image_record *ret, struct errmsg *e)
{
    char rel[PATH_MAX];
    record_path(name, rel);
    struct image_record rec = {0};
    int r = record_read(s, rel, &rec);
    if (r >= 0 && strcmp(rec.name, name) != 0) {
        image_record_done(&rec);
        r = -EBADMSG;
    }
    if (r >= 0) {
        *ret = rec;
        return 0;
    }
    if (r == -EBADMSG)
        return errmsg_set(e, r,
                          "the record of image '%s' ('%s/%s') is damaged; pull the image "
                          "again",
                          name, s->root, rel);
    if (r != -ENOENT)
        return errmsg_set(e, r, "cannot read '%s/%s': %s", s->root, rel, strerror(-r));
    return errmsg_set(e, -ENOENT, "image '%s' is not in the cache; capsule pull %s", name, name);
}

int store_image_load_id(struct store *s, const char *id, struct image_record *ret, struct errmsg *e)
{
    const char *hex = id_prefix(id);
    if (!hex)
        return errmsg_set(e, -ENOENT, "'%s' is not an image ID", id);
    return load_by_id(s, id, hex, ret, e);
}

int store_image_find(struct store *s, const char *arg, struct image_record *ret, struct errmsg *e)
{
    struct image_ref ref = {0};
    _cleanup_free_ char *name = NULL;
    struct errmsg by_name = {{0}};
    int r = image_ref_parse(arg, &ref, &by_name);
    if (r >= 0) {
        r = image_ref_format(&ref, &name);
        image_ref_done(&ref);
        if (r < 0)
            return errmsg_set(e, r, "out of memory");
        r = store_image_load(s, name, ret, &by_name);
        if (r != -ENOENT)
            return r < 0 ? errmsg_set(e, r, "%s", by_name.text) : 0;
    }
    int rid = store_image_load_id(s, arg, ret, e);
    if (rid >= 0)
        return 1;
    /* Not an ID of a cached image either: the name's answer says more ("capsule pull x"). */
    if (rid == -ENOENT)
        return errmsg_set(e, r, "%s", by_name.text);
    return rid;
}

int store_image_names(struct store *s, const char *config_digest, char ***ret, struct errmsg *e)
{
    struct image_record *v = NULL;
    size_t n = 0;
    int r = store_image_list(s, &v, &n, e);
    if (r < 0)
        return r;
    char **names = strv_new();
    r = names ? 0 : -ENOMEM;
    for (size_t i = 0; i < n; i++)
        if (r >= 0 && strcmp(v[i].config_digest, config_digest) == 0)
            r = strv_push(&names, v[i].name);
    records_free(v, n);
    if (r < 0) {
        strv_free(names);
        return errmsg_set(e, r, "out of memory");
    }
    *ret = names;
    return 0;
}

int store_image_remove(struct store *s, const char *name, struct errmsg *e)
{
    char rel[PATH_MAX];
    record_path(name, rel);
    if (unlinkat(s->root_fd, rel, 0) == 0)
        return 0;
    if (errno == ENOENT)
        return errmsg_set(e, -ENOENT, "image '%s' is not in the cache", name);
    return errmsg_set(e, negative_errno(), "cannot remove '%s/%s': %m", s->root, rel);
}

int image_record_fill(const char *name, const char *manifest_digest, const struct manifest *m,
                      struct image_record *rec)
{
    *rec = (struct image_record){.pulled_at = (int64_t)time(NULL), .n_layers = m->n_layers};
    rec->name = strdup(name);
    rec->manifest_digest = strdup(manifest_digest);
    rec->config_digest = strdup(m->config.digest);
    rec->layers = calloc(m->n_layers + 1, sizeof(char *));
    if (!rec->name || !rec->manifest_digest || !rec->config_digest || !rec->layers)
        return -ENOMEM;
    for (size_t i = 0; i < m->n_layers; i++) {
        if (!(rec->layers[i] = strdup(m->layers[i].digest)))
            return -ENOMEM;
        rec->size += m->layers[i].size;
    }
    return 0;
}
