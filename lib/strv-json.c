#include "lib/strv-json.h"

#include <stddef.h>

json_t *strv_to_json(char *const *v)
{
    json_t *a = json_array();
    for (size_t i = 0; a && v && v[i]; i++)
        if (json_array_append_new(a, json_string(v[i])) < 0) {
            json_decref(a);
            return NULL;
        }
    return a;
}
