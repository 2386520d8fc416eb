/* The audit log of control-API writes: one JSON object a line, appended, for every write that
 * was attempted, whether it was allowed or not. */
#pragma once

#include <jansson.h>
#include <sys/types.h>

#include "lib/errmsg.h"

struct audit;

/* Opens (creating, mode 0640) the log at path for appending. Returns 0 or -errno with e set. */
int audit_open(const char *path, struct audit **ret, struct errmsg *e);
void audit_close(struct audit *a);

/* Appends one record: who (uid, gid, pid and the user name when known), what (method, path,
 * the request body as JSON or NULL), and the outcome (HTTP status and a short text). Each record
 * is written with one write(2) on an O_APPEND fd, so concurrent writers never interleave.
 * Attempts that changed nothing (any outcome but "requested" and "applied": "denied",
 * "refused", "failed") are recorded at most 10 a second; the next one recorded says how many
 * were left out ("denied_not_recorded"). A request over 16 KiB of JSON is recorded as its size
 * ({"omitted_bytes": N}). Safe from any thread. Returns 0 or -errno. */
int audit_record(struct audit *a, uid_t uid, gid_t gid, pid_t pid, const char *method,
                 const char *path, json_t *request, unsigned status, const char *outcome);
