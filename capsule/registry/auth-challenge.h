/* HTTP authentication challenges (WWW-Authenticate, RFC 7235) and the token server's answer
 * (the distribution spec's token authentication), as a registry sends them.
 *
 * Both are outside input: a registry or a token server we talk to for the first time. The
 * parsers bound what they accept (header length, number of challenges and parameters) and say
 * what was wrong. */
#pragma once

#include <stddef.h>
#include <stdint.h>

#include "lib/errmsg.h"

/* Limits beyond which a header is refused as hostile rather than parsed. */
#define AUTH_HEADER_MAX     8192
#define AUTH_CHALLENGES_MAX 16
#define AUTH_PARAMS_MAX     32

struct auth_param {
    char *name;  /* lower-cased: names are case-insensitive */
    char *value; /* unquoted, escapes resolved */
};

struct auth_challenge {
    char *scheme;  /* lower-cased: "bearer", "basic", ... */
    char *token68; /* the token68 form ("Negotiate abc=="), else NULL */
    struct auth_param *params;
    size_t n_params;
};

struct auth_challenges {
    struct auth_challenge *items;
    size_t n;
};

/* Parses a WWW-Authenticate value, which may hold several challenges
 * ("Bearer realm=\"https://a/token\",service=\"a\", Basic realm=\"x\""). Returns 0 and *ret
 * (free with auth_challenges_done), -EINVAL with a message that quotes the position of the
 * error, -E2BIG past the limits above, -ENOMEM. *ret is untouched on failure. */
int auth_challenges_parse(const char *header, struct auth_challenges *ret, struct errmsg *e);
/* Frees everything and zeroes the struct; safe on a zeroed struct and twice. */
void auth_challenges_done(struct auth_challenges *c);

/* The first challenge of the given scheme (case-insensitive), or NULL. */
const struct auth_challenge *auth_challenges_find(const struct auth_challenges *c,
                                                  const char *scheme);
/* The value of a parameter (case-insensitive name), or NULL. */
const char *auth_challenge_param(const struct auth_challenge *c, const char *name);

/* A token server's answer: {"token": "...", "access_token": "...", "expires_in": 300, ...}. */
struct auth_token {
    char *token;        /* "token", else "access_token"; printable ASCII, no blanks */
    int64_t expires_in; /* seconds; 60 when absent, as the spec says */
};

/* Parses a token server's JSON answer. Returns 0 and *ret (free with auth_token_done), -EINVAL
 * ("token server answer: no 'token' or 'access_token'"), -ENOMEM. */
int auth_token_parse(const void *body, size_t len, struct auth_token *ret, struct errmsg *e);
/* Wipes and frees the token; safe on a zeroed struct. */
void auth_token_done(struct auth_token *t);
