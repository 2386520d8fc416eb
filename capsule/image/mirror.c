#include "capsule/image/mirror.h"

#include <errno.h>
#include <stdbool.h>
#include <string.h>
#include <strings.h>

#include "capsule/image/ref.h"

/* Docker Hub answers to three names; references and mirrors may use any. */
static const char *canonical(const char *registry, size_t n, size_t *ret_n)
{
    static const char *const hub[] = {"index.docker.io", "registry-1.docker.io"};
    for (size_t i = 0; i < sizeof(hub) / sizeof(hub[0]); i++)
        if (n == strlen(hub[i]) && strncasecmp(registry, hub[i], n) == 0) {
            *ret_n = strlen(REF_DOCKER_HUB);
            return REF_DOCKER_HUB;
        }
    *ret_n = n;
    return registry;
}

int mirror_check(const char *entry, struct errmsg *e)
{
    const char *eq = strchr(entry, '=');
    if (!eq || eq == entry)
        return errmsg_set(e, -EINVAL, "registry mirror '%s': expected REGISTRY=URL", entry);
    const char *url = eq + 1, *host;
    if (strncmp(url, "http://", 7) == 0)
        host = url + 7;
    else if (strncmp(url, "https://", 8) == 0)
        host = url + 8;
    else
        return errmsg_set(
            e, -EINVAL, "registry mirror '%s': the URL must start with http:// or https://", entry);
    size_t n = strcspn(host, "/");
    bool trailing_only = host[n] == '\0' || strcmp(host + n, "/") == 0;
    if (n == 0 || !trailing_only || memchr(host, '@', n) || strpbrk(entry, " \t\n"))
        return errmsg_set(e, -EINVAL,
                          "registry mirror '%s': the URL must be a scheme and host[:port] only",
                          entry);
    return 0;
}

const char *mirror_find(char *const *mirrors, const char *registry)
{
    size_t want_n;
    const char *want = canonical(registry, strlen(registry), &want_n);
    for (size_t i = 0; mirrors && mirrors[i]; i++) {
        const char *eq = strchr(mirrors[i], '=');
        size_t n;
        const char *key = eq ? canonical(mirrors[i], (size_t)(eq - mirrors[i]), &n) : NULL;
        if (key && n == want_n && strncasecmp(key, want, n) == 0)
            return eq + 1;
    }
    return NULL;
}
