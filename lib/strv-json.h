/* String vectors as JSON arrays of strings: what the records and lines of several components
 * (capsule's containers, capsule hold) write. */
#pragma once

#include <jansson.h>

/* A new array with v's strings (v NULL: an empty array); NULL: out of memory. */
json_t *strv_to_json(char *const *v);
