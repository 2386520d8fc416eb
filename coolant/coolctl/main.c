/* coolctl: the command-line client of coold. Everything but this lives in libcoolctl
 * (coolctl.c parses options and dispatches), so that the tests can run it in-process. */
#include "coolctl.h"

int main(int argc, char *argv[])
{
    return coolctl_run(argc, argv, stdout, stderr);
}
