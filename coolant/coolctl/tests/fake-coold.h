/* A fake coold for coolctl's tests: the control API on a Unix socket in a temp dir, serving
 * canned status/events/drill documents and settings kept in a struct ctl_settings (validated
 * with the protocol module, as the controller does), and recording every write. */
#pragma once

#include <jansson.h>
#include <pthread.h>
#include <stdbool.h>

#include "ctl-proto.h"
#include "lib/http-server.h"

struct fake_coold {
    char dir[64];
    char socket[128];
    struct http_server *server;
    pthread_mutex_t lock;
    /* What it serves; tests may change them between runs. */
    struct ctl_settings settings;
    json_t *status;
    json_t *events;
    json_t *drill;
    /* When set, every write (PUT/POST) is answered with this status and message... */
    unsigned write_status;
    /* ...and every request at all with this one. */
    unsigned all_status;
    char message[128];
    char group[32];    /* when set, a 403 names it as {"group": ...} */
    unsigned delay_ms; /* every answer waits this long, to test timeouts */
    /* What arrived. */
    unsigned n_requests;
    unsigned n_puts;
    unsigned n_posts;
    json_t *last_put; /* the last PUT body, parsed */
    char last_query_limit[32];
};

/* Creates the temp dir, the settings (factory defaults, two pumps), canned documents and starts
 * the server. Returns 0 or -errno. */
int fake_coold_start(struct fake_coold *f);

/* Stops the server, removes the socket and temp dir, frees everything. */
void fake_coold_stop(struct fake_coold *f);
