/* A fake gpuqd for the unit tests: lib's HTTP server on a Unix socket that answers the two calls
 * coold's shutdown makes (POST /v1/drain, GET /v1/status) the way gpuqd does, records them, and
 * can be told to fail. Its jobs stop a set time after the drain's signal, or at the drain's
 * grace_max (gpuqd's SIGKILL), whichever comes first. */
#pragma once

#include <pthread.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "lib/http-server.h"

enum fake_gpuqd_mode {
    FAKE_GPUQD_OK,
    FAKE_GPUQD_FAIL,   /* every request gets 500 {"error": "store is read-only"} */
    FAKE_GPUQD_DENIED, /* every drain gets 403, as for a caller that is not an admin */
};

#define FAKE_GPUQD_MAX_CALLS 16

struct fake_gpuqd {
    char dir[64];
    char sock[96];
    struct http_server *srv;
    pthread_mutex_t lock;
    pthread_cond_t cond;
    bool closing;
    /* Set by the test before the calls: */
    enum fake_gpuqd_mode mode;
    unsigned running;  /* running jobs */
    unsigned pending;  /* pending jobs */
    double job_stop_s; /* how long a job's checkpoint takes after its signal */
    bool unkillable;   /* jobs ignore even SIGKILL (stuck in the kernel): never stop */
    const char *trace; /* NULL, or a file the fake appends "drain\n" / "status\n" to */
    /* What the calls did: */
    bool drained;
    double grace_max; /* of the last drain; -1 when absent */
    double wait;      /* of the last drain; -1 when absent */
    char calls[FAKE_GPUQD_MAX_CALLS][64];
    size_t n_calls;
};

/* Starts a fake gpuqd with `running` running jobs in a new temp dir. */
struct fake_gpuqd *fake_gpuqd_new(unsigned running);
void fake_gpuqd_free(struct fake_gpuqd *f);
/* Number of recorded calls ("POST /v1/drain") that start with prefix. */
size_t fake_gpuqd_count_calls(struct fake_gpuqd *f, const char *prefix);
