/* libFuzzer target: image_ref_parse() on arbitrary text. A parsed reference must format to a
 * canonical name that parses back to the same fields, and its parts must obey the grammar. */
#include <errno.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "capsule/image/digest.h"
#include "lib/fuzz-check.h"
#include "capsule/image/ref.h"

static bool same(const char *a, const char *b)
{
    return (!a && !b) || (a && b && strcmp(a, b) == 0);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);
int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    struct image_ref r = {}, again = {};
    struct errmsg e = {""};
    char *name = NULL;

    char *s = strndup((const char *)data, size);
    if (!s)
        return 0;
    int k = image_ref_parse(s, &r, &e);
    CHECK(k == 0 || k == -EINVAL || k == -ENOMEM);
    if (k < 0) {
        CHECK(k == -ENOMEM || e.text[0] != '\0');
        CHECK(!r.registry && !r.repository); /* untouched on failure */
        for (const char *p = e.text; *p; p++)
            CHECK((unsigned char)*p >= 0x20 && *p != 0x7f);
        free(s);
        return 0;
    }
    CHECK(r.registry && *r.registry && r.repository && *r.repository);
    CHECK(r.tag || r.digest);
    CHECK(!r.digest || digest_valid(r.digest));
    CHECK(!r.tag || (strlen(r.tag) >= 1 && strlen(r.tag) <= 128));
    CHECK(strlen(r.repository) <= 255);
    CHECK(!strchr(r.repository, ':') && !strchr(r.repository, '@'));
    CHECK(image_ref_api_host(&r) != NULL);
    (void)image_ref_is_loopback(r.registry);

    CHECK(image_ref_format(&r, &name) == 0);
    int k2 = image_ref_parse(name, &again, &e);
    if (k2 != 0)
        fprintf(stderr, "'%s' -> '%s': %s\n", s, name, e.text);
    CHECK(k2 == 0);
    CHECK(same(again.registry, r.registry) && same(again.repository, r.repository) &&
          same(again.tag, r.tag) && same(again.digest, r.digest));
    CHECK(!again.user);
    image_ref_done(&again);
    image_ref_done(&r);
    free(name);
    free(s);
    return 0;
}
