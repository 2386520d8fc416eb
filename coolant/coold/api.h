/* coold's JSON control API (docs/coold.md): an http_handler_fn for the Unix-socket server, and
 * the /metrics handler for the TCP one. userdata is the struct daemon. */
#pragma once

#include "lib/http-server.h"

void api_handle(const struct http_request *req, struct http_reply *reply, void *userdata);
void api_handle_metrics(const struct http_request *req, struct http_reply *reply, void *userdata);
