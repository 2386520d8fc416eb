/* Sizes as people read them, as Docker and the kernel's tools print them. */
#pragma once

#include <stdint.h>

/* "0 B", "532 B", "12.3 MB", "1.05 GB": decimal units, three significant digits, into buf.
 * Returns buf. */
char *units_format_bytes(int64_t bytes, char buf[static 16]);
/* The same in powers of 1024 ("64.0 GiB"), for sizes that settings give in those units. */
char *units_format_binary(int64_t bytes, char buf[static 16]);
