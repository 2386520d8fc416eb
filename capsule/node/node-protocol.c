/* Checks both sides of the node cache's protocol apply to what crosses the socket. */
#include "capsule/node/node-protocol.h"

#include <string.h>

bool node_authorization_valid(const char *s)
{
    size_t skip;
    if (strncmp(s, "Bearer ", 7) == 0)
        skip = 7;
    else if (strncmp(s, "Basic ", 6) == 0)
        skip = 6;
    else
        return false;
    size_t n = strlen(s);
    if (n > NODE_AUTH_MAX || n == skip)
        return false;
    /* It becomes a header line: nothing that could end it or start another. */
    for (const char *p = s + skip; *p; p++)
        if (*p <= ' ' || *p > '~')
            return false;
    return true;
}

bool node_layer_path_valid(const char *path)
{
    if (path[0] != '/' || strstr(path, "/../") || strpbrk(path, ":,\\\n"))
        return false;
    size_t n = strlen(path);
    return n >= 3 ? strcmp(path + n - 3, "/..") != 0 : true;
}
