/* Small helpers used everywhere: scope-bound cleanup, ownership transfer, array sizes. */
#pragma once

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <unistd.h>

#define ELEMENTSOF(a) (sizeof(a) / sizeof((a)[0]))

#define _cleanup_(f) __attribute__((cleanup(f)))

static inline void freep(void *p)
{
    free(*(void **)p);
}

static inline void closep(int *fd)
{
    if (*fd >= 0) {
        int saved = errno;
        close(*fd);
        errno = saved;
    }
}

static inline void fclosep(FILE **f)
{
    if (*f)
        fclose(*f);
}

#define _cleanup_free_   _cleanup_(freep)
#define _cleanup_close_  _cleanup_(closep)
#define _cleanup_fclose_ _cleanup_(fclosep)

/* Defines a cleanup function for a pointer type whose destructor accepts NULL or is guarded. */
#define DEFINE_POINTER_CLEANUP(type, func)                                                         \
    static inline void func##p(type **p)                                                           \
    {                                                                                              \
        if (*p)                                                                                    \
            func(*p);                                                                              \
    }

/* Hands a pointer out of a cleanup scope: returns the value and leaves NULL behind. */
#define TAKE_PTR(p)                                                                                \
    ({                                                                                             \
        __typeof__(p) _tp = (p);                                                                   \
        (p) = NULL;                                                                                \
        _tp;                                                                                       \
    })

/* Same for file descriptors: returns the fd and leaves -1 behind. */
#define TAKE_FD(fd)                                                                                \
    ({                                                                                             \
        int _tf = (fd);                                                                            \
        (fd) = -1;                                                                                 \
        _tf;                                                                                       \
    })

/* A negative errno taken from errno, never 0 even if a libc function forgot to set it. */
static inline int negative_errno(void)
{
    return errno > 0 ? -errno : -EIO;
}

#define STRINGIFY_(x) #x
#define STRINGIFY(x)  STRINGIFY_(x)
