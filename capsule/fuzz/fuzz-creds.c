/* libFuzzer target: the credentials parsers on arbitrary text. Text that starts with '{' is read
 * as Docker's config.json, anything else as a netrc-style file. Found credentials are complete
 * strings and respect the user asked for; failures say what was wrong. */
#include <errno.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "capsule/image/creds.h"
#include "lib/fuzz-check.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);
int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    static const char *const hosts[] = {"nvcr.io", "docker.io", "localhost:5000", "[::1]:5000",
                                        "ghcr.io"};
    static const char *const users[] = {NULL, "$oauthtoken", "alice"};
    const char *text = (const char *)data;
    size_t skip = 0;

    while (skip < size && strchr(" \t\r\n", text[skip]) && text[skip])
        skip++;
    bool json = skip < size && text[skip] == '{';
    for (size_t h = 0; h < sizeof(hosts) / sizeof(hosts[0]); h++)
        for (size_t u = 0; u < sizeof(users) / sizeof(users[0]); u++) {
            struct creds c = {};
            struct errmsg e = {""};
            int k = json ? creds_from_docker_config("config.json", text, size, hosts[h], users[u],
                                                    &c, &e)
                         : creds_from_netrc("credentials", text, size, hosts[h], users[u], &c, &e);
            CHECK(k == 0 || k == 1 || k == -EINVAL || k == -ENOMEM);
            if (k < 0)
                CHECK(k == -ENOMEM || e.text[0] != '\0');
            if (k != 1) {
                CHECK(!c.user && !c.password);
                continue;
            }
            CHECK(c.user && c.password);
            CHECK(!users[u] || strcmp(c.user, users[u]) == 0);
            creds_done(&c);
            CHECK(!c.user && !c.password);
        }
    return 0;
}
