#pragma once

#include <jansson.h>

#include "view.h"

/* Returns a new reference to the /v1/status document for a view (docs/coold.md), or NULL when
 * out of memory. */
json_t *api_status_json(const struct coold_view *v);
