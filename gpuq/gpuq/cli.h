/* gpuq: the command-line client of gpuqd, a thin client of its JSON control API on a Unix socket
 * (docs/gpuq.md; the API in gpuq/gpuqd/). main.c only calls gpuq_cli_run(); the subcommands live
 * one to a file (cmd-*.c) and are dispatched from the table in cli.c, so that tests can run the
 * whole program in-process.
 *
 * Error contract: a subcommand returns its exit status (>= 0), or a negative errno or
 * -GPUQ_E_* with the reason in a `struct errmsg`, which gpuq_cli_run() prints once as
 * "gpuq: <message>" and turns into exit status 1 (2 for -GPUQ_E_USAGE). A subcommand that
 * reports several results itself (cancel of several ids) prints its own lines and returns 1. */
#pragma once

#include <jansson.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>

#include "lib/errmsg.h"

#define GPUQ_DEFAULT_SOCKET     "/run/gpuq/gpuq.sock"
#define GPUQ_ENV_SOCKET         "GPUQ_SOCKET"
#define GPUQ_DEFAULT_TIMEOUT_MS 30000L

enum {
    GPUQ_EXIT_OK = 0,
    GPUQ_EXIT_FAILURE = 1,
    GPUQ_EXIT_USAGE = 2,
};

/* Project error codes, above every errno value. */
enum {
    GPUQ_E_USAGE = 10000, /* bad arguments: exit status 2 */
    GPUQ_E_UNREACHABLE,   /* nothing answers on the socket */
    GPUQ_E_API,           /* gpuqd answered with an error status; gpuq_call() says which */
};

/* What every subcommand needs: where gpuqd is and where to print. */
struct gpuq_cli {
    const char *socket;
    long timeout_ms; /* per request; 0 = no limit */
    bool json;       /* print the API's replies instead of tables */
    FILE *out;
    FILE *err;
};

/* A subcommand gets argv with argv[0] = its own name (getopt_long state reset by the caller). */
typedef int (*gpuq_command_fn)(struct gpuq_cli *c, int argc, char *argv[], struct errmsg *e);

struct gpuq_command {
    const char *name;
    gpuq_command_fn run;
    const char *summary; /* one line for `gpuq --help` */
    const char *help;    /* the whole text for `gpuq NAME --help` */
};

/* Runs gpuq with a full argument vector (argv[0] is the program name), printing results to out
 * and errors to err. Returns the process exit status. getenv(GPUQ_SOCKET) is read here. */
int gpuq_cli_run(int argc, char *argv[], FILE *out, FILE *err);

/* ---- client.c: talking to gpuqd ---- */

/* Sends one request: method "GET"/"POST", path with its query ("/v1/jobs?all=1"), body NULL
 * (no body) or a JSON document (borrowed). On a 2xx reply that is a JSON object returns 0 and
 * hands it to *ret_json (caller owns it; ret_json may be NULL). Errors:
 *   -GPUQ_E_UNREACHABLE "cannot reach gpuqd at PATH: <why> (is gpuqd running?)"
 *   -ETIMEDOUT          gpuqd did not answer within c->timeout_ms
 *   -ENOENT (404), -EPERM (403), -EBUSY (409), -EINVAL (400), -EMSGSIZE (413: the body is
 *                       over what gpuqd reads), -ERANGE (422), -GPUQ_E_API (any other status):
 *                       gpuqd's "error" message as it is
 *   -EBADMSG            a reply that is not a JSON object. */
int gpuq_call(const struct gpuq_cli *c, const char *method, const char *path, json_t *body,
              json_t **ret_json, struct errmsg *e);

/* Appends s to buf (of size size, holding a NUL-terminated string) percent-encoded for a query
 * value: everything but [A-Za-z0-9._~-]. Returns 0, or -ENAMETOOLONG when it does not fit (buf
 * then holds a shorter string). */
int gpuq_query_append(char *buf, size_t size, const char *s);

/* ---- cli.c: what the subcommands share ---- */

/* Parses a job id ("12"; 1 .. 2^53, what a JSON number holds exactly). Returns 0 or
 * -GPUQ_E_USAGE naming cmd. */
int gpuq_parse_id(const char *cmd, const char *s, uint64_t *ret, struct errmsg *e);

/* The usage error for an option getopt_long() returned as '?' or ':' (optopt and optind as it
 * left them). Returns -GPUQ_E_USAGE. */
int gpuq_option_error(const char *cmd, int opt, char *argv[], struct errmsg *e);

/* Sleeps for seconds (restarting after signals). */
void gpuq_sleep(double seconds);

/* ---- the subcommands, one file each ---- */

int cmd_submit(struct gpuq_cli *c, int argc, char *argv[], struct errmsg *e);  /* cmd-submit.c */
int cmd_ls(struct gpuq_cli *c, int argc, char *argv[], struct errmsg *e);      /* cmd-ls.c */
int cmd_show(struct gpuq_cli *c, int argc, char *argv[], struct errmsg *e);    /* cmd-show.c */
int cmd_cancel(struct gpuq_cli *c, int argc, char *argv[], struct errmsg *e);  /* cmd-cancel.c */
int cmd_hold(struct gpuq_cli *c, int argc, char *argv[], struct errmsg *e);    /* cmd-cancel.c */
int cmd_release(struct gpuq_cli *c, int argc, char *argv[], struct errmsg *e); /* cmd-cancel.c */
int cmd_checkpoint(struct gpuq_cli *c, int argc, char *argv[],
                   struct errmsg *e);                                         /* cmd-checkpoint.c */
int cmd_logs(struct gpuq_cli *c, int argc, char *argv[], struct errmsg *e);   /* cmd-logs.c */
int cmd_queues(struct gpuq_cli *c, int argc, char *argv[], struct errmsg *e); /* cmd-queues.c */
int cmd_drain(struct gpuq_cli *c, int argc, char *argv[], struct errmsg *e);  /* cmd-drain.c */
int cmd_resume(struct gpuq_cli *c, int argc, char *argv[], struct errmsg *e); /* cmd-drain.c */
int cmd_version(struct gpuq_cli *c, int argc, char *argv[], struct errmsg *e); /* cli.c */
