/* Running a cmocka group with each case in a process of its own, for every component's unit
 * tests: a case that crashes (a signal, a sanitizer's report and exit) is reported as that
 * case's failure, and the cases after it still run and report, where one process for the whole
 * group would end at the crash. Cases run one after another, in order, so their output reads as
 * cmocka's own; each leaves its leaks to its own process's report.
 *
 *     return test_run_cases(tests);
 *
 * for a group without group setup or teardown. Include after <cmocka.h>. */
#pragma once

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <sys/wait.h>
#include <unistd.h>

static inline int test_run_isolated(const struct CMUnitTest *tests, size_t n)
{
    int failed = 0;
    for (size_t i = 0; i < n; i++) {
        fflush(NULL);
        pid_t pid = fork();
        if (pid < 0) {
            perror("fork");
            return 1;
        }
        if (pid == 0)
            exit(_cmocka_run_group_tests(tests[i].name, &tests[i], 1, NULL, NULL) ? 1 : 0);
        int status;
        while (waitpid(pid, &status, 0) < 0)
            if (errno != EINTR) {
                perror("waitpid");
                return 1;
            }
        if (WIFEXITED(status) && WEXITSTATUS(status) == 0)
            continue;
        failed++;
        if (WIFSIGNALED(status))
            printf("[  CRASHED ] %s: killed by signal %d\n", tests[i].name, WTERMSIG(status));
        else if (WEXITSTATUS(status) != 1)
            printf("[  CRASHED ] %s: exit status %d\n", tests[i].name, WEXITSTATUS(status));
    }
    printf("[==========] %zu case(s), each in a process of its own: %d failed\n", n, failed);
    return failed ? 1 : 0;
}

#define test_run_cases(tests) test_run_isolated((tests), sizeof(tests) / sizeof((tests)[0]))
