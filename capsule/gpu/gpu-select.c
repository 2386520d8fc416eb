/* Which GPUs a container gets (see gpu-select.h). */
#include "capsule/gpu/gpu-select.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "lib/log.h"
#include "lib/macro.h"
#include "lib/strv.h"

/* Longer than any id a user types (a MIG UUID in the legacy form is about 60). */
#define GPU_ID_MAX 128

const char *gpu_source_name(enum gpu_source s)
{
    switch (s) {
    case GPU_SOURCE_FLAG:
        return "--gpus";
    case GPU_SOURCE_HOST_NVIDIA:
        return "NVIDIA_VISIBLE_DEVICES";
    case GPU_SOURCE_HOST_CUDA:
        return "CUDA_VISIBLE_DEVICES";
    case GPU_SOURCE_IMAGE:
        return "the image's NVIDIA_VISIBLE_DEVICES";
    case GPU_SOURCE_NONE:
        break;
    }
    return "no GPU request";
}

enum gpu_source gpu_source_pick(const char *gpus_flag, char *const *host_env,
                                char *const *image_env, const char **ret_value)
{
    const char *v;
    enum gpu_source s = GPU_SOURCE_NONE;
    if (gpus_flag) {
        v = gpus_flag;
        s = GPU_SOURCE_FLAG;
    } else if ((v = strv_env_get(host_env, "NVIDIA_VISIBLE_DEVICES"))) {
        s = GPU_SOURCE_HOST_NVIDIA;
    } else if ((v = strv_env_get(host_env, "CUDA_VISIBLE_DEVICES"))) {
        s = GPU_SOURCE_HOST_CUDA;
    } else if ((v = strv_env_get(image_env, "NVIDIA_VISIBLE_DEVICES"))) {
        s = GPU_SOURCE_IMAGE;
    } else {
        v = "";
    }
    *ret_value = v;
    return s;
}

static bool is_blank(char c)
{
    return c == ' ' || c == '\t' || c == '\n';
}

static bool is_none_word(enum gpu_source source, const char *s)
{
    if (strcmp(s, "") == 0 || strcmp(s, "none") == 0 || strcmp(s, "void") == 0)
        return true;
    /* What CUDA and Slurm use to hide every device. */
    return source == GPU_SOURCE_HOST_CUDA && (strcmp(s, "-1") == 0 || strcmp(s, "NoDevFiles") == 0);
}

/* Characters of indices, UUIDs, PCI bus ids and legacy MIG ids ("MIG-GPU-…/1/0"). */
static bool id_char_ok(char c)
{
    return (c >= '0' && c <= '9') || (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || c == '-' ||
           c == ':' || c == '.' || c == '/' || c == '_';
}

void gpu_request_done(struct gpu_request *r)
{
    strv_free(r->ids);
    r->ids = NULL;
    r->all = false;
}

static int parse_entry(enum gpu_source source, const char *value, const char *p, size_t len,
                       char ***ids, struct errmsg *e)
{
    const char *what = gpu_source_name(source);
    if (len == 0)
        return errmsg_set(e, -EINVAL, "%s '%.64s': empty entry in the list", what, value);
    if (len > GPU_ID_MAX)
        return errmsg_set(e, -EINVAL, "%s: '%.32s…' is too long for a GPU id", what, p);
    for (size_t i = 0; i < len; i++)
        if (!id_char_ok(p[i]))
            return errmsg_set(e, -EINVAL,
                              "%s: '%.*s' is not a GPU id (an index, GPU-/MIG- UUID or PCI bus "
                              "id; 'all' or 'none')",
                              what, (int)len, p);
    _cleanup_free_ char *id = strndup(p, len);
    if (!id)
        return -ENOMEM;
    if (strcmp(id, "all") == 0 || is_none_word(source, id))
        return errmsg_set(e, -EINVAL, "%s '%.64s': '%s' cannot be combined with GPU ids", what,
                          value, id);
    if (strv_contains(*ids, id))
        return 0;
    return strv_consume(ids, TAKE_PTR(id));
}

int gpu_request_parse(enum gpu_source source, const char *value, struct gpu_request *ret,
                      struct errmsg *e)
{
    const char *v = value ? value : "";
    while (is_blank(*v))
        v++;
    size_t len = strlen(v);
    while (len > 0 && is_blank(v[len - 1]))
        len--;
    _cleanup_free_ char *trimmed = strndup(v, len);
    _cleanup_strv_free_ char **ids = strv_new();
    if (!trimmed || !ids)
        return errmsg_set(e, -ENOMEM, "out of memory");
    bool all = strcmp(trimmed, "all") == 0;
    if (!all && !is_none_word(source, trimmed)) {
        const char *p = trimmed;
        for (;;) {
            size_t n = strcspn(p, ",");
            size_t a = 0, b = n;
            while (a < b && is_blank(p[a]))
                a++;
            while (b > a && is_blank(p[b - 1]))
                b--;
            int r = parse_entry(source, trimmed, p + a, b - a, &ids, e);
            if (r < 0)
                return r == -ENOMEM ? errmsg_set(e, r, "out of memory") : r;
            if (!p[n])
                break;
            p += n + 1;
        }
    }
    ret->all = all;
    ret->ids = TAKE_PTR(ids);
    return 0;
}

const char *gpu_pick_uuid(const struct gpu_pick *p)
{
    return p->mig ? p->mig->uuid : p->gpu->uuid;
}

/* "0 GPU-… (NVIDIA H200), 1 GPU-… (NVIDIA H200; MIG-…, MIG-…)" for messages. */
static void describe_gpus(const struct gpu_list *l, char *buf, size_t size)
{
    size_t len = 0;
    buf[0] = '\0';
    if (l->n == 0) {
        snprintf(buf, size, "there are none on this host");
        return;
    }
    for (unsigned i = 0; i < l->n && len < size; i++) {
        const struct gpu *g = &l->gpus[i];
        int k = snprintf(buf + len, size - len, "%s%u %s (%s", i ? ", " : "", g->index,
                         g->uuid[0] ? g->uuid : "?", g->error ? "unreadable" : g->name);
        for (unsigned m = 0; k >= 0 && len + (size_t)k < size && m < g->n_mig; m++)
            k += snprintf(buf + len + k, size - len - (size_t)k, "%s%s", m ? ", " : "; ",
                          g->mig[m].uuid);
        if (k >= 0 && len + (size_t)k < size)
            k += snprintf(buf + len + k, size - len - (size_t)k, ")");
        if (k < 0)
            break;
        len += (size_t)k;
    }
}

/* "G:M": MIG device M (its index under the parent) of GPU G. */
static const struct gpu *find_index_pair(const struct gpu_list *l, const char *id,
                                         const struct gpu_mig **ret_mig)
{
    unsigned g, m;
    int end = 0;
    if (sscanf(id, "%u:%u%n", &g, &m, &end) != 2 || id[end] ||
        strspn(id, "0123456789:") != strlen(id) || g >= l->n)
        return NULL;
    const struct gpu *gpu = &l->gpus[g];
    for (unsigned i = 0; i < gpu->n_mig; i++)
        if (gpu->mig[i].index == m) {
            *ret_mig = &gpu->mig[i];
            return gpu;
        }
    return NULL;
}

static bool picked(const struct gpu_pick *v, size_t n, const struct gpu *g, const struct gpu_mig *m)
{
    for (size_t i = 0; i < n; i++)
        if (v[i].gpu == g && v[i].mig == m)
            return true;
    return false;
}

static int resolve_id(const struct gpu_list *l, enum gpu_source source, const char *id,
                      struct gpu_pick *ret, struct errmsg *e)
{
    const struct gpu_mig *mig = NULL;
    const struct gpu *g = find_index_pair(l, id, &mig);
    if (!g)
        g = gpu_list_find(l, id, &mig);
    if (!g) {
        char list[400];
        describe_gpus(l, list, sizeof(list));
        return errmsg_set(e, -ENOENT, "%s: no GPU '%s' (see nvidia-smi -L); GPUs: %s",
                          gpu_source_name(source), id, list);
    }
    if (g->error)
        return errmsg_set(e, -ENODEV, "%s: GPU %u (%s) cannot be used: %s", gpu_source_name(source),
                          g->index, g->uuid[0] ? g->uuid : "no UUID", strerror(-g->error));
    *ret = (struct gpu_pick){g, mig};
    return 0;
}

int gpu_select_resolve(const struct gpu_list *l, enum gpu_source source,
                       const struct gpu_request *req, struct gpu_pick **ret, size_t *ret_n,
                       struct errmsg *e)
{
    size_t max = req->all ? l->n : strv_length(req->ids);
    _cleanup_free_ struct gpu_pick *v = calloc(max ? max : 1, sizeof(*v));
    if (!v)
        return errmsg_set(e, -ENOMEM, "out of memory");
    size_t n = 0;
    if (req->all) {
        for (unsigned i = 0; i < l->n; i++) {
            if (l->gpus[i].error) {
                log_debug("GPU %u cannot be read (%s), not given to the container", i,
                          strerror(-l->gpus[i].error));
                continue;
            }
            v[n++] = (struct gpu_pick){&l->gpus[i], NULL};
        }
    } else {
        for (char **id = req->ids; *id; id++) {
            struct gpu_pick p;
            int r = resolve_id(l, source, *id, &p, e);
            if (r < 0)
                return r;
            /* "0" and its UUID are one GPU. */
            if (!picked(v, n, p.gpu, p.mig))
                v[n++] = p;
        }
    }
    *ret = TAKE_PTR(v);
    *ret_n = n;
    return 0;
}

static bool all_digits(const char *s)
{
    return *s && strspn(s, "0123456789") == strlen(s);
}

static int sequence(size_t n, char **ret)
{
    size_t size = n * 12 + 1;
    char *s = malloc(size);
    if (!s)
        return -ENOMEM;
    size_t len = 0;
    s[0] = '\0';
    for (size_t i = 0; i < n; i++)
        len += (size_t)snprintf(s + len, size - len, "%s%zu", i ? "," : "", i);
    *ret = s;
    return 0;
}

int gpu_select_cuda_visible(const char *host_value, const struct gpu_pick *picks, size_t n,
                            char **ret)
{
    *ret = NULL;
    if (!host_value || n == 0)
        return 0;
    _cleanup_strv_free_ char **held = NULL;
    _cleanup_free_ char *copy = strdup(host_value);
    if (!copy)
        return -ENOMEM;
    for (char *p = copy; *p; p++)
        if (*p == ',')
            *p = ' ';
    if (strv_split_blanks(copy, &held) < 0)
        return -ENOMEM;
    bool indices = held[0] != NULL, uuids = held[0] != NULL;
    for (char **h = held; *h; h++) {
        indices = indices && all_digits(*h);
        uuids = uuids && (strncmp(*h, "GPU-", 4) == 0 || strncmp(*h, "MIG-", 4) == 0);
    }
    if (uuids) {
        *ret = strdup(host_value);
        return *ret ? 0 : -ENOMEM;
    }
    if (!indices)
        return sequence(n, ret);
    size_t size = strv_length(held) * 12 + 1, len = 0;
    _cleanup_free_ char *s = malloc(size);
    if (!s)
        return -ENOMEM;
    s[0] = '\0';
    for (char **h = held; *h; h++) {
        unsigned long idx = strtoul(*h, NULL, 10);
        for (size_t p = 0; p < n; p++)
            if (!picks[p].mig && picks[p].gpu->index == idx)
                len += (size_t)snprintf(s + len, size - len, "%s%zu", len ? "," : "", p);
    }
    if (len == 0) {
        log_debug("CUDA_VISIBLE_DEVICES=%s names none of the GPUs given to the container",
                  host_value);
        return sequence(n, ret);
    }
    *ret = TAKE_PTR(s);
    return 0;
}
