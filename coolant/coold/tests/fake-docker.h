/* A fake Docker Engine for the unit tests: lib's HTTP server on a Unix socket that answers the
 * few calls coold makes, records them, and can be told to fail or hang. */
#pragma once

#include <pthread.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "docker.h"
#include "lib/http-server.h"

enum fake_mode {
    FAKE_OK,
    FAKE_FAIL,       /* every request gets 500 {"message": "engine on fire"} */
    FAKE_HANG,       /* every request waits until the fake is freed */
    FAKE_HANG_STOPS, /* lists and answers questions, but stop requests never return */
};

struct fake_container {
    char id[DOCKER_ID_MAX];
    char name[32];
    bool running;
    uint64_t stops_at_us; /* after a stop: reports running until then (0: at once) */
    unsigned linger_ms;   /* how long after its stop request it keeps running */
};

#define FAKE_MAX_CALLS 64

struct fake_docker {
    char dir[64];
    char sock[96];
    struct http_server *srv;
    pthread_mutex_t lock;
    pthread_cond_t cond;
    enum fake_mode mode;
    bool closing;
    struct fake_container c[8];
    size_t n;
    /* Stops are answered only once this many have arrived (0: at once), or after 5 s. */
    unsigned stop_barrier;
    unsigned stops_arrived;
    bool barrier_missed;
    char calls[FAKE_MAX_CALLS][128];
    size_t n_calls;
};

/* Starts a fake engine with n_containers running containers in a new temp dir. */
struct fake_docker *fake_new(size_t n_containers);
void fake_free(struct fake_docker *f);
void fake_set_mode(struct fake_docker *f, enum fake_mode m);
struct fake_container *fake_find(struct fake_docker *f, const char *id, size_t len);
/* Number of recorded calls that start with prefix ("POST /containers/"). */
size_t fake_count_calls(struct fake_docker *f, const char *prefix);
/* A socket at path that accepts connections but never answers. Returns its fd. */
int hung_socket(const char *path);
