/* What crosses the node cache's socket, checked the same way on both sides: the pull request the
 * service takes from any user, the answer capsule takes from the service. */
#include "capsule/node/node-protocol.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "lib/macro.h"
#include "lib/strv.h"

bool node_authorization_valid(const char *s)
{
    size_t skip;
    if (strncmp(s, "Bearer ", 7) == 0)
        skip = 7;
    else if (strncmp(s, "Basic ", 6) == 0)
        skip = 6;
    else
        return false;
    size_t n = strlen(s);
    if (n > NODE_AUTH_MAX || n == skip)
        return false;
    /* It becomes a header line: nothing that could end it or start another. */
    for (const char *p = s + skip; *p; p++)
        if (*p <= ' ' || *p > '~')
            return false;
    return true;
}

bool node_layer_path_valid(const char *path)
{
    if (path[0] != '/' || strstr(path, "/../") || strpbrk(path, ":,\\\n"))
        return false;
    size_t n = strlen(path);
    return n >= 3 ? strcmp(path + n - 3, "/..") != 0 : true;
}

int node_pull_request_parse(const char *text, size_t len, struct image_ref *ref, char **ret_auth,
                            struct errmsg *e)
{
    json_t *body = json_loadb(text, len, JSON_REJECT_DUPLICATES, NULL);
    const char *image = NULL, *auth = NULL;
    int r = 0;
    if (!body || json_unpack(body, "{s:s, s?s}", "image", &image, "authorization", &auth) < 0)
        r = errmsg_set(e, -EINVAL, "the request must be a JSON object with \"image\"");
    else if ((r = image_ref_parse(image, ref, e)) < 0)
        ;
    else if (!ref->digest || ref->tag)
        r = errmsg_set(e, -EINVAL, "'%s': the node cache takes images by digest (REPO@sha256:…)",
                       image);
    else if (auth && !node_authorization_valid(auth))
        r = errmsg_set(e, -EINVAL, "the authorization must be \"Bearer TOKEN\" or \"Basic …\"");
    else if (auth && asprintf(ret_auth, "Authorization: %s", auth) < 0)
        r = errmsg_set(e, -ENOMEM, "out of memory");
    if (body) {
        /* The token lives in this request only: wipe the parsed copy before it is freed. */
        if (auth)
            explicit_bzero((char *)auth, strlen(auth));
        json_decref(body);
    }
    if (r < 0)
        image_ref_done(ref);
    return r;
}

int node_pull_answer_paths(json_t *answer, const struct manifest *m, char ***ret, struct errmsg *e)
{
    json_t *layers = json_object_get(answer, "layers");
    if (json_array_size(layers) != m->n_layers)
        return errmsg_set(e, -EPROTO, "node cache: the answer has %zu layers, the manifest %zu",
                          json_array_size(layers), m->n_layers);
    _cleanup_strv_free_ char **paths = strv_new();
    for (size_t i = 0; paths && i < m->n_layers; i++) {
        json_t *l = json_array_get(layers, i);
        const char *digest = json_string_value(json_object_get(l, "digest"));
        const char *path = json_string_value(json_object_get(l, "path"));
        if (!digest || strcmp(digest, m->layers[i].digest) != 0 || !path ||
            !node_layer_path_valid(path))
            return errmsg_set(e, -EPROTO,
                              "node cache: the answer for layer %zu of %zu (%s) is "
                              "not one capsule can use",
                              i + 1, m->n_layers, m->layers[i].digest);
        if (strv_push(&paths, path) < 0)
            return errmsg_set(e, -ENOMEM, "out of memory");
    }
    if (!paths)
        return errmsg_set(e, -ENOMEM, "out of memory");
    *ret = TAKE_PTR(paths);
    return 0;
}
