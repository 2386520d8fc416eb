/* UTF-8 as JSON and Prometheus' parsers read it: strict (no overlong forms, no surrogates,
 * nothing above U+10FFFF), so that text checked here is never refused there. */
#pragma once

#include <stdbool.h>
#include <stddef.h>

/* The length (1 to 4) of the valid character that starts s, of which n bytes are readable; 0 when
 * s starts no valid character within those n bytes (a NUL byte counts as invalid). */
size_t utf8_char_len(const char *s, size_t n);

/* Whether the NUL-terminated s is valid UTF-8 throughout. */
bool utf8_valid(const char *s);

/* Makes s[0..n) valid UTF-8 in place: every byte that does not belong to a valid character
 * becomes '?'. With more_follows (s is a chunk of a longer text), a character cut at the end is
 * left out rather than replaced. Returns how many bytes of s are done: n, or less by the bytes of
 * that cut character, where the next chunk should start. */
size_t utf8_sanitize(char *s, size_t n, bool more_follows);
