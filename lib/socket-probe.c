/* One connect(2) to a Unix socket: see socket-probe.h. */
#include "lib/socket-probe.h"

#include <errno.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/un.h>

#include "lib/macro.h"

int socket_probe(const char *path)
{
    struct sockaddr_un sa = {.sun_family = AF_UNIX};
    size_t n = strlen(path);
    if (n >= sizeof(sa.sun_path))
        return -ENAMETOOLONG;
    memcpy(sa.sun_path, path, n + 1);
    _cleanup_close_ int fd = socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0);
    if (fd < 0)
        return negative_errno();
    if (connect(fd, (struct sockaddr *)&sa, sizeof(sa)) < 0)
        return negative_errno();
    return 0;
}
