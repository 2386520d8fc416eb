/* Strict UTF-8 (see utf8.h). */
#include "lib/utf8.h"

#include <stdint.h>
#include <string.h>

size_t utf8_char_len(const char *s, size_t n)
{
    const unsigned char *p = (const unsigned char *)s;
    if (n == 0 || p[0] == 0)
        return 0;
    if (p[0] < 0x80)
        return 1;
    size_t len = (p[0] & 0xe0) == 0xc0   ? 2
                 : (p[0] & 0xf0) == 0xe0 ? 3
                 : (p[0] & 0xf8) == 0xf0 ? 4
                                         : 0;
    if (len == 0 || len > n)
        return 0;
    uint32_t cp = p[0] & (0x7f >> len);
    for (size_t i = 1; i < len; i++) {
        if ((p[i] & 0xc0) != 0x80)
            return 0;
        cp = (cp << 6) | (p[i] & 0x3f);
    }
    static const uint32_t min_cp[] = {0, 0, 0x80, 0x800, 0x10000};
    if (cp < min_cp[len] || cp > 0x10ffff || (cp >= 0xd800 && cp <= 0xdfff))
        return 0;
    return len;
}

bool utf8_valid(const char *s)
{
    size_t n = strlen(s);
    for (size_t i = 0; i < n;) {
        size_t len = utf8_char_len(s + i, n - i);
        if (len == 0)
            return false;
        i += len;
    }
    return true;
}

/* Whether s[0..n) could be the start of a valid character that more bytes would complete. */
static bool could_complete(const char *s, size_t n)
{
    const unsigned char *p = (const unsigned char *)s;
    size_t len = (p[0] & 0xe0) == 0xc0   ? 2
                 : (p[0] & 0xf0) == 0xe0 ? 3
                 : (p[0] & 0xf8) == 0xf0 ? 4
                                         : 0;
    if (len <= n)
        return false;
    for (size_t i = 1; i < n; i++)
        if ((p[i] & 0xc0) != 0x80)
            return false;
    return true;
}

size_t utf8_sanitize(char *s, size_t n, bool more_follows)
{
    for (size_t i = 0; i < n;) {
        size_t len = utf8_char_len(s + i, n - i);
        if (len > 0) {
            i += len;
            continue;
        }
        if (more_follows && n - i < 4 && could_complete(s + i, n - i))
            return i;
        s[i++] = '?';
    }
    return n;
}
