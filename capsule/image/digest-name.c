/* Digest strings: their syntax and parts, without hashing, so that code on `capsule run`'s path
 * can check and print digests without loading OpenSSL (digest.c hashes). */
#include <stdbool.h>
#include <stddef.h>
#include <string.h>

#include "capsule/image/digest.h"

static bool is_lower_hex(const char *s, size_t n)
{
    for (size_t i = 0; i < n; i++)
        if (!((s[i] >= '0' && s[i] <= '9') || (s[i] >= 'a' && s[i] <= 'f')))
            return false;
    return true;
}

bool digest_valid(const char *s)
{
    if (!s)
        return false;
    size_t n = strlen(s);
    if (strncmp(s, "sha256:", 7) == 0)
        return n == 7 + 64 && is_lower_hex(s + 7, 64);
    if (strncmp(s, "sha512:", 7) == 0)
        return n == 7 + 128 && is_lower_hex(s + 7, 128);
    return false;
}

const char *digest_hex(const char *digest)
{
    const char *colon = strchr(digest, ':');
    return colon ? colon + 1 : digest;
}
