/* gpuq: the command-line client of gpuqd. Everything but this lives in the gpuq-cli library
 * (cli.c parses options and dispatches), so that tests can run it in-process. */
#include <stdio.h>

#include "gpuq/gpuq/cli.h"

int main(int argc, char *argv[])
{
    return gpuq_cli_run(argc, argv, stdout, stderr);
}
