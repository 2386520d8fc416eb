/* Tests for gpumon/pci-gpus.c: PCI addresses in sysfs' and NVML's forms, and the set of GPUs
 * bound to the nvidia driver read from a sysfs tree made here. */
#include <errno.h>
#include <limits.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cmocka.h>

#include "test-main.h"

#include "pci-gpus.h"

static char root[PATH_MAX];

/* root/rel, in a static buffer. */
static const char *at(const char *rel)
{
    static char path[2 * PATH_MAX];
    int n = snprintf(path, sizeof(path), "%s/%s", root, rel);
    assert_true(n > 0 && (size_t)n < sizeof(path));
    return path;
}

static void make_dir(const char *rel)
{
    assert_int_equal(mkdir(at(rel), 0755), 0);
}

static void write_rel(const char *rel, const char *text)
{
    FILE *f = fopen(at(rel), "we");
    assert_non_null(f);
    fputs(text, f);
    assert_int_equal(fclose(f), 0);
}

/* A device directory under the driver, with its class file. */
static void add_device(const char *addr, const char *class)
{
    char rel[256];
    int n = snprintf(rel, sizeof(rel), "bus/pci/drivers/nvidia/%s", addr);
    assert_true(n > 0 && (size_t)n < sizeof(rel) - 8);
    make_dir(rel);
    strcat(rel, "/class");
    write_rel(rel, class);
}

static int setup(void **state)
{
    snprintf(root, sizeof(root), "/tmp/gn-pci-XXXXXX");
    assert_non_null(mkdtemp(root));
    make_dir("bus");
    make_dir("bus/pci");
    make_dir("bus/pci/drivers");
    make_dir("bus/pci/drivers/nvidia");
    return 0;
}

static int teardown(void **state)
{
    char cmd[PATH_MAX + 16];
    snprintf(cmd, sizeof(cmd), "rm -rf '%s'", root);
    assert_int_equal(system(cmd), 0);
    return 0;
}

static void test_address_forms(void **state)
{
    uint64_t a, b;
    assert_int_equal(pci_address_parse("0000:3b:00.0", &a), 0);
    assert_int_equal(pci_address_parse("00000000:3B:00.0", &b), 0);
    assert_true(a == b);
    assert_int_equal(pci_address_parse("0001:3b:00.0", &b), 0);
    assert_true(a != b);
    assert_int_equal(pci_address_parse("0000:3b:00.1", &b), 0);
    assert_true(a != b);
    static const char *const bad[] = {"",
                                      "3b:00.0",
                                      "0000:3b:00",
                                      "0000:3b:00.8",
                                      "0000:3b:20.0",
                                      "0000:3g:00.0",
                                      "0000:3b:00.0x",
                                      "bind",
                                      "new_id",
                                      "000:3b:00.0",
                                      "000000000:3b:00.0"};
    for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++)
        assert_int_equal(pci_address_parse(bad[i], &a), -EINVAL);
}

static void test_read_counts_display_devices_only(void **state)
{
    add_device("0000:3b:00.0", "0x030200\n"); /* 3D controller: H100, A100 */
    add_device("0000:1b:00.0", "0x030000\n"); /* VGA controller: GeForce */
    add_device("0000:c5:00.0", "0x068000\n"); /* an NVSwitch bridge: not a GPU */
    make_dir("bus/pci/drivers/nvidia/module");
    write_rel("bus/pci/drivers/nvidia/bind", "");
    write_rel("bus/pci/drivers/nvidia/new_id", "");
    struct pci_gpus set;
    assert_int_equal(pci_gpus_read(root, &set), 0);
    assert_int_equal(set.n, 2);
    assert_true(set.addr[0] < set.addr[1]); /* sorted, so sets compare by content */
    assert_true(pci_gpus_has(&set, "00000000:3B:00.0"));
    assert_true(pci_gpus_has(&set, "0000:1b:00.0"));
    assert_false(pci_gpus_has(&set, "0000:c5:00.0"));
    assert_false(pci_gpus_has(&set, ""));
}

static void test_equal_is_by_content(void **state)
{
    add_device("0000:3b:00.0", "0x030200\n");
    add_device("0000:1b:00.0", "0x030200\n");
    struct pci_gpus before, after;
    assert_int_equal(pci_gpus_read(root, &before), 0);
    assert_int_equal(pci_gpus_read(root, &after), 0);
    assert_true(pci_gpus_equal(&before, &after));
    /* One GPU gone and another come within one look: same count, another set. */
    assert_int_equal(unlink(at("bus/pci/drivers/nvidia/0000:1b:00.0/class")), 0);
    assert_int_equal(rmdir(at("bus/pci/drivers/nvidia/0000:1b:00.0")), 0);
    add_device("0000:5d:00.0", "0x030200\n");
    assert_int_equal(pci_gpus_read(root, &after), 0);
    assert_int_equal(after.n, before.n);
    assert_false(pci_gpus_equal(&before, &after));
}

static void test_no_driver_directory(void **state)
{
    struct pci_gpus set = {.n = 7};
    assert_int_equal(pci_gpus_read(at("nothing"), &set), -ENOENT);
    assert_int_equal(set.n, 7); /* untouched on failure */
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_address_forms),
        cmocka_unit_test_setup_teardown(test_read_counts_display_devices_only, setup, teardown),
        cmocka_unit_test_setup_teardown(test_equal_is_by_content, setup, teardown),
        cmocka_unit_test_setup_teardown(test_no_driver_directory, setup, teardown),
    };
    return test_run_cases(tests);
}
