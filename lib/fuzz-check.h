/* An invariant check for fuzz targets: a violated one aborts, which libFuzzer reports as a crash
 * with the input that caused it. Unlike assert() it stays on in every build type. */
#pragma once

#include <stdio.h>
#include <stdlib.h>

#define CHECK(x)                                                                                   \
    do {                                                                                           \
        if (!(x)) {                                                                                \
            fprintf(stderr, "%s:%d: check failed: %s\n", __FILE__, __LINE__, #x);                  \
            abort();                                                                               \
        }                                                                                          \
    } while (0)
