/* Helpers shared by the protocol's source files; not part of the public interface. */
#pragma once

#include <stdbool.h>
#include <stddef.h>
#include <stdio.h>

#include "ctl-proto.h"

/* Bytes that may appear in a frame body: printable ASCII, 0x20..0x7e. */
static inline bool ctl_is_print(char c)
{
    return c >= 0x20 && c <= 0x7e;
}

static inline bool ctl_is_digit(char c)
{
    return c >= '0' && c <= '9';
}

/* Bytes allowed inside a field value, quoted or bare (bare values also exclude space). */
static inline bool ctl_is_value_byte(char c)
{
    return ctl_is_print(c) && c != '"' && c != '$' && c != '*';
}

/* Checks a field key of n bytes: 1..CTL_KEY_MAX of a-z 0-9 _ ., starting with a letter. */
bool ctl_key_valid(const char *s, size_t n);
/* Checks a verb of n bytes: 1..CTL_VERB_MAX of A-Z 0-9 _, starting with a letter. */
bool ctl_verb_valid(const char *s, size_t n);
/* Copies src into buf (size bytes, NUL included), cutting it short if needed. Never fails. */
void ctl_strlcpy(char *buf, const char *src, size_t size);

/* Writes a reason to why (size bytes, may be NULL/0), truncating as snprintf does. */
#define CTL_WHY(why, size, ...)                                                                    \
    do {                                                                                           \
        if ((why) && (size) > 0) {                                                                 \
            snprintf((why), (size), __VA_ARGS__);                                                  \
            ctl_why_clean((why));                                                                  \
        }                                                                                          \
    } while (0)

/* Reasons travel in msg="..." fields, so they must be valid quoted values even when they echo
 * bad input: every byte a quoted value may not hold becomes '?'. */
static inline void ctl_why_clean(char *why)
{
    for (; *why; why++)
        if (!ctl_is_value_byte(*why))
            *why = '?';
}

/* Formats a temperature for a reason, shortest form ("55", "31.5"); buf must hold 16 bytes. */
static inline const char *ctl_temp_str(long centi, char *buf)
{
    if (ctl_format_centi(centi, true, buf, 16) < 0)
        buf[0] = '\0';
    return buf;
}
