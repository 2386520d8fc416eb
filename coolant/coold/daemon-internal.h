/* The daemon's state, shared by daemon.c (life cycle, main loop) and daemon-glue.c (callbacks
 * between link, safety, shutdown and the API). Not for other modules: they use daemon.h. */
#pragma once

#include <pthread.h>

#include "lib/audit.h"
#include "lib/roles.h"
#include "coold-config.h"
#include "daemon.h"
#include "eventlog.h"
#include "lib/http-server.h"
#include "link.h"
#include "safety.h"
#include "shutdown.h"

struct daemon {
    struct coold_config cfg;

    /* Held by the main loop while it works (never while it sleeps in poll) and by every other
     * thread that touches link or safety. */
    pthread_mutex_t lock;
    pthread_cond_t call_done; /* a daemon_call() completed */

    struct link *link; /* NULL once the daemon is stopping */
    struct safety *safety;
    struct safety_decision decision; /* the last step's; reason not kept */
    enum safety_state last_state;
    uint64_t last_status_at; /* taken_at of the last STATUS seen, to stamp the wall clock */
    double last_success_unix_s;
    char last_alarm_level[16]; /* ALARM repeats every second; log changes only */

    struct shutdown *shutdown;
    struct eventlog *events;
    struct audit *audit;
    struct http_server *api_server;
    struct http_server *metrics_server;

    struct roles roles; /* root and admin_group may write */

    bool stop_noted; /* a stop request waits for a running emergency shutdown */

    int wake_fd;   /* eventfd: other threads ask the main loop to send what they queued */
    int signal_fd; /* SIGTERM, SIGINT, SIGHUP */
};

/* Wires link callbacks into safety and the event list (daemon-glue.c). */
extern const struct link_callbacks daemon_link_callbacks;

/* Runs one safety step and acts on its decision. Called with the lock held. */
void daemon_step_safety(struct daemon *d, uint64_t now);

/* Sends HALT for the shutdown thread (shutdown_halt_fn). */
int daemon_send_halt(unsigned within_s, void *userdata);
void daemon_shutdown_log(enum log_level level, const char *message, void *userdata);
void daemon_shutdown_event(const char *message, json_t *fields, void *userdata);
