/* gpuq's entry: global options, the command table, and the one place errors are printed. */
#include "gpuq/gpuq/cli.h"

#include <errno.h>
#include <getopt.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "lib/clock.h"
#include "lib/macro.h"

static const struct gpuq_command commands[] = {
    /* submit prints its own help: its options are spec-args' (spec_args_usage). */
    {"submit", cmd_submit, "queue a job: a command, or a Kubernetes Job file", NULL},
    {"ls", cmd_ls, "list jobs: running and pending ones, in scheduling order",
     "Usage: gpuq ls [-a|--all] [-u USER] [-q QUEUE] [-t STATES] [--json]\n"
     "Lists the active jobs of every user, pending ones in the order they will be considered,\n"
     "with their position, estimated start and the reason they wait.\n"
     "  -a, --all         also jobs that have ended (the newest 200)\n"
     "  -u, --user USER   only USER's jobs (a name or a uid)\n"
     "  -q, --queue Q     only the jobs of queue Q\n"
     "  -t, --state LIST  only jobs in these states, e.g. pending,running\n"},
    {"show", cmd_show, "show a job in detail, with its events",
     "Usage: gpuq show [--json] ID\n"
     "Prints every field of the job as 'key: value' lines, then its events.\n"},
    {"cancel", cmd_cancel, "cancel jobs",
     "Usage: gpuq cancel [--json] ID...\n"
     "Cancels each job: a pending one ends at once, a running one gets its checkpoint signal\n"
     "and its grace period. Exits 1 if any id failed.\n"},
    {"hold", cmd_hold, "keep pending jobs from starting",
     "Usage: gpuq hold [--json] ID...\n"
     "A held job keeps its place but does not start until released. Pending jobs only.\n"},
    {"release", cmd_release, "release held jobs", "Usage: gpuq release [--json] ID...\n"},
    {"checkpoint", cmd_checkpoint, "report that a job has just written a checkpoint",
     "Usage: gpuq checkpoint [--json] [ID]\n"
     "Records that the job has just saved its work, so that a preemption prefers jobs that\n"
     "would lose less. Without ID it names the job it runs in (from inside a job, e.g. right\n"
     "after torch.save): gpuqd finds it by the caller's cgroup, or by $GPUQ_JOB_ID.\n"},
    {"logs", cmd_logs, "print a job's output",
     "Usage: gpuq logs [-f|--follow] ID\n"
     "Prints the job's output (stdout and stderr) from the start. With -f, keeps printing\n"
     "what the job writes until it has ended, as tail -f does.\n"},
    {"queues", cmd_queues, "list queues: quotas in effect, usage, windows",
     "Usage: gpuq queues [--json]\n"
     "One line per queue: service class, priority, quota in effect (used/limit per resource),\n"
     "what it borrows beyond its quota, the open calendar window and when the quota changes\n"
     "next, and its pending and running jobs.\n"},
    {"drain", cmd_drain, "stop every job and start none (admin)",
     "Usage: gpuq drain [--grace-max DURATION] [--wait DURATION] [--json]\n"
     "Preempts every running job with its checkpoint signal and grace period (at most\n"
     "--grace-max, else gpuqd's drain_grace_max) and starts nothing until `gpuq resume`.\n"
     "Preempted jobs are requeued. With --wait, waits until every job has stopped or the\n"
     "time has passed, and says how many are still stopping.\n"
     "Durations: 90, 30s, 5m, 1h.\n"},
    {"resume", cmd_resume, "start jobs again after a drain (admin)",
     "Usage: gpuq resume [--json]\n"},
    {"version", cmd_version, "print gpuq's version", "Usage: gpuq version\n"},
};

static void usage(FILE *f)
{
    fputs("Usage: gpuq [--socket PATH] COMMAND [ARGS...]\n"
          "Submits and watches jobs of gpuqd, this node's GPU job queue.\n\n"
          "Options:\n"
          "  --socket PATH  gpuqd's control socket (default $" GPUQ_ENV_SOCKET
          ", else " GPUQ_DEFAULT_SOCKET ")\n"
          "  --json         print gpuqd's JSON replies instead of tables\n"
          "  -h, --help     this help; gpuq COMMAND --help for a command's\n"
          "  --version      print the version\n\n"
          "Commands:\n",
          f);
    for (size_t i = 0; i < ELEMENTSOF(commands); i++)
        fprintf(f, "  %-11s %s\n", commands[i].name, commands[i].summary);
    fputs("\nExit status: 0 ok, 1 error, 2 bad arguments; submit --wait: the job's.\n", f);
}

int cmd_version(struct gpuq_cli *c, int argc, char *argv[], struct errmsg *e)
{
    if (argc > 1)
        return errmsg_set(e, -GPUQ_E_USAGE, "version: unexpected argument '%s'", argv[1]);
    fprintf(c->out, "gpuq %s\n", GPUNODE_VERSION);
    return GPUQ_EXIT_OK;
}

int gpuq_parse_id(const char *cmd, const char *s, uint64_t *ret, struct errmsg *e)
{
    char *end;
    errno = 0;
    unsigned long long v = strtoull(s, &end, 10);
    if (errno || end == s || *end || s[0] < '0' || s[0] > '9' || v == 0 || v > (1ULL << 53))
        return errmsg_set(e, -GPUQ_E_USAGE, "%s: '%s' is not a job id", cmd, s);
    *ret = v;
    return 0;
}

int gpuq_option_error(const char *cmd, int opt, char *argv[], struct errmsg *e)
{
    const char *arg = argv[optind - 1];
    if (opt == ':')
        return errmsg_set(e, -GPUQ_E_USAGE, "%s: option '%s' needs a value", cmd, arg);
    return errmsg_set(e, -GPUQ_E_USAGE, "%s: unknown option '%s' (see gpuq %s --help)", cmd, arg,
                      cmd);
}

void gpuq_sleep(double seconds)
{
    struct timespec ts = {(time_t)seconds, (long)((seconds - (double)(time_t)seconds) * 1e9)};
    while (nanosleep(&ts, &ts) < 0 && errno == EINTR)
        ;
}

enum { OPT_SOCKET = 0x100, OPT_JSON, OPT_VERSION };

static const struct option global_options[] = {
    {"socket", required_argument, NULL, OPT_SOCKET},
    {"json", no_argument, NULL, OPT_JSON},
    {"help", no_argument, NULL, 'h'},
    {"version", no_argument, NULL, OPT_VERSION},
    {},
};

/* Parses the options before the command. Returns 1 to go on, 0 when done (help, version), or a
 * negative error. */
static int parse_globals(struct gpuq_cli *c, int argc, char *argv[], struct errmsg *e)
{
    int opt;
    /* optind 0 makes glibc start over, so gpuq_cli_run() can run more than once in a process. */
    optind = 0;
    opterr = 0;
    while ((opt = getopt_long(argc, argv, "+:h", global_options, NULL)) != -1) {
        switch (opt) {
        case OPT_SOCKET:
            c->socket = optarg;
            break;
        case OPT_JSON:
            c->json = true;
            break;
        case 'h':
            usage(c->out);
            return 0;
        case OPT_VERSION:
            fprintf(c->out, "gpuq %s\n", GPUNODE_VERSION);
            return 0;
        case ':':
            return errmsg_set(e, -GPUQ_E_USAGE, "option '%s' needs a value", argv[optind - 1]);
        default:
            return errmsg_set(e, -GPUQ_E_USAGE, "unknown option '%s' (see gpuq --help)",
                              argv[optind - 1]);
        }
    }
    return 1;
}

/* Takes the options every command shares out of its arguments, as people type them
 * (`gpuq ls --json` is `gpuq --json ls`): --json, --socket PATH, --socket=PATH, up to a "--",
 * which stays for the command (submit's command follows it). Returns the new argc, or
 * -GPUQ_E_USAGE. Sets *ret_help when -h or --help was among them. */
static int take_shared_options(struct gpuq_cli *c, int argc, char *argv[], bool *ret_help,
                               struct errmsg *e)
{
    int out = 1;
    bool rest = false;
    *ret_help = false;
    for (int i = 1; i < argc; i++) {
        const char *a = argv[i];
        if (rest || strcmp(a, "--") == 0) {
            rest = true;
            argv[out++] = argv[i];
        } else if (strcmp(a, "--json") == 0)
            c->json = true;
        else if (strcmp(a, "--socket") == 0) {
            if (i + 1 >= argc)
                return errmsg_set(e, -GPUQ_E_USAGE, "option '--socket' needs a value");
            c->socket = argv[++i];
        } else if (strncmp(a, "--socket=", 9) == 0)
            c->socket = a + 9;
        else {
            if (strcmp(a, "-h") == 0 || strcmp(a, "--help") == 0)
                *ret_help = true;
            argv[out++] = argv[i];
        }
    }
    argv[out] = NULL;
    return out;
}

static const struct gpuq_command *command_find(const char *name)
{
    for (size_t i = 0; i < ELEMENTSOF(commands); i++)
        if (strcmp(commands[i].name, name) == 0)
            return &commands[i];
    return NULL;
}

static int dispatch(struct gpuq_cli *c, int argc, char *argv[], struct errmsg *e)
{
    int r = parse_globals(c, argc, argv, e);
    if (r <= 0)
        return r;
    if (optind >= argc)
        return errmsg_set(e, -GPUQ_E_USAGE, "no command given (see gpuq --help)");
    const struct gpuq_command *cmd = command_find(argv[optind]);
    if (!cmd)
        return errmsg_set(e, -GPUQ_E_USAGE, "unknown command '%s' (see gpuq --help)", argv[optind]);
    /* submit's arguments are the job's: its options and the command are parsed by spec-args,
     * which knows which options take values; cmd-submit.c takes out gpuq's own. */
    int first = optind;
    optind = 0;
    if (strcmp(cmd->name, "submit") == 0)
        return cmd->run(c, argc - first, argv + first, e);
    bool help;
    int n = take_shared_options(c, argc - first, argv + first, &help, e);
    if (n < 0)
        return n;
    if (help) {
        fputs(cmd->help, c->out);
        return 0;
    }
    return cmd->run(c, n, argv + first, e);
}

int gpuq_cli_run(int argc, char *argv[], FILE *out, FILE *err)
{
    const char *env = getenv(GPUQ_ENV_SOCKET);
    struct gpuq_cli c = {
        .socket = env && *env ? env : GPUQ_DEFAULT_SOCKET,
        .timeout_ms = GPUQ_DEFAULT_TIMEOUT_MS,
        .out = out,
        .err = err,
    };
    struct errmsg e = {""};
    int r = dispatch(&c, argc, argv, &e);
    fflush(out);
    if (r >= 0)
        return r;
    fprintf(err, "gpuq: %s\n", e.text[0] ? e.text : strerror(r > -4096 ? -r : EIO));
    return r == -GPUQ_E_USAGE ? GPUQ_EXIT_USAGE : GPUQ_EXIT_FAILURE;
}
