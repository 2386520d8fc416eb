/* What the control API and /metrics need from the running daemon. Every function here is safe to
 * call from any thread (HTTP handler threads, the shutdown thread). */
#pragma once

#include <jansson.h>
#include <stdbool.h>
#include <sys/types.h>

#include "lib/audit.h"
#include "ctl-proto.h"
#include "lib/errmsg.h"
#include "eventlog.h"
#include "view.h"

struct daemon;

/* Copies the daemon's current state into *ret. */
void daemon_view(struct daemon *d, struct coold_view *ret);

/* Sends one request to the controller through the main loop and waits for its reply (at most a
 * few seconds: the link's timeout and retries). Returns 0 with the reply in *ret_reply — which
 * may be an ERR reply — or -ENOTCONN (link not up), -ETIMEDOUT (no answer), -EMSGSIZE (the
 * request does not fit in a frame), with e set. */
int daemon_call(struct daemon *d, const char *verb, const struct ctl_field *fields,
                unsigned n_fields, struct ctl_frame *ret_reply, struct errmsg *e);

/* Runs the staged shutdown as a drill and waits for it. Returns 0 with a new JSON array of stage
 * results, or -EBUSY while a shutdown or another drill runs. */
int daemon_drill(struct daemon *d, json_t **ret_stages, struct errmsg *e);

/* True if the peer may change settings or run drills: root, or a member of admin_group. */
bool daemon_may_write(struct daemon *d, uid_t uid, gid_t gid);

struct eventlog *daemon_events(struct daemon *d);
struct audit *daemon_audit(struct daemon *d);
const char *daemon_admin_group(struct daemon *d);
