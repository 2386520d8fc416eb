/* Tests for the whole-read/whole-write helpers: pipes deliver data in pieces, which is where the
 * loops matter, and the size limit must hold exactly. */
#include <errno.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <signal.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cmocka.h>

#include "test-main.h"

#include "lib/fileio.h"

/* Writes n bytes of a pattern into a pipe from a child, in odd-sized pieces. */
static int pipe_from_child(size_t n)
{
    int p[2];
    assert_int_equal(pipe(p), 0);
    pid_t pid = fork();
    assert_true(pid >= 0);
    if (pid == 0) {
        close(p[0]);
        char *data = malloc(n ? n : 1);
        for (size_t i = 0; i < n; i++)
            data[i] = (char)('a' + i % 26);
        for (size_t off = 0; off < n; off += 777)
            if (fd_write_all(p[1], data + off, n - off < 777 ? n - off : 777) < 0)
                _exit(1);
        _exit(0);
    }
    close(p[1]);
    return p[0];
}

static void test_reads_everything_in_pieces(void **state)
{
    int fd = pipe_from_child(100000);
    char *buf;
    size_t len;
    assert_int_equal(fd_read_all(fd, 1 << 20, &buf, &len), 0);
    assert_int_equal(len, 100000);
    assert_int_equal(buf[len], '\0');
    assert_int_equal(buf[99999], 'a' + 99999 % 26);
    free(buf);
    close(fd);
    int status;
    wait(&status);
    assert_int_equal(WEXITSTATUS(status), 0);
}

static void test_limit_is_exact(void **state)
{
    int fd = pipe_from_child(5000);
    char *buf = NULL;
    size_t len;
    assert_int_equal(fd_read_all(fd, 4999, &buf, &len), -EFBIG);
    assert_null(buf);
    close(fd);
    wait(NULL);
    fd = pipe_from_child(5000);
    assert_int_equal(fd_read_all(fd, 5000, &buf, &len), 0);
    assert_int_equal(len, 5000);
    free(buf);
    close(fd);
    wait(NULL);
    fd = pipe_from_child(0);
    assert_int_equal(fd_read_all(fd, 10, &buf, &len), 0);
    assert_int_equal(len, 0);
    assert_string_equal(buf, "");
    free(buf);
    close(fd);
    wait(NULL);
}

static void test_read_up_to(void **state)
{
    /* Stops when the buffer is full, the rest left in the pipe; or at the end, short. */
    int fd = pipe_from_child(5000);
    char buf[4096];
    size_t len = 7;
    assert_int_equal(fd_read_up_to(fd, buf, 3000, &len), 0);
    assert_int_equal(len, 3000);
    assert_int_equal(buf[2999], 'a' + 2999 % 26);
    assert_int_equal(fd_read_up_to(fd, buf, sizeof(buf), &len), 0);
    assert_int_equal(len, 2000);
    assert_int_equal(buf[0], 'a' + 3000 % 26);
    assert_int_equal(fd_read_up_to(fd, buf, sizeof(buf), &len), 0);
    assert_int_equal(len, 0);
    close(fd);
    wait(NULL);
    len = 7;
    assert_int_equal(fd_read_up_to(-1, buf, sizeof(buf), &len), -EBADF);
    assert_int_equal(len, 7); /* untouched on failure */
}

static void test_write_errors(void **state)
{
    int p[2];
    assert_int_equal(pipe(p), 0);
    close(p[0]);
    signal(SIGPIPE, SIG_IGN);
    assert_int_equal(fd_write_all(p[1], "x", 1), -EPIPE);
    close(p[1]);
    assert_int_equal(fd_write_all(-1, "x", 1), -EBADF);
}

/* Files an administrator names: read whole, a FIFO refused at once instead of waiting for a
 * writer forever (a daemon's start would hang on it), /dev/null an empty file, a device that never
 * ends stopped at the limit. */
static void test_read_text(void **state)
{
    char dir[] = "/tmp/test-fileio-XXXXXX";
    assert_non_null(mkdtemp(dir));
    char file[64], fifo[64];
    snprintf(file, sizeof(file), "%s/f", dir);
    snprintf(fifo, sizeof(fifo), "%s/p", dir);
    FILE *f = fopen(file, "we");
    assert_non_null(f);
    fputs("a = 1\n", f);
    fclose(f);
    assert_int_equal(mkfifo(fifo, 0600), 0);

    char *text = NULL;
    size_t len = 0;
    struct errmsg e = {""};
    assert_int_equal(file_read_text(file, 100, &text, &len, &e), 0);
    assert_string_equal(text, "a = 1\n");
    assert_int_equal(len, 6);
    free(text);
    assert_int_equal(file_read_text(file, 5, &text, &len, &e), -EFBIG);
    assert_non_null(strstr(e.text, "larger than 5 bytes"));
    assert_int_equal(file_read_text(fifo, 100, &text, &len, &e), -EINVAL);
    assert_non_null(strstr(e.text, "a FIFO or socket"));
    assert_int_equal(file_read_text(dir, 100, &text, &len, &e), -EISDIR);
    assert_int_equal(file_read_text("/nonexistent/x", 100, &text, &len, &e), -ENOENT);
    assert_non_null(strstr(e.text, "/nonexistent/x: "));
    assert_int_equal(file_read_text("/dev/null", 100, &text, &len, &e), 0);
    assert_int_equal(len, 0);
    free(text);
    assert_int_equal(file_read_text("/dev/zero", 4096, &text, &len, &e), -EFBIG);

    unlink(fifo);
    unlink(file);
    rmdir(dir);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_reads_everything_in_pieces),
        cmocka_unit_test(test_limit_is_exact),
        cmocka_unit_test(test_read_up_to),
        cmocka_unit_test(test_write_errors),
        cmocka_unit_test(test_read_text),
    };
    return test_run_cases(tests);
}
