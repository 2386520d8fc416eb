/* Fuzzes the WWW-Authenticate parser and the token answer parser: both read what a registry or
 * a token server sends. The whole input is tried as a header and as a token answer. */
#include <ctype.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "capsule/registry/auth-challenge.h"
#include "lib/fuzz-check.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

static void check_challenges(const struct auth_challenges *c)
{
    CHECK(c->n >= 1 && c->n <= AUTH_CHALLENGES_MAX);
    for (size_t i = 0; i < c->n; i++) {
        const struct auth_challenge *ch = &c->items[i];
        CHECK(ch->scheme && ch->scheme[0]);
        for (const char *p = ch->scheme; *p; p++)
            CHECK(!isupper((unsigned char)*p));
        CHECK(ch->n_params <= AUTH_PARAMS_MAX);
        CHECK(!(ch->token68 && ch->n_params));
        CHECK(auth_challenges_find(c, ch->scheme) != NULL);
        for (size_t j = 0; j < ch->n_params; j++) {
            CHECK(ch->params[j].name[0] && ch->params[j].value);
            /* Names are unique, so a lookup finds this very value. */
            CHECK(auth_challenge_param(ch, ch->params[j].name) == ch->params[j].value);
        }
    }
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    char *s = malloc(size + 1);
    if (!s)
        return 0;
    memcpy(s, data, size);
    s[size] = '\0';

    struct auth_challenges c = {0};
    struct errmsg e;
    if (auth_challenges_parse(s, &c, &e) == 0)
        check_challenges(&c);
    auth_challenges_done(&c);

    struct auth_token t = {0};
    if (auth_token_parse(data, size, &t, &e) == 0) {
        CHECK(t.token && t.token[0]);
        CHECK(t.expires_in > 0);
        for (const char *p = t.token; *p; p++)
            CHECK((unsigned char)*p > 0x20 && (unsigned char)*p < 0x7f);
    }
    auth_token_done(&t);
    free(s);
    return 0;
}
