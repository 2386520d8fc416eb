/* coold's Prometheus exposition. */
#pragma once

#include <stddef.h>

#include "lib/prom.h"
#include "view.h"

/* Renders every coold_* family from a view. Returns 0 with a malloc'd text in *ret_text (owned
 * by the caller) or a negative errno. */
int metrics_render(const struct coold_view *v, enum prom_format format, char **ret_text,
                   size_t *ret_len);
