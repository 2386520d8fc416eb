/* Image references: Docker's syntax and enroot's docker://[USER@][REGISTRY#]IMAGE form. */
#include "capsule/image/ref.h"

#include <arpa/inet.h>
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

#include "capsule/image/digest.h"
#include "lib/macro.h"

/* Longer input is refused before any work: no real reference comes close. */
#define REF_INPUT_MAX      4096
#define REF_REPOSITORY_MAX 255
#define REF_TAG_MAX        128
#define REF_REGISTRY_MAX   255
#define REF_USER_MAX       255

/* The input as messages quote it: bounded, and with control characters replaced so that a
 * hostile name cannot rewrite the user's terminal. */
static void quote_input(const char *s, char out[256])
{
    size_t i = 0;
    for (; s[i] && i < 200; i++)
        out[i] = ((unsigned char)s[i] < 0x20 || s[i] == 0x7f) ? '?' : s[i];
    if (s[i]) {
        memcpy(out + i, "...", 3);
        i += 3;
    }
    out[i] = '\0';
}

static int ref_error(struct errmsg *e, const char *input, const char *fmt, ...)
    __attribute__((format(printf, 3, 4)));

static int ref_error(struct errmsg *e, const char *input, const char *fmt, ...)
{
    char problem[ERRMSG_MAX], q[256];
    va_list ap;

    if (!e)
        return -EINVAL;
    va_start(ap, fmt);
    vsnprintf(problem, sizeof(problem), fmt, ap);
    va_end(ap);
    /* The problem may quote a part of the input too. */
    for (char *p = problem; *p; p++)
        if ((unsigned char)*p < 0x20 || *p == 0x7f)
            *p = '?';
    quote_input(input, q);
    return errmsg_set(e, -EINVAL, "'%s': %s", q, problem);
}

static bool is_lower_alnum(char c)
{
    return (c >= 'a' && c <= 'z') || (c >= '0' && c <= '9');
}

static bool is_alnum(char c)
{
    return is_lower_alnum(c) || (c >= 'A' && c <= 'Z');
}

/* One repository path component: [a-z0-9]+((\.|_|__|-+)[a-z0-9]+)*. Returns NULL or what is
 * wrong with it (a static string). */
static const char *component_problem(const char *c, size_t n)
{
    for (size_t i = 0; i < n; i++)
        if (c[i] >= 'A' && c[i] <= 'Z')
            return "repository names must be lower case";
    for (size_t i = 0; i < n; i++)
        if (!is_lower_alnum(c[i]) && !strchr("._-", c[i]))
            return "repository names may contain only a-z, 0-9, '.', '_', '-' and '/'";
    if (!is_lower_alnum(c[0]) || !is_lower_alnum(c[n - 1]))
        return "each part of a repository name must start and end with a letter or digit";
    for (size_t i = 1; i < n;) {
        if (is_lower_alnum(c[i])) {
            i++;
            continue;
        }
        size_t j = i;
        while (j < n && !is_lower_alnum(c[j]))
            j++;
        size_t len = j - i;
        bool ok =
            (len == 1) || (len == 2 && c[i] == '_' && c[i + 1] == '_') || strspn(c + i, "-") >= len;
        if (!ok)
            return "separators in repository names are one '.', one '_', '__' or dashes";
        i = j;
    }
    return NULL;
}

static int check_repository(const char *input, const char *repo, struct errmsg *e)
{
    if (!*repo)
        return ref_error(e, input, "no repository name");
    if (strlen(repo) > REF_REPOSITORY_MAX)
        return ref_error(e, input, "repository name is longer than %d characters",
                         REF_REPOSITORY_MAX);
    for (const char *p = repo;;) {
        size_t n = strcspn(p, "/");
        if (n == 0)
            return ref_error(e, input, "empty part in repository name '%.200s'", repo);
        const char *problem = component_problem(p, n);
        if (problem)
            return ref_error(e, input, "%s ('%.*s')", problem, (int)(n > 200 ? 200 : n), p);
        if (!p[n])
            return 0;
        p += n + 1;
    }
}

static int check_tag(const char *input, const char *tag, struct errmsg *e)
{
    size_t n = strlen(tag);
    if (n == 0)
        return ref_error(e, input, "empty tag after ':'");
    if (n > REF_TAG_MAX)
        return ref_error(e, input, "tag is longer than %d characters", REF_TAG_MAX);
    if (!is_alnum(tag[0]) && tag[0] != '_')
        return ref_error(e, input, "tag '%.200s' must start with a letter, digit or '_'", tag);
    for (size_t i = 1; i < n; i++)
        if (!is_alnum(tag[i]) && !strchr("_.-", tag[i]))
            return ref_error(e, input,
                             "tag '%.200s' may contain only letters, digits, '_', '.' "
                             "and '-'",
                             tag);
    return 0;
}

static int check_digest(const char *input, const char *d, struct errmsg *e)
{
    if (digest_valid(d))
        return 0;
    if (!*d)
        return ref_error(e, input, "empty digest after '@'");
    const char *colon = strchr(d, ':');
    if (!colon)
        return ref_error(e, input,
                         "digest '%.200s' has no algorithm (expected "
                         "sha256:<64 hex digits>)",
                         d);
    size_t alen = (size_t)(colon - d);
    bool known = alen == 6 && (strncmp(d, "sha256", 6) == 0 || strncmp(d, "sha512", 6) == 0);
    if (!known)
        return ref_error(e, input, "unsupported digest algorithm '%.*s' (sha256 and sha512 are)",
                         (int)(alen > 40 ? 40 : alen), d);
    return ref_error(e, input, "digest '%.200s': expected %d lower-case hex digits after '%.7s'", d,
                     d[3] == '2' ? 64 : 128, d);
}

static int check_port(const char *input, const char *port, struct errmsg *e)
{
    size_t n = strlen(port);
    if (n == 0 || n > 5 || strspn(port, "0123456789") != n || atoi(port) == 0 || atoi(port) > 65535)
        return ref_error(e, input, "registry port '%.20s' is not a number from 1 to 65535", port);
    return 0;
}

/* host[:port], [IPv6][:port]: Docker's domain grammar. */
static int check_registry(const char *input, const char *reg, struct errmsg *e)
{
    const char *port = NULL;
    size_t n = strlen(reg);

    if (n == 0)
        return ref_error(e, input, "empty registry name");
    if (n > REF_REGISTRY_MAX)
        return ref_error(e, input, "registry name is longer than %d characters", REF_REGISTRY_MAX);
    if (reg[0] == '[') {
        const char *end = strchr(reg, ']');
        size_t len = end ? (size_t)(end - reg - 1) : 0;
        char addr[INET6_ADDRSTRLEN + 1];
        struct in6_addr a6;
        if (!end || len == 0 || len >= sizeof(addr))
            return ref_error(e, input, "registry '%.200s': bad IPv6 address", reg);
        memcpy(addr, reg + 1, len);
        addr[len] = '\0';
        if (inet_pton(AF_INET6, addr, &a6) != 1)
            return ref_error(e, input, "registry '%.200s': bad IPv6 address", reg);
        if (end[1] && end[1] != ':')
            return ref_error(e, input, "registry '%.200s': unexpected text after ']'", reg);
        return end[1] ? check_port(input, end + 2, e) : 0;
    }
    size_t host_len = strcspn(reg, ":");
    if (reg[host_len])
        port = reg + host_len + 1;
    for (size_t i = 0; i < host_len;) {
        size_t label = strcspn(reg + i, ".:");
        if (label == 0 || label > 63 || reg[i] == '-' || reg[i + label - 1] == '-')
            return ref_error(e, input, "registry '%.200s' is not a valid host name", reg);
        for (size_t j = i; j < i + label; j++)
            if (!is_alnum(reg[j]) && reg[j] != '-')
                return ref_error(e, input, "registry '%.200s' is not a valid host name", reg);
        i += label;
        if (i < host_len && i + 1 == host_len)
            return ref_error(e, input, "registry '%.200s' is not a valid host name", reg);
        if (i < host_len)
            i++;
    }
    if (host_len == 0)
        return ref_error(e, input, "registry '%.200s' has no host name", reg);
    return port ? check_port(input, port, e) : 0;
}

static int check_user(const char *input, const char *user, struct errmsg *e)
{
    size_t n = strlen(user);
    if (n == 0)
        return ref_error(e, input, "empty user name before '@'");
    if (n > REF_USER_MAX)
        return ref_error(e, input, "user name is longer than %d characters", REF_USER_MAX);
    for (size_t i = 0; i < n; i++)
        if ((unsigned char)user[i] <= ' ' || user[i] == 0x7f)
            return ref_error(e, input,
                             "the user name before '@' contains a blank or control "
                             "character");
    return 0;
}

/* Docker's rule for whether the first path component names a registry. */
static bool looks_like_registry(const char *c, size_t n)
{
    return memchr(c, '.', n) || memchr(c, ':', n) || c[0] == '[' ||
           (n == 9 && memcmp(c, "localhost", 9) == 0);
}

/* In enroot's syntax '@' both ends a user name and starts a digest; a digest is told apart by
 * its algorithm ("sha256:") or, for algorithms this program does not know, by a long hex
 * string, so that "md5:…" gets a message about the algorithm instead of a strange image name. */
static bool looks_like_digest(const char *s)
{
    if (strncmp(s, "sha256:", 7) == 0 || strncmp(s, "sha512:", 7) == 0)
        return true;
    size_t alg = strspn(s, "abcdefghijklmnopqrstuvwxyz0123456789+._-");
    if (alg == 0 || s[alg] != ':')
        return false;
    size_t hex = strspn(s + alg + 1, "0123456789abcdefABCDEF");
    return hex >= 32 && s[alg + 1 + hex] == '\0';
}

static bool is_docker_hub(const char *reg)
{
    return strcmp(reg, REF_DOCKER_HUB) == 0 || strcmp(reg, "index.docker.io") == 0 ||
           strcmp(reg, "registry-1.docker.io") == 0;
}

/* Splits "[REGISTRY/]REPOSITORY[:TAG][@DIGEST]" (name is modified) into r; registry, when not
 * NULL, was given with enroot's '#' and the whole name is then the repository. Checks every
 * part. */
static int split_name(const char *input, char *name, const char *registry, struct image_ref *r,
                      struct errmsg *e)
{
    char *digest = NULL, *tag = NULL, *path = name;
    int k;

    char *at = strchr(name, '@');
    if (at) {
        *at = '\0';
        digest = at + 1;
        if ((k = check_digest(input, digest, e)) < 0)
            return k;
    }
    if (!registry) {
        size_t first = strcspn(name, "/");
        if (name[first] == '/' && first > 0 && looks_like_registry(name, first)) {
            name[first] = '\0';
            registry = name;
            path = name + first + 1;
        } else
            registry = REF_DOCKER_HUB;
    }
    if ((k = check_registry(input, registry, e)) < 0)
        return k;
    char *colon = strrchr(path, ':');
    if (colon) {
        *colon = '\0';
        tag = colon + 1;
        if ((k = check_tag(input, tag, e)) < 0)
            return k;
    }

    r->registry = strdup(registry);
    if (!r->registry)
        return -ENOMEM;
    for (char *p = r->registry; *p; p++)
        if (*p >= 'A' && *p <= 'Z')
            *p = (char)(*p - 'A' + 'a');
    if (is_docker_hub(r->registry))
        strcpy(r->registry, REF_DOCKER_HUB); /* never longer than the aliases */
    bool library = strcmp(r->registry, REF_DOCKER_HUB) == 0 && *path && !strchr(path, '/');
    if (asprintf(&r->repository, "%s%s", library ? "library/" : "", path) < 0) {
        r->repository = NULL;
        return -ENOMEM;
    }
    if ((k = check_repository(input, r->repository, e)) < 0)
        return k;
    /* Docker's default tag applies only when nothing pins the image. */
    if (tag || !digest) {
        r->tag = strdup(tag ? tag : "latest");
        if (!r->tag)
            return -ENOMEM;
    }
    if (digest) {
        r->digest = strdup(digest);
        if (!r->digest)
            return -ENOMEM;
    }
    return 0;
}

/* enroot's [USER@][REGISTRY#]IMAGE[:TAG][@DIGEST] (after "docker://"); s is modified. */
static int split_enroot(const char *input, char *s, struct image_ref *r, struct errmsg *e)
{
    char *registry = NULL;
    int k;

    if (!*s)
        return ref_error(e, input, "no image name after 'docker://'");
    /* The user ends at the last '@' before the registry or path starts, so that a user name
     * may itself contain '@' (an e-mail address); a digest's '@' is excluded first. */
    size_t end = strlen(s);
    char *last_at = strrchr(s, '@');
    if (last_at && looks_like_digest(last_at + 1))
        end = (size_t)(last_at - s);
    size_t limit = strcspn(s, "#/");
    if (limit > end)
        limit = end;
    char *user_at = NULL;
    for (size_t i = 0; i < limit; i++)
        if (s[i] == '@')
            user_at = s + i;
    if (user_at) {
        *user_at = '\0';
        if ((k = check_user(input, s, e)) < 0)
            return k;
        r->user = strdup(s);
        if (!r->user)
            return -ENOMEM;
        s = user_at + 1;
    }
    char *hash = strchr(s, '#');
    if (hash) {
        *hash = '\0';
        registry = s;
        s = hash + 1;
        if (!*registry)
            return ref_error(e, input, "empty registry name before '#'");
        if (strchr(s, '#'))
            return ref_error(e, input,
                             "more than one '#'; it separates the registry from the "
                             "image once");
        if (!*s)
            return ref_error(e, input, "no image name after '#'");
    }
    return split_name(input, s, registry, r, e);
}

int image_ref_parse(const char *s, struct image_ref *ret, struct errmsg *e)
{
    struct image_ref r = {};
    const char *scheme;
    int k;

    if (!s || !*s)
        return errmsg_set(e, -EINVAL, "empty image reference");
    size_t n = strnlen(s, REF_INPUT_MAX + 1);
    if (n > REF_INPUT_MAX)
        return ref_error(e, s, "image reference is longer than %d characters", REF_INPUT_MAX);
    _cleanup_free_ char *copy = strdup(s);
    if (!copy)
        return -ENOMEM;

    /* Pyxis hands "nvcr.io#nvidia/pytorch" to enroot without the scheme, so a '#' alone
     * selects enroot's syntax too. */
    if (strncmp(copy, "docker://", 9) == 0)
        k = split_enroot(s, copy + 9, &r, e);
    else if ((scheme = strstr(copy, "://")))
        k = ref_error(e, s, "unknown scheme '%.*s://'; only docker:// is understood",
                      (int)(scheme - copy > 40 ? 40 : scheme - copy), copy);
    else if (strchr(copy, '#'))
        k = split_enroot(s, copy, &r, e);
    else
        k = split_name(s, copy, NULL, &r, e);
    if (k < 0) {
        image_ref_done(&r);
        return k;
    }
    *ret = r;
    return 0;
}

void image_ref_done(struct image_ref *r)
{
    if (!r)
        return;
    free(r->user);
    free(r->registry);
    free(r->repository);
    free(r->tag);
    free(r->digest);
    *r = (struct image_ref){};
}

int image_ref_format(const struct image_ref *r, char **ret)
{
    char *s = NULL;
    /* A registry that Docker's rule would not recognise ("myhost", only reachable with enroot's
     * '#') keeps enroot's form, so that the name still parses back to the same image. */
    bool hash = !looks_like_registry(r->registry, strlen(r->registry));
    int k = asprintf(&s, "%s%s%s%s%s%s%s%s", hash ? "docker://" : "", r->registry, hash ? "#" : "/",
                     r->repository, r->tag ? ":" : "", r->tag ? r->tag : "", r->digest ? "@" : "",
                     r->digest ? r->digest : "");
    if (k < 0)
        return -ENOMEM;
    *ret = s;
    return 0;
}

const char *image_ref_api_host(const struct image_ref *r)
{
    if (!r->registry || strcmp(r->registry, REF_DOCKER_HUB) == 0)
        return "registry-1.docker.io";
    return r->registry;
}

bool image_ref_is_loopback(const char *registry)
{
    char host[256];

    if (!registry)
        return false;
    if (registry[0] == '[') {
        const char *end = strchr(registry, ']');
        size_t len = end ? (size_t)(end - registry - 1) : 0;
        struct in6_addr a6;
        if (!end || len == 0 || len >= sizeof(host))
            return false;
        memcpy(host, registry + 1, len);
        host[len] = '\0';
        if (inet_pton(AF_INET6, host, &a6) != 1)
            return false;
        return IN6_IS_ADDR_LOOPBACK(&a6) || (IN6_IS_ADDR_V4MAPPED(&a6) && a6.s6_addr[12] == 127);
    }
    size_t len = strcspn(registry, ":");
    if (len >= sizeof(host))
        return false;
    memcpy(host, registry, len);
    host[len] = '\0';
    if (strcasecmp(host, "localhost") == 0)
        return true;
    struct in_addr a4;
    return inet_pton(AF_INET, host, &a4) == 1 && (ntohl(a4.s_addr) >> 24) == 127;
}

/* "registry/repository" of a parsed name, malloc'd; NULL on ENOMEM. */
static char *repository_of(const struct image_ref *r)
{
    char *s = NULL;
    return asprintf(&s, "%s/%s", r->registry, r->repository) < 0 ? NULL : s;
}

bool image_refs_single(char *const *names)
{
    _cleanup_free_ char *tagged = NULL, *digested = NULL;
    bool single = true;
    size_t n = 0;
    for (; single && names && names[n]; n++) {
        struct image_ref ref = {0};
        struct errmsg e = {{0}};
        if (image_ref_parse(names[n], &ref, &e) < 0)
            return false;
        _cleanup_free_ char *repo = repository_of(&ref);
        char **slot = ref.digest ? &digested : &tagged;
        /* A second tag, or digests of two repositories, make it more than one reference. */
        if (!repo || (*slot && (slot == &tagged || strcmp(*slot, repo) != 0)))
            single = false;
        else if (!*slot)
            *slot = TAKE_PTR(repo);
        image_ref_done(&ref);
    }
    if (!single || n == 0)
        return false;
    if (n == 1)
        return true;
    /* Two or more, at most one of them a tag: its repository must be the digests' one. */
    return digested && (!tagged || strcmp(tagged, digested) == 0);
}
