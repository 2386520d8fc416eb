/* coolctl's entry: global options, the command table, and the one place errors are printed. */
#include "commands.h"

#include <errno.h>
#include <getopt.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "lib/macro.h"

static const struct coolctl_command commands[] = {
    {"status", cmd_status, "controller, protection level, temperatures, pumps at a glance",
     "Usage: coolctl status\n"
     "Shows the controller and its link, the protection level, time to a power cut, coold's\n"
     "safety state and shutdown stage, flow, temperatures and pumps.\n"
     "Exits 3 when the controller link is down or its data is stale (also with --json).\n"},
    {"get", cmd_get, "print all settings, or the named ones",
     "Usage: coolctl get [KEY...]\n"
     "Prints the controller's settings as 'key = value' lines, e.g. coolctl get limit.critical.\n"},
    {"set", cmd_set, "write settings in one atomic write",
     "Usage: coolctl set KEY=VALUE [KEY=VALUE...]\n"
     "Checks the new values against the current settings, writes them all or none, and prints\n"
     "what the controller read back. Example: coolctl set pump.1.min_duty=30\n"},
    {"curve", cmd_curve, "show or set the pump duty curves",
     "Usage: coolctl curve [show [PUMP]]\n"
     "       coolctl curve set PUMP POINTS\n"
     "PUMP is numbered from 1. POINTS are TEMPERATURE:DUTY pairs, e.g. 30:40,45:70,55:100\n"
     "(units allowed: 30C:40%). A curve is refused before anything is written unless its\n"
     "temperatures rise, its duty never falls, it reaches 100 % at the critical temperature,\n"
     "and every duty is at least the pump's minimum duty.\n"},
    {"limits", cmd_limits, "show or set the protection limits",
     "Usage: coolctl limits [show]\n"
     "       coolctl limits set NAME=VALUE...\n"
     "NAMEs: warning, precritical, critical (C), flow_min (L/min), cut_delay, halt_max (s).\n"
     "Requires warning < precritical < critical and every pump curve at 100 % by the critical\n"
     "temperature; written in one atomic write. Example: coolctl limits set warning=42\n"},
    {"events", cmd_events, "print coold's event list",
     "Usage: coolctl events [--limit N]\n"
     "One line per event, oldest first: local time, source, type, message.\n"},
    {"drill", cmd_drill, "run the staged shutdown as a drill",
     "Usage: coolctl drill\n"
     "Runs every shutdown stage without stopping anything or halting, and prints each stage.\n"
     "Exits 1 if a stage failed. Waits up to 150 s unless --timeout is given.\n"},
};

static void usage(FILE *f)
{
    fputs("Usage: coolctl [OPTIONS] COMMAND [ARGS...] [OPTIONS]\n"
          "Reads and changes the immersion-tank cooling controller through coold.\n\n"
          "Options:\n"
          "  --socket PATH      coold's control socket (default $COOLD_SOCKET "
          "or " COOLCTL_DEFAULT_SOCKET ")\n"
          "  --json             print the API's JSON documents\n"
          "  --timeout SECONDS  how long to wait for coold (default 10; drill 150)\n"
          "  -h, --help         this help; COMMAND --help for a command's\n"
          "  --version          print the version\n\n"
          "Commands:\n",
          f);
    for (size_t i = 0; i < ELEMENTSOF(commands); i++)
        fprintf(f, "  %-8s %s\n", commands[i].name, commands[i].summary);
    fputs("\nExit status: 0 ok, 1 error or refused, 2 coold unreachable, 3 (status) controller\n"
          "link down or data stale.\n",
          f);
}

static int parse_timeout(const char *s, long *ret_ms, struct errmsg *e)
{
    char *end;
    errno = 0;
    double v = strtod(s, &end);
    if (errno || end == s || *end || !isfinite(v) || v <= 0 || v > 86400)
        return errmsg_set(e, -EINVAL, "--timeout wants seconds (0 < s <= 86400), not '%s'", s);
    *ret_ms = lround(v * 1000.0);
    if (*ret_ms == 0)
        *ret_ms = 1;
    return 0;
}

enum { OPT_SOCKET = 0x100, OPT_JSON, OPT_TIMEOUT, OPT_VERSION };

static const struct option global_options[] = {
    {"socket", required_argument, NULL, OPT_SOCKET},   {"json", no_argument, NULL, OPT_JSON},
    {"timeout", required_argument, NULL, OPT_TIMEOUT}, {"help", no_argument, NULL, 'h'},
    {"version", no_argument, NULL, OPT_VERSION},       {},
};

/* Applies one global option (OPT_SOCKET, OPT_JSON or OPT_TIMEOUT) with its value. */
static int apply_global(struct coolctl *c, int opt, const char *value, struct errmsg *e)
{
    if (opt == OPT_SOCKET)
        c->socket = value;
    else if (opt == OPT_JSON)
        c->json = true;
    else {
        int r = parse_timeout(value, &c->timeout_ms, e);
        if (r < 0)
            return r;
        c->timeout_set = true;
    }
    return 0;
}

/* Parses the options before the command. Returns 1 to go on, 0 when done (help, version), or a
 * negative error. */
static int parse_globals(struct coolctl *c, int argc, char *argv[], struct errmsg *e)
{
    int opt, r;
    /* optind 0 makes glibc start over, so coolctl_run() can run more than once in a process. */
    optind = 0;
    opterr = 0;
    while ((opt = getopt_long(argc, argv, "+:h", global_options, NULL)) != -1) {
        switch (opt) {
        case OPT_SOCKET:
        case OPT_JSON:
        case OPT_TIMEOUT:
            if ((r = apply_global(c, opt, optarg, e)) < 0)
                return r;
            break;
        case 'h':
            usage(c->out);
            return 0;
        case OPT_VERSION:
            fprintf(c->out, "coolctl %s\n", GPUNODE_VERSION);
            return 0;
        case ':':
            return errmsg_set(e, -EINVAL, "option '%s' needs a value", argv[optind - 1]);
        default:
            return errmsg_set(e, -EINVAL, "unknown option '%s' (see coolctl --help)",
                              argv[optind - 1]);
        }
    }
    return 1;
}

/* The global option that arg spells (--json, --socket[=PATH], --timeout[=S]), or 0; *ret_value
 * points at an inline value, else NULL. */
static int global_option_of(const char *arg, const char **ret_value)
{
    *ret_value = NULL;
    for (const struct option *o = global_options; o->name; o++) {
        if (o->val != OPT_SOCKET && o->val != OPT_JSON && o->val != OPT_TIMEOUT)
            continue;
        size_t n = strlen(o->name);
        if (strncmp(arg, "--", 2) != 0 || strncmp(arg + 2, o->name, n) != 0)
            continue;
        if (arg[2 + n] == '\0')
            return o->val;
        if (arg[2 + n] == '=' && o->has_arg == required_argument) {
            *ret_value = arg + 3 + n;
            return o->val;
        }
    }
    return 0;
}

/* Takes the global options that follow the command out of its arguments, as people type them:
 * `coolctl status --json` is `coolctl --json status`. A "--" ends them and is taken out too, so
 * what follows reaches the command as it is. Returns the new argc. */
static int take_trailing_globals(struct coolctl *c, int argc, char *argv[], struct errmsg *e)
{
    int out = 1;
    for (int i = 1; i < argc; i++) {
        const char *value;
        int opt = strcmp(argv[i], "--") == 0 ? -1 : global_option_of(argv[i], &value);
        if (opt < 0) {
            while (++i < argc)
                argv[out++] = argv[i];
            break;
        }
        if (opt == 0) {
            argv[out++] = argv[i];
            continue;
        }
        bool needs = opt != OPT_JSON && !value;
        if (needs && i + 1 >= argc)
            return errmsg_set(e, -EINVAL, "option '%s' needs a value", argv[i]);
        int r = apply_global(c, opt, needs ? argv[++i] : value, e);
        if (r < 0)
            return r;
    }
    argv[out] = NULL;
    return out;
}

static const struct coolctl_command *command_find(const char *name)
{
    for (size_t i = 0; i < ELEMENTSOF(commands); i++)
        if (strcmp(commands[i].name, name) == 0)
            return &commands[i];
    return NULL;
}

static bool wants_help(int argc, char *argv[])
{
    for (int i = 1; i < argc; i++)
        if (strcmp(argv[i], "-h") == 0 || strcmp(argv[i], "--help") == 0)
            return true;
    return false;
}

static int dispatch(struct coolctl *c, int argc, char *argv[], struct errmsg *e)
{
    int r = parse_globals(c, argc, argv, e);
    if (r <= 0)
        return r;
    if (optind >= argc)
        return errmsg_set(e, -EINVAL, "no command given (see coolctl --help)");
    const struct coolctl_command *cmd = command_find(argv[optind]);
    if (!cmd)
        return errmsg_set(e, -EINVAL, "unknown command '%s' (see coolctl --help)", argv[optind]);
    if (wants_help(argc - optind, argv + optind)) {
        fputs(cmd->help, c->out);
        return 0;
    }
    int n = take_trailing_globals(c, argc - optind, argv + optind, e);
    if (n < 0)
        return n;
    return cmd->run(c, n, argv + optind, e);
}

int coolctl_run(int argc, char *argv[], FILE *out, FILE *err)
{
    const char *env = getenv("COOLD_SOCKET");
    struct coolctl c = {
        .socket = env && *env ? env : COOLCTL_DEFAULT_SOCKET,
        .timeout_ms = COOLCTL_DEFAULT_TIMEOUT_MS,
        .out = out,
        /* fileno() is -1 for memory streams, which are never a terminal. */
        .color = isatty(fileno(out)) == 1 && !getenv("NO_COLOR"),
    };
    struct errmsg e = {""};
    int r = dispatch(&c, argc, argv, &e);
    fflush(out);
    if (r >= 0)
        return r;
    fprintf(err, "coolctl: %s\n", e.text[0] ? e.text : strerror(r > -4096 ? -r : EIO));
    return r == -COOLCTL_E_UNREACHABLE ? COOLCTL_EXIT_UNREACHABLE : COOLCTL_EXIT_FAILURE;
}
