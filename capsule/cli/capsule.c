/* capsule: run Docker/OCI images with GPUs, unprivileged. This file is only the table of
 * subcommands; cli_main() does the rest. `pull` runs in capsule-pull (see cli.h for why). */
#include "capsule/cli/cli.h"
#include "capsule/launch.h"
#include "lib/macro.h"

static const struct cli_command commands[] = {
    {"pull", cmd_pull_exec, "pull [-q] [--platform OS/ARCH[/VARIANT]] [--keep-blobs] IMAGE",
     "fetch an image into the cache", 1},
    {"run", cmd_run, "run [-d] [OPTIONS] IMAGE [COMMAND [ARG...]]",
     "run a command in a new container", LAUNCH_EXIT_FAILED},
    {"create", cmd_create, "create --name NAME [OPTIONS] IMAGE [COMMAND [ARG...]]",
     "create a named container (started with `start`)", 1},
    {"start", cmd_start, "start [-a] NAME", "run a created container's command",
     LAUNCH_EXIT_FAILED},
    {"exec", cmd_exec, "exec [-it] [-e K=V] [-w DIR] NAME COMMAND [ARG...]",
     "run a command in a running container", LAUNCH_EXIT_FAILED},
    {"hold", cmd_hold, "hold --fd N [--name NAME [--create-only] [--join]] [OPTIONS] [IMAGE]",
     "hold a container for host processes to join (the Slurm plugin's)", LAUNCH_EXIT_FAILED},
    {"ps", cmd_ps, "ps [-a] [--format json]", "list running (with -a: all) containers", 1},
    {"rm", cmd_rm, "rm [-f] NAME...", "remove containers", 1},
    {"logs", cmd_logs, "logs NAME", "print the output of a container run with `run -d`", 1},
    {"save", cmd_pull_exec, "save --pid PID [--image IMAGE] FILE",
     "write a running container's files to an image archive", 1},
    {"load", cmd_pull_exec, "load [--name NAME] FILE", "put an image archive into the cache", 1},
    {"images", cmd_images, "images [--digests] [--format json] [--node]", "list cached images", 1},
    {"rmi", cmd_rmi, "rmi [-f] IMAGE... | rmi -a",
     "remove images from the cache (layers go at the next gc)", 1},
    {"gc", cmd_gc, "gc [--node [--rekey]]", "remove layers and blobs no image or container uses",
     1},
    {"check", cmd_check, "check [--driver-root DIR]", "diagnose this host", 1},
    {"version", cmd_version_with_helper, "version",
     "print the versions and paths of capsule and capsule-pull", 1},
    {"help", cmd_help, "help [COMMAND]", "show help", 1},
};

int main(int argc, char **argv)
{
    return cli_main(argc, argv, commands, ELEMENTSOF(commands));
}
