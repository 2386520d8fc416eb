/* capsule-pull: the part of capsule that talks to registries (libcurl) and unpacks layers
 * (libarchive). capsule execs it for `capsule pull` and runs it when `capsule run` needs an
 * image, so that capsule itself starts without loading those libraries (cli.h). */
#include "capsule/cli/cli.h"
#include "lib/macro.h"

static const struct cli_command commands[] = {
    {"pull", cmd_pull, "pull [-q] [--platform OS/ARCH[/VARIANT]] [--keep-blobs] IMAGE",
     "fetch an image into the cache", 1},
    {"save", cmd_save, "save --pid PID [--image IMAGE] FILE",
     "write a running container's files to an image archive", 1},
    {"load", cmd_load, "load [--name NAME] FILE", "put an image archive into the cache", 1},
    {"images", cmd_node_images, "images --node [--format json]", "list what the node cache holds",
     1},
    {"gc", cmd_node_gc, "gc --node [--rekey]", "remove what no image of the node cache uses", 1},
    {"version", cmd_version, "version", "print the version and path", 1},
    {"help", cmd_help, "help [COMMAND]", "show help", 1},
};

int main(int argc, char **argv)
{
    return cli_main(argc, argv, commands, ELEMENTSOF(commands));
}
