/* Content digests with OpenSSL's EVP interface. */
#include "capsule/image/digest.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <openssl/evp.h>

struct digest_ctx {
    EVP_MD_CTX *md;
    const char *algo; /* "sha256" or "sha512" */
    bool failed;      /* an EVP call failed: the result must not be trusted */
    char expected[DIGEST_STRING_MAX];
};

static int ctx_new(bool sha512, struct digest_ctx **ret)
{
    struct digest_ctx *c = calloc(1, sizeof(*c));
    if (!c)
        return -ENOMEM;
    c->algo = sha512 ? "sha512" : "sha256";
    c->md = EVP_MD_CTX_new();
    if (!c->md || EVP_DigestInit_ex(c->md, sha512 ? EVP_sha512() : EVP_sha256(), NULL) != 1) {
        digest_free(c);
        return -ENOMEM;
    }
    *ret = c;
    return 0;
}

int digest_begin(const char *expected, struct digest_ctx **ret, struct errmsg *e)
{
    if (!digest_valid(expected))
        return errmsg_set(e, -EINVAL,
                          "'%.80s' is not a valid digest (expected sha256: with 64 or sha512: "
                          "with 128 lower-case hex digits)",
                          expected ? expected : "(null)");
    struct digest_ctx *c = NULL;
    int r = ctx_new(strncmp(expected, "sha512:", 7) == 0, &c);
    if (r < 0)
        return errmsg_set(e, r, "cannot set up a digest context");
    strcpy(c->expected, expected); /* digest_valid() bounded its length */
    *ret = c;
    return 0;
}

int digest_begin_sha256(struct digest_ctx **ret)
{
    return ctx_new(false, ret);
}

void digest_update(struct digest_ctx *c, const void *data, size_t len)
{
    if (len > 0 && EVP_DigestUpdate(c->md, data, len) != 1)
        c->failed = true;
}

void digest_final(struct digest_ctx *c, char out[DIGEST_STRING_MAX])
{
    static const char hex[] = "0123456789abcdef";
    unsigned char md[EVP_MAX_MD_SIZE];
    unsigned int n = 0;

    if (EVP_DigestFinal_ex(c->md, md, &n) != 1) {
        /* An impossible failure still yields a string that no digest_valid() input equals. */
        c->failed = true;
        snprintf(out, DIGEST_STRING_MAX, "%s:(failed)", c->algo);
        return;
    }
    size_t k = (size_t)snprintf(out, DIGEST_STRING_MAX, "%s:", c->algo);
    for (unsigned int i = 0; i < n && k + 2 < DIGEST_STRING_MAX; i++) {
        out[k++] = hex[md[i] >> 4];
        out[k++] = hex[md[i] & 0xf];
    }
    out[k] = '\0';
}

int digest_verify(struct digest_ctx *c, struct errmsg *e)
{
    char got[DIGEST_STRING_MAX];

    if (c->expected[0] == '\0')
        return errmsg_set(e, -EINVAL, "no expected digest to verify against");
    digest_final(c, got);
    if (c->failed)
        return errmsg_set(e, -EIO, "computing the %s digest failed", c->algo);
    if (strcmp(got, c->expected) != 0)
        return errmsg_set(e, -EBADMSG, "digest mismatch: expected %s, got %s", c->expected, got);
    return 0;
}

void digest_free(struct digest_ctx *c)
{
    if (!c)
        return;
    EVP_MD_CTX_free(c->md);
    free(c);
}

void digest_sha256(const void *data, size_t len, char out[DIGEST_STRING_MAX])
{
    struct digest_ctx c = {.algo = "sha256"};

    c.md = EVP_MD_CTX_new();
    if (!c.md || EVP_DigestInit_ex(c.md, EVP_sha256(), NULL) != 1) {
        snprintf(out, DIGEST_STRING_MAX, "sha256:(failed)");
        EVP_MD_CTX_free(c.md);
        return;
    }
    digest_update(&c, data, len);
    digest_final(&c, out);
    EVP_MD_CTX_free(c.md);
}

int digest_check(const char *expected, const void *data, size_t len, struct errmsg *e)
{
    _cleanup_(digest_freep) struct digest_ctx *c = NULL;
    int r = digest_begin(expected, &c, e);
    if (r < 0)
        return r;
    digest_update(c, data, len);
    return digest_verify(c, e);
}
