/* libFuzzer target: parse_listen_address() on arbitrary text. */
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "lib/config.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);
int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    char *s = strndup((const char *)data, size);
    if (!s)
        return 0;
    char host[16];
    uint16_t port;
    struct errmsg e;
    int r = parse_listen_address(s, host, sizeof(host), &port, &e);
    /* The host must fit the buffer and be a substring of the input (brackets removed). */
    if (r == 0 && (strnlen(host, sizeof(host)) >= sizeof(host) || (host[0] && !strstr(s, host))))
        __builtin_trap();
    free(s);
    return 0;
}
