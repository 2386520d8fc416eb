/* EEPROM image persistence: round trip, corruption, atomic replacement. */
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include <cmocka.h>

#include "test-main.h"

#include "sim-eeprom.h"

static char dir[64];
static char path[128];

static int setup(void **state)
{
    snprintf(dir, sizeof(dir), "/tmp/test-sim-eeprom.XXXXXX");
    assert_non_null(mkdtemp(dir));
    snprintf(path, sizeof(path), "%s/eeprom", dir);
    return 0;
}

static int teardown(void **state)
{
    DIR *d = opendir(dir);
    struct dirent *de;
    char p[512];

    while (d && (de = readdir(d)))
        if (de->d_name[0] != '.') {
            snprintf(p, sizeof(p), "%s/%s", dir, de->d_name);
            unlink(p);
        }
    if (d)
        closedir(d);
    rmdir(dir);
    return 0;
}

static void write_file(const char *text)
{
    FILE *f = fopen(path, "we");
    assert_non_null(f);
    fputs(text, f);
    fclose(f);
}

static size_t read_file(char *buf, size_t size)
{
    FILE *f = fopen(path, "re");
    assert_non_null(f);
    size_t n = fread(buf, 1, size - 1, f);
    buf[n] = '\0';
    fclose(f);
    return n;
}

static unsigned count_files(void)
{
    DIR *d = opendir(dir);
    struct dirent *de;
    unsigned n = 0;

    assert_non_null(d);
    while ((de = readdir(d)))
        n += de->d_name[0] != '.';
    closedir(d);
    return n;
}

/* A settings value as GET would show it, to compare settings without struct padding. */
static const char *get(const struct ctl_settings *s, const char *key)
{
    static char buf[4][128];
    static unsigned next;
    char *b = buf[next++ % 4];
    assert_true(ctl_settings_get(s, key, b, sizeof(buf[0])) > 0);
    return b;
}

static void changed_settings(struct ctl_settings *s)
{
    char why[200];
    const struct ctl_field f[] = {
        {"limit.warning", "42"},
        {"limit.cut_delay", "45"},
        {"pump.2.curve", "30:50,40.5:80,50:100"},
        {"host.timeout", "20"},
    };

    ctl_settings_defaults(s, 2);
    assert_int_equal(ctl_settings_apply(s, f, 4, why, sizeof(why)), 0);
}

static void test_round_trip(void **state)
{
    struct ctl_settings s, back;
    struct errmsg e;

    changed_settings(&s);
    assert_int_equal(sim_eeprom_save(path, &s, &e), 0);
    assert_int_equal(sim_eeprom_load(path, 2, &back, &e), 0);
    assert_string_equal(get(&back, "limit.warning"), "42.00");
    assert_string_equal(get(&back, "limit.cut_delay"), "45");
    assert_string_equal(get(&back, "pump.2.curve"), "30:50,40.5:80,50:100");
    assert_string_equal(get(&back, "pump.1.curve"), "30:40,45:70,55:100");
    assert_string_equal(get(&back, "host.timeout"), "20");
    assert_int_equal(back.n_pumps, 2);
    /* Only the image is left: the temporary file was renamed, not copied. */
    assert_int_equal(count_files(), 1);
}

static void test_save_replaces(void **state)
{
    struct ctl_settings s, back;
    struct errmsg e;

    ctl_settings_defaults(&s, 2);
    assert_int_equal(sim_eeprom_save(path, &s, &e), 0);
    changed_settings(&s);
    assert_int_equal(sim_eeprom_save(path, &s, &e), 0);
    assert_int_equal(sim_eeprom_load(path, 2, &back, &e), 0);
    assert_string_equal(get(&back, "limit.warning"), "42.00");
    assert_int_equal(count_files(), 1);
}

static void test_missing(void **state)
{
    struct ctl_settings s;
    struct errmsg e;

    assert_int_equal(sim_eeprom_load(path, 2, &s, &e), -ENOENT);
    assert_int_equal(sim_eeprom_open(path, 2, &s, &e), SIM_EEPROM_DEFAULTS);
    assert_string_equal(get(&s, "limit.warning"), "45.00");
    /* Defaults alone do not create an image. */
    assert_int_equal(count_files(), 0);
}

static void test_bad_crc_resets_to_defaults(void **state)
{
    struct ctl_settings s;
    struct errmsg e;
    char buf[4096];

    changed_settings(&s);
    assert_int_equal(sim_eeprom_save(path, &s, &e), 0);
    read_file(buf, sizeof(buf));
    char *w = strstr(buf, "limit.warning=42");
    assert_non_null(w);
    w[strlen("limit.warning=")] = '3'; /* a flipped digit, as a worn cell would give */
    write_file(buf);

    assert_int_equal(sim_eeprom_load(path, 2, &s, &e), -EBADMSG);
    assert_non_null(strstr(e.text, "CRC"));
    assert_int_equal(sim_eeprom_open(path, 2, &s, &e), SIM_EEPROM_RESET);
    assert_string_equal(get(&s, "limit.warning"), "45.00");
    /* The defaults were written over the corrupt image: the next start loads cleanly. */
    assert_int_equal(sim_eeprom_open(path, 2, &s, &e), SIM_EEPROM_LOADED);
}

static void test_garbage_file(void **state)
{
    struct ctl_settings s;
    struct errmsg e;

    write_file("hello\n");
    assert_int_equal(sim_eeprom_load(path, 2, &s, &e), -EBADMSG);
    write_file("");
    assert_int_equal(sim_eeprom_load(path, 2, &s, &e), -EBADMSG);
}

/* Writes an image whose CRC is right but whose contents the controller refuses. */
static void write_signed(const char *body)
{
    char buf[1024];
    snprintf(buf, sizeof(buf), "%scrc=%04X\n", body, ctl_crc16(body, strlen(body)));
    write_file(buf);
}

static void test_valid_crc_bad_contents(void **state)
{
    struct ctl_settings s;
    struct errmsg e;

    write_signed("pumps=2\nlimit.warning=70\n"); /* above critical */
    assert_int_equal(sim_eeprom_load(path, 2, &s, &e), -EBADMSG);
    write_signed("pumps=2\nfan.speed=3\n");
    assert_int_equal(sim_eeprom_load(path, 2, &s, &e), -EBADMSG);
    write_signed("pumps=2\nno equals sign\n");
    assert_int_equal(sim_eeprom_load(path, 2, &s, &e), -EBADMSG);
    /* An image from a controller with another pump count is not ours. */
    write_signed("pumps=3\n");
    assert_int_equal(sim_eeprom_load(path, 2, &s, &e), -EBADMSG);
    assert_non_null(strstr(e.text, "pumps"));
    /* A valid partial image: what is missing keeps its default. */
    write_signed("pumps=2\nlimit.halt_max=300\n");
    assert_int_equal(sim_eeprom_load(path, 2, &s, &e), 0);
    assert_string_equal(get(&s, "limit.halt_max"), "300");
    assert_string_equal(get(&s, "limit.cut_delay"), "30");
}

static void test_pump_count_saved(void **state)
{
    struct ctl_settings s;
    struct errmsg e;

    ctl_settings_defaults(&s, 1);
    assert_int_equal(sim_eeprom_save(path, &s, &e), 0);
    assert_int_equal(sim_eeprom_load(path, 1, &s, &e), 0);
    assert_int_equal(sim_eeprom_load(path, 2, &s, &e), -EBADMSG);
}

static void test_save_failure_reports_path(void **state)
{
    struct ctl_settings s;
    struct errmsg e;
    char bad[160];

    snprintf(bad, sizeof(bad), "%s/missing/eeprom", dir);
    ctl_settings_defaults(&s, 2);
    assert_int_equal(sim_eeprom_save(bad, &s, &e), -ENOENT);
    assert_non_null(strstr(e.text, bad));
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test_setup_teardown(test_round_trip, setup, teardown),
        cmocka_unit_test_setup_teardown(test_save_replaces, setup, teardown),
        cmocka_unit_test_setup_teardown(test_missing, setup, teardown),
        cmocka_unit_test_setup_teardown(test_bad_crc_resets_to_defaults, setup, teardown),
        cmocka_unit_test_setup_teardown(test_garbage_file, setup, teardown),
        cmocka_unit_test_setup_teardown(test_valid_crc_bad_contents, setup, teardown),
        cmocka_unit_test_setup_teardown(test_pump_count_saved, setup, teardown),
        cmocka_unit_test_setup_teardown(test_save_failure_reports_path, setup, teardown),
    };
    return test_run_cases(tests);
}
