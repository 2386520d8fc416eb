/* The sampler (and the HTTP server on top of it) against the fake NVML (FAKE_NVML_LIB), with
 * fixtures written into a temporary directory and rewritten while the sampler runs.
 *
 * Waits poll the published snapshot with generous timeouts; nothing asserts on speed. */
#include <errno.h>
#include <limits.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include <cmocka.h>

#include "lib/clock.h"
#include "lib/http-client.h"
#include "sampler.h"
#include "server.h"

static char dir[] = "/tmp/test-sampler-XXXXXX";
static char fixture[PATH_MAX], proc_root[PATH_MAX];

#define UUID0   "GPU-00000000-0000-0000-0000-000000000000"
#define UUID1   "GPU-11111111-1111-1111-1111-111111111111"
#define MIB     1048576ull
#define TIMEOUT 10.0 /* seconds any wait may take before the test fails */

/* ---- fixtures ---- */

static void write_file(const char *path, const char *text)
{
    char tmp[PATH_MAX + 8];
    snprintf(tmp, sizeof(tmp), "%s.new", path);
    FILE *f = fopen(tmp, "we");
    assert_non_null(f);
    fputs(text, f);
    assert_int_equal(fclose(f), 0);
    /* A new inode, so that readers see a new file even within one mtime tick. */
    assert_int_equal(rename(tmp, path), 0);
}

/* A data-centre GPU with every field; extra is appended inside its object (start it with ","). */
static void gpu_json(char *buf, size_t size, unsigned n, unsigned temperature, const char *extra)
{
    snprintf(
        buf, size,
        "{\"name\": \"NVIDIA A100-SXM4-80GB\", \"uuid\": \"GPU-%1$u%1$u%1$u%1$u%1$u%1$u%1$u%1$u-"
        "%1$u%1$u%1$u%1$u-%1$u%1$u%1$u%1$u-%1$u%1$u%1$u%1$u-%1$u%1$u%1$u%1$u%1$u%1$u%1$u%1$u%1$u%"
        "1$u%1$u%1$u\","
        " \"pci_bus_id\": \"00000000:0%1$u:00.0\", \"minor\": %1$u,"
        " \"cuda_capability\": [8, 0],"
        " \"utilization\": {\"gpu\": 87, \"memory\": 42},"
        " \"memory\": {\"total\": 85899345920, \"used\": 40802189312,"
        "  \"reserved\": 1073741824},"
        " \"temperature\": %2$u, \"memory_temperature\": 66,"
        " \"power_usage_mw\": 301250, \"power_limit_mw\": 400000, \"energy_mj\": 3141592653,"
        " \"clocks\": {\"graphics\": 1410, \"sm\": 1405, \"mem\": 1593, \"video\": 1275},"
        " \"fan_speed\": 40, \"pcie_replay\": 3, \"pcie_tx_kbps\": 400000,"
        " \"pcie_rx_kbps\": 2100000, \"encoder_util\": 5, \"decoder_util\": 7,"
        " \"clock_event_reasons\": 4,"
        " \"ecc\": {\"enabled\": true, \"sbe_volatile\": 1, \"dbe_volatile\": 2,"
        "  \"sbe_aggregate\": 3, \"dbe_aggregate\": 4},"
        " \"remapped_rows\": {\"correctable\": 5, \"uncorrectable\": 6, \"pending\": true,"
        "  \"failure\": false},"
        " \"xid_events\": true %3$s}",
        n, temperature, extra ? extra : "");
}

/* Writes a fixture of one or two such GPUs to path. */
static void write_gpus_to(const char *path, unsigned n_gpus, unsigned temperature,
                          const char *extra0, const char *extra1)
{
    char g0[4096], g1[4096], all[9000];
    gpu_json(g0, sizeof(g0), 0, temperature, extra0);
    gpu_json(g1, sizeof(g1), 1, temperature, extra1);
    snprintf(all, sizeof(all),
             "{\"driver_version\": \"550.127.08\", \"cuda_version\": \"12.4\", \"gpus\": [%s%s%s]}",
             g0, n_gpus > 1 ? ", " : "", n_gpus > 1 ? g1 : "");
    write_file(path, all);
}

/* The same, as the fixture the running fake reads. */
static void write_gpus(unsigned n_gpus, unsigned temperature, const char *extra0,
                       const char *extra1)
{
    write_gpus_to(fixture, n_gpus, temperature, extra0, extra1);
}

/* A process directory under proc_root, as procs_describe() and the start-time check read it. */
static void write_proc(int pid, const char *comm, unsigned long long starttime)
{
    char path[PATH_MAX + 32], text[512];
    snprintf(path, sizeof(path), "%s/%d", proc_root, pid);
    mkdir(path, 0755);
    snprintf(path, sizeof(path), "%s/%d/comm", proc_root, pid);
    snprintf(text, sizeof(text), "%s\n", comm);
    write_file(path, text);
    snprintf(path, sizeof(path), "%s/%d/status", proc_root, pid);
    write_file(path, "Name:\tx\nUid:\t1000\t1000\t1000\t1000\nGid:\t1000\t1000\t1000\t1000\n");
    snprintf(path, sizeof(path), "%s/%d/cgroup", proc_root, pid);
    write_file(path, "0::/system.slice/docker-"
                     "4f1c2a3b5d6e7f8091a2b3c4d5e6f708192a3b4c5d6e7f8091a2b3c4d5e6f708.scope\n");
    snprintf(path, sizeof(path), "%s/%d/stat", proc_root, pid);
    snprintf(text, sizeof(text),
             "%d (%s) S 1 %d %d 0 -1 4194560 100 0 0 0 5 3 0 0 20 0 4 0 %llu 1000000 100 "
             "18446744073709551615 1 1 0 0 0 0 0 0 0 0 0 0 17 1 0 0 0 0 0\n",
             pid, comm, pid, pid, starttime);
    write_file(path, text);
}

/* ---- sampler helpers ---- */

static struct sampler_config config(void)
{
    return (struct sampler_config){
        .nvml_library = getenv("FAKE_NVML_LIB"),
        .hostname = "testhost",
        .proc_root = proc_root,
        .sysfs_root = "", /* not this host's GPUs: the fake's */
        .interval_s = 0.05,
        .slow_interval_s = 0.2,
        .rescan_interval_s = 60, /* no re-load unless a test asks for one */
        .process_metrics = true,
    };
}

static struct sampler *start(const struct sampler_config *c)
{
    struct sampler *s = NULL;
    struct errmsg e = {""};
    assert_int_equal(sampler_new(c, &s, &e), 0);
    assert_non_null(s);
    return s;
}

typedef bool (*snap_pred)(const struct snapshot *snap, const void *arg);

/* The first snapshot for which pred holds; fails the test after TIMEOUT. */
static struct snapshot *wait_for(struct sampler *s, snap_pred pred, const void *arg)
{
    double until = clock_now_sec() + TIMEOUT;
    for (;;) {
        struct snapshot *snap = sampler_current(s);
        if (pred(snap, arg))
            return snap;
        snapshot_unref(snap);
        if (clock_now_sec() > until)
            fail_msg("condition not reached within %.0f s", TIMEOUT);
        usleep(10 * 1000);
    }
}

/* A snapshot taken after `after` (Unix time), i.e. by a pass that started later. */
static bool is_newer(const struct snapshot *snap, const void *arg)
{
    return snap->taken_at > *(const double *)arg;
}

/* Waits for n more passes. */
static void skip_passes(struct sampler *s, int n)
{
    for (int i = 0; i < n; i++) {
        struct snapshot *snap = sampler_current(s);
        double t = snap->taken_at;
        snapshot_unref(snap);
        snapshot_unref(wait_for(s, is_newer, &t));
    }
}

static bool has(const struct gpu_sample *g, enum gpu_field f)
{
    return gpu_values_has(&g->values, f);
}

static const struct proc_sample *find_proc(const struct gpu_sample *g, pid_t pid)
{
    for (unsigned i = 0; i < g->n_proc; i++)
        if (g->proc[i].pid == pid)
            return &g->proc[i];
    return NULL;
}

/* ---- values ---- */

static void check_values(const struct gpu_values *v)
{
    static const struct {
        enum gpu_field f;
        double v;
    } want[] = {
        {GF_GPU_UTIL, 87},
        {GF_MEM_COPY_UTIL, 42},
        {GF_FB_TOTAL, 81920},
        {GF_FB_USED, 38912},
        {GF_FB_FREE, 41984},
        /* used excludes the driver's reservation (1 GiB) */ {GF_GPU_TEMP, 58},
        {GF_MEMORY_TEMP, 66},
        {GF_POWER_USAGE, 301.25},
        {GF_POWER_LIMIT, 400},
        {GF_TOTAL_ENERGY, 3141592653.0},
        {GF_SM_CLOCK, 1405},
        {GF_MEM_CLOCK, 1593},
        {GF_FAN_SPEED, 40},
        {GF_PCIE_REPLAY, 3},
        {GF_ENC_UTIL, 5},
        {GF_DEC_UTIL, 7},
        {GF_CLOCK_EVENTS, 4},
        {GF_ECC_SBE_VOL, 1},
        {GF_ECC_DBE_VOL, 2},
        {GF_ECC_SBE_AGG, 3},
        {GF_ECC_DBE_AGG, 4},
        {GF_ROWS_CORRECTABLE, 5},
        {GF_ROWS_UNCORRECTABLE, 6},
        {GF_ROW_REMAP_PENDING, 1},
        {GF_ROW_REMAP_FAILURE, 0},
    };
    for (size_t i = 0; i < sizeof(want) / sizeof(want[0]); i++) {
        if (!gpu_values_has(v, want[i].f))
            fail_msg("field %d missing", want[i].f);
        /* The fake's energy counter grows with the power drawn since it started. */
        if (want[i].f == GF_TOTAL_ENERGY ? v->v[want[i].f] < want[i].v
                                         : v->v[want[i].f] != want[i].v)
            fail_msg("field %d is %f, want %f", want[i].f, v->v[want[i].f], want[i].v);
    }
    /* PCIe throughput is off unless asked for. */
    assert_false(gpu_values_has(v, GF_PCIE_TX));
    assert_false(gpu_values_has(v, GF_PCIE_RX));
}

static void test_fixture_values(void **state)
{
    write_proc(4242, "trainer", 1000);
    write_gpus(1, 58,
               ",\"processes\": ["
               " {\"pid\": 4242, \"used_memory\": 104857600, \"type\": \"compute\"},"
               " {\"pid\": 4242, \"used_memory\": 52428800, \"type\": \"graphics\"},"
               " {\"pid\": 4343, \"used_memory\": null, \"type\": \"both\"}]",
               NULL);
    struct sampler_config c = config();
    struct timespec t0;
    clock_gettime(CLOCK_REALTIME, &t0);
    struct sampler *s = start(&c);

    /* The first snapshot is there at once, slow fields included. */
    struct snapshot *snap = sampler_current(s);
    assert_true(snap->up);
    assert_string_equal(snap->reason, "");
    assert_string_equal(snap->hostname, "testhost");
    assert_string_equal(snap->driver_version, "550.127.08");
    assert_int_equal(snap->cuda_version, 12040);
    assert_true(snap->taken_at >= t0.tv_sec);
    assert_true(snap->sample_duration >= 0);
    assert_int_equal(snap->n_gpu, 1);
    const struct gpu_sample *g = &snap->gpu[0];
    assert_false(g->lost);
    assert_string_equal(g->id.uuid, UUID0);
    assert_string_equal(g->id.name, "NVIDIA A100-SXM4-80GB");
    assert_string_equal(g->id.pci_bus_id, "00000000:00:00.0");
    assert_null(g->id.mig);
    check_values(&g->values);
    assert_true(g->xid_supported);
    assert_int_equal(snap->nvml_errors, 0);

    /* One process in both lists: one entry, with its usage counted once (NVML gives the whole
     * usage in each list), attributed from proc_root. */
    assert_int_equal(g->n_proc, 2);
    const struct proc_sample *p = find_proc(g, 4242);
    assert_non_null(p);
    assert_true(p->has_memory);
    assert_int_equal(p->memory, 100 * MIB);
    assert_string_equal(p->comm, "trainer");
    assert_int_equal(p->uid, 1000);
    assert_string_equal(p->container, "docker://4f1c2a3b5d6e");
    assert_int_equal(p->gi_id, 0xFFFFFFFFu);
    /* Unknown memory, and no /proc entry: listed, with nothing made up. */
    p = find_proc(g, 4343);
    assert_non_null(p);
    assert_false(p->has_memory);
    assert_int_equal(p->uid, (uid_t)-1);
    assert_string_equal(p->comm, "");
    snapshot_unref(snap);

    /* Passes keep coming, each a new snapshot. */
    skip_passes(s, 3);
    snap = sampler_current(s);
    check_values(&snap->gpu[0].values);
    snapshot_unref(snap);
    sampler_free(s);
}

static void test_pcie_and_no_processes(void **state)
{
    write_gpus(1, 58, ",\"processes\": [{\"pid\": 4242, \"used_memory\": 1048576}]", NULL);
    struct sampler_config c = config();
    c.pcie_throughput = true;
    c.process_metrics = false;
    struct sampler *s = start(&c);
    struct snapshot *snap = sampler_current(s);
    const struct gpu_sample *g = &snap->gpu[0];
    assert_true(has(g, GF_PCIE_TX));
    assert_true(g->values.v[GF_PCIE_TX] == 400000.0 * 1024);
    assert_true(g->values.v[GF_PCIE_RX] == 2100000.0 * 1024);
    assert_int_equal(g->n_proc, 0);
    snapshot_unref(snap);
    sampler_free(s);
}

static bool sm_active(const struct snapshot *snap, const void *arg)
{
    return snap->n_gpu > 0 && has(&snap->gpu[0], GF_PROF_SM_ACTIVE);
}

/* Profiling fields from GPM from the second pass on, only when asked for: a site whose
 * collectors file lists none pays no GPM calls. */
static void test_profiling(void **state)
{
    write_gpus(1, 58, ",\"gpm\": {\"supported\": true, \"metrics\": {\"sm_util\": 42.5}}", NULL);
    struct sampler_config c = config();
    c.profiling = true;
    struct sampler *s = start(&c);
    struct snapshot *snap = wait_for(s, sm_active, NULL);
    assert_true(snap->gpu[0].values.v[GF_PROF_SM_ACTIVE] == 0.425);
    assert_false(has(&snap->gpu[0], GF_PROF_GR_ENGINE_ACTIVE)); /* not in the fixture */
    assert_string_equal(snap->gpu[0].prof_reason, "");
    snapshot_unref(snap);
    sampler_free(s);

    c.profiling = false;
    s = start(&c);
    skip_passes(s, 3);
    snap = sampler_current(s);
    assert_false(has(&snap->gpu[0], GF_PROF_SM_ACTIVE));
    snapshot_unref(snap);
    sampler_free(s);
}

static bool temp_is(const struct snapshot *snap, const void *arg)
{
    return snap->n_gpu > 0 && has(&snap->gpu[0], GF_GPU_TEMP) &&
           snap->gpu[0].values.v[GF_GPU_TEMP] == *(const double *)arg;
}

static bool energy_above(const struct snapshot *snap, const void *arg)
{
    return snap->n_gpu > 0 && has(&snap->gpu[0], GF_TOTAL_ENERGY) &&
           snap->gpu[0].values.v[GF_TOTAL_ENERGY] >= *(const double *)arg;
}

static void test_fixture_change_shows(void **state)
{
    write_gpus(1, 58, NULL, NULL);
    struct sampler_config c = config();
    struct sampler *s = start(&c);
    double t = 58;
    snapshot_unref(wait_for(s, temp_is, &t));

    /* A fast field and a slow one change; both reach the snapshots. */
    char g0[4096], all[5000];
    gpu_json(g0, sizeof(g0), 0, 71, NULL);
    char *e = strstr(g0, "3141592653");
    memcpy(e, "9141592653", 10);
    snprintf(all, sizeof(all), "{\"gpus\": [%s]}", g0);
    write_file(fixture, all);
    t = 71;
    snapshot_unref(wait_for(s, temp_is, &t));
    double energy = 9141592653.0;
    snapshot_unref(wait_for(s, energy_above, &energy));
    sampler_free(s);
}

static bool power_present(const struct snapshot *snap, const void *arg)
{
    return snap->n_gpu > 0 && has(&snap->gpu[0], GF_POWER_USAGE);
}

static void test_not_supported(void **state)
{
    /* A consumer card: no ECC, no remapped rows, no memory temperature; a fan and energy that
     * answer NOT_SUPPORTED; power failing with an error. */
    write_file(fixture,
               "{\"gpus\": [{\"name\": \"NVIDIA GeForce RTX 4090\", \"uuid\": \"" UUID0 "\","
               " \"pci_bus_id\": \"00000000:01:00.0\", \"temperature\": 60,"
               " \"fan_speed\": 30, \"energy_mj\": 5, \"power_usage_mw\": 100000,"
               " \"unsupported\": [\"nvmlDeviceGetFanSpeed\","
               "                   \"nvmlDeviceGetTotalEnergyConsumption\"],"
               " \"errors\": {\"nvmlDeviceGetPowerUsage\": \"UNKNOWN\"}}]}");
    struct sampler_config c = config();
    struct sampler *s = start(&c);
    skip_passes(s, 2);
    struct snapshot *snap = sampler_current(s);
    const struct gpu_sample *g = &snap->gpu[0];
    assert_true(has(g, GF_GPU_TEMP));
    static const enum gpu_field absent[] = {
        GF_FAN_SPEED,   GF_TOTAL_ENERGY, GF_POWER_USAGE,      GF_MEMORY_TEMP,  GF_ECC_SBE_VOL,
        GF_ECC_DBE_AGG, GF_FB_USED,      GF_ROWS_CORRECTABLE, GF_CLOCK_EVENTS,
    };
    for (size_t i = 0; i < sizeof(absent) / sizeof(absent[0]); i++)
        if (has(g, absent[i]))
            fail_msg("field %d should be absent", absent[i]);
    /* The error counts, every pass; NOT_SUPPORTED does not. */
    uint64_t errors = snap->nvml_errors;
    assert_true(errors >= 1);
    snapshot_unref(snap);
    skip_passes(s, 2);
    snap = sampler_current(s);
    assert_true(snap->nvml_errors > errors);
    snapshot_unref(snap);

    /* Now everything answers: the failed call is retried, the unsupported ones are not asked
     * again (until the next rescan interval, a minute here). */
    write_file(fixture,
               "{\"gpus\": [{\"name\": \"NVIDIA GeForce RTX 4090\", \"uuid\": \"" UUID0 "\","
               " \"pci_bus_id\": \"00000000:01:00.0\", \"temperature\": 60,"
               " \"fan_speed\": 30, \"energy_mj\": 5, \"power_usage_mw\": 100000}]}");
    snapshot_unref(wait_for(s, power_present, NULL));
    usleep(3 * 200 * 1000); /* three slow intervals */
    skip_passes(s, 2);
    snap = sampler_current(s);
    assert_false(has(&snap->gpu[0], GF_FAN_SPEED));
    assert_false(has(&snap->gpu[0], GF_TOTAL_ENERGY));
    snapshot_unref(snap);
    sampler_free(s);
}

static bool fan_and_energy_present(const struct snapshot *snap, const void *arg)
{
    return snap->n_gpu > 0 && has(&snap->gpu[0], GF_FAN_SPEED) &&
           has(&snap->gpu[0], GF_TOTAL_ENERGY);
}

/* A field answered NOT_SUPPORTED is asked again every rescan interval, fast and slow ones: a
 * driver update or a mode change may bring it back, and a restart must not be needed. */
static void test_unsupported_reprobed(void **state)
{
    write_gpus(1, 58,
               ",\"unsupported\": [\"nvmlDeviceGetFanSpeed\","
               " \"nvmlDeviceGetTotalEnergyConsumption\"]",
               NULL);
    struct sampler_config c = config();
    c.rescan_interval_s = 0.3;
    struct sampler *s = start(&c);
    struct snapshot *snap = sampler_current(s);
    assert_false(has(&snap->gpu[0], GF_FAN_SPEED));
    assert_false(has(&snap->gpu[0], GF_TOTAL_ENERGY));
    assert_true(has(&snap->gpu[0], GF_GPU_TEMP));
    snapshot_unref(snap);

    write_gpus(1, 58, NULL, NULL);
    snap = wait_for(s, fan_and_energy_present, NULL);
    check_values(&snap->gpu[0].values);
    assert_int_equal(snap->nvml_errors, 0);
    snapshot_unref(snap);
    sampler_free(s);
}

/* Energy takes a second per call: fast snapshots keep coming meanwhile, none of them took that
 * long, and they carry the energy the slow thread read last. */
static void test_slow_call_does_not_delay_fast(void **state)
{
    write_gpus(1, 58, ",\"delay_us\": {\"nvmlDeviceGetTotalEnergyConsumption\": 1000000}", NULL);
    struct sampler_config c = config();
    c.slow_interval_s = 1.0;
    struct sampler *s = start(&c);
    double last = 0, until = clock_now_sec() + 2.5;
    int passes = 0;
    while (clock_now_sec() < until) {
        struct snapshot *snap = sampler_current(s);
        if (snap->taken_at != last) {
            passes++;
            last = snap->taken_at;
            assert_true(snap->sample_duration < 0.5);
            assert_true(has(&snap->gpu[0], GF_TOTAL_ENERGY));
        }
        snapshot_unref(snap);
        usleep(5 * 1000);
    }
    /* About 50 at 50 ms; a pass that waited for energy would allow at most 3. */
    assert_true(passes >= 10);
    sampler_free(s);
}

/* ---- lost GPUs, no driver ---- */

static bool gpu1_lost(const struct snapshot *snap, const void *arg)
{
    return snap->n_gpu >= 2 && snap->gpu[1].lost;
}

static bool gpu1_xid79(const struct snapshot *snap, const void *arg)
{
    return snap->n_gpu >= 2 && snap->gpu[1].last_xid == 79;
}

static void test_gpu_lost(void **state)
{
    write_gpus(2, 58, NULL, ",\"processes\": [{\"pid\": 4242, \"used_memory\": 1048576}]");
    struct sampler_config c = config();
    struct sampler *s = start(&c);
    struct snapshot *snap = sampler_current(s);
    assert_false(snap->gpu[1].lost);
    snapshot_unref(snap);

    write_gpus(2, 58, NULL, ",\"lost_at\": 0");
    snap = wait_for(s, gpu1_lost, NULL);
    /* The lost GPU keeps its identity, shows nothing else; the other one goes on. */
    const struct gpu_sample *g = &snap->gpu[1];
    assert_string_equal(g->id.uuid, UUID1);
    assert_int_equal(g->values.have, 0);
    assert_int_equal(g->n_proc, 0);
    assert_int_equal(g->n_mig, 0);
    assert_false(snap->gpu[0].lost);
    check_values(&snap->gpu[0].values);
    assert_true(snap->nvml_errors >= 1);
    snapshot_unref(snap);

    /* The driver's XID 79 (fallen off the bus) is counted for it. */
    snap = wait_for(s, gpu1_xid79, NULL);
    assert_int_equal(snap->gpu[1].n_xid, 1);
    assert_int_equal(snap->gpu[1].xid[0].xid, 79);
    assert_int_equal(snap->gpu[1].xid[0].count, 1);
    assert_true(snap->gpu[1].lost);
    snapshot_unref(snap);

    /* Lost stays lost: it is not asked again, so no new errors come from it. */
    skip_passes(s, 2);
    snap = sampler_current(s);
    uint64_t errors = snap->nvml_errors;
    snapshot_unref(snap);
    skip_passes(s, 3);
    snap = sampler_current(s);
    assert_int_equal(snap->nvml_errors, errors);
    assert_true(snap->gpu[1].lost);
    snapshot_unref(snap);
    sampler_free(s);
}

static bool gpu1_back(const struct snapshot *snap, const void *arg)
{
    return snap->up && snap->n_gpu == 2 && !snap->gpu[1].lost && has(&snap->gpu[1], GF_GPU_TEMP);
}

/* RESET_REQUIRED and GPU_NOT_FOUND mean the GPU will not answer before a reset: lost at once, like
 * GPU_IS_LOST, rather than shown healthy with its series missing. */
static void test_reset_required_is_lost(void **state)
{
    static const char *const errors[] = {"RESET_REQUIRED", "GPU_NOT_FOUND"};
    for (size_t i = 0; i < sizeof(errors) / sizeof(errors[0]); i++) {
        write_gpus(2, 58, NULL, NULL);
        struct sampler_config c = config();
        struct sampler *s = start(&c);
        char extra[128];
        snprintf(extra, sizeof(extra), ",\"errors\": {\"nvmlDeviceGetTemperature\": \"%s\"}",
                 errors[i]);
        write_gpus(2, 58, NULL, extra);
        struct snapshot *snap = wait_for(s, gpu1_lost, NULL);
        assert_string_equal(snap->gpu[1].id.uuid, UUID1);
        assert_int_equal(snap->gpu[1].values.have, 0);
        assert_false(snap->gpu[0].lost);
        snapshot_unref(snap);
        sampler_free(s);
    }
}

static bool gpu1_energy_above(const struct snapshot *snap, const void *arg)
{
    return gpu1_back(snap, arg) && has(&snap->gpu[1], GF_TOTAL_ENERGY) &&
           snap->gpu[1].values.v[GF_TOTAL_ENERGY] >= *(const double *)arg;
}

/* Every call the fast pass makes on a GPU (gpu_json's), plus the handle lookup that a re-open of
 * NVML would make: a re-open would leave GPU 1 unreadable for good. */
#define ALL_CALLS_FAIL(error)                                                                      \
    ",\"errors\": {\"nvmlDeviceGetUtilizationRates\": \"" error "\","                              \
    " \"nvmlDeviceGetMemoryInfo_v2\": \"" error "\", \"nvmlDeviceGetTemperature\": \"" error "\"," \
    " \"nvmlDeviceGetFieldValues\": \"" error "\", \"nvmlDeviceGetPowerUsage\": \"" error "\","    \
    " \"nvmlDeviceGetEnforcedPowerLimit\": \"" error "\", \"nvmlDeviceGetClockInfo\": \"" error    \
    "\", \"nvmlDeviceGetFanSpeed\": \"" error "\", \"nvmlDeviceGetPcieReplayCounter\": \"" error   \
    "\", \"nvmlDeviceGetEncoderUtilization\": \"" error "\","                                      \
    " \"nvmlDeviceGetDecoderUtilization\": \"" error "\","                                         \
    " \"nvmlDeviceGetCurrentClocksEventReasons\": \"" error "\","                                  \
    " \"nvmlDeviceGetEccMode\": \"" error "\","                                                    \
    " \"nvmlDeviceGetComputeRunningProcesses_v3\": \"" error "\","                                 \
    " \"nvmlDeviceGetGraphicsRunningProcesses_v3\": \"" error "\","                                \
    " \"nvmlDeviceGetTotalEnergyConsumption\": \"" error "\","                                     \
    " \"nvmlDeviceGetRemappedRows\": \"" error "\", \"nvmlDeviceGetHandleByIndex_v2\": \"" error   \
    "\"}"

/* A GPU that answers every call with an error (here UNKNOWN) is shown lost after a few passes,
 * and shown again as soon as it answers; NVML is not re-opened for it. One failing call is not
 * enough. */
static void test_failing_gpu_shown_lost(void **state)
{
    write_gpus(2, 58, NULL, NULL);
    struct sampler_config c = config();
    c.rescan_interval_s = 0.2;
    struct sampler *s = start(&c);

    write_gpus(2, 58, NULL, ",\"errors\": {\"nvmlDeviceGetPowerUsage\": \"UNKNOWN\"}");
    usleep(300 * 1000);
    skip_passes(s, 4);
    struct snapshot *snap = sampler_current(s);
    assert_false(snap->gpu[1].lost);
    assert_true(has(&snap->gpu[1], GF_GPU_TEMP));
    snapshot_unref(snap);

    write_gpus(2, 58, NULL, ALL_CALLS_FAIL("UNKNOWN"));
    snap = wait_for(s, gpu1_lost, NULL);
    assert_string_equal(snap->gpu[1].id.uuid, UUID1);
    assert_int_equal(snap->gpu[1].values.have, 0);
    assert_int_equal(snap->gpu[1].n_proc, 0);
    assert_false(snap->gpu[0].lost);
    check_values(&snap->gpu[0].values);
    uint64_t errors = snap->nvml_errors;
    snapshot_unref(snap);
    usleep(600 * 1000); /* several rescans */
    skip_passes(s, 2);
    snap = sampler_current(s);
    assert_true(snap->gpu[1].lost);
    assert_true(snap->nvml_errors > errors); /* still asked: it is not GPU_IS_LOST */
    snapshot_unref(snap);

    /* Back with its first answer; the slow fields follow with the next slow pass. */
    write_gpus(2, 58, NULL, NULL);
    snapshot_unref(wait_for(s, gpu1_back, NULL));
    double energy = 0;
    snap = wait_for(s, gpu1_energy_above, &energy);
    assert_string_equal(snap->gpu[1].id.uuid, UUID1);
    check_values(&snap->gpu[1].values);
    snapshot_unref(snap);
    sampler_free(s);
}

/* With re-loads: a GPU lost at load time is shown lost under its old identity, and comes back
 * when the driver has it again (after a reset). */
static void test_gpu_back_after_reset(void **state)
{
    write_gpus(2, 58, NULL, NULL);
    struct sampler_config c = config();
    c.rescan_interval_s = 0.2;
    struct sampler *s = start(&c);
    write_gpus(2, 58, NULL, ",\"lost_at\": 0");
    snapshot_unref(wait_for(s, gpu1_lost, NULL));
    usleep(1000 * 1000); /* several re-loads, each finding GPU 1 lost */
    struct snapshot *snap = wait_for(s, gpu1_lost, NULL);
    assert_int_equal(snap->n_gpu, 2);
    assert_string_equal(snap->gpu[1].id.uuid, UUID1);
    assert_string_equal(snap->gpu[1].id.pci_bus_id, "00000000:01:00.0");
    assert_false(snap->gpu[0].lost);
    snapshot_unref(snap);

    write_gpus(2, 58, NULL, NULL);
    snap = wait_for(s, gpu1_back, NULL);
    assert_string_equal(snap->gpu[1].id.uuid, UUID1);
    check_values(&snap->gpu[1].values);
    snapshot_unref(snap);
    sampler_free(s);
}

static bool one_gpu_and_ghost(const struct snapshot *snap, const void *arg)
{
    return snap->n_gpu == 2 && !snap->gpu[0].lost && snap->gpu[1].lost;
}

static bool two_gpus_up(const struct snapshot *snap, const void *arg)
{
    return snap->n_gpu == 2 && !snap->gpu[0].lost && !snap->gpu[1].lost;
}

/* A GPU that NVML stops counting (fell off the bus for good) is not silently dropped. */
static void test_gpu_vanishes(void **state)
{
    write_gpus(2, 58, NULL, NULL);
    struct sampler_config c = config();
    c.rescan_interval_s = 0.2;
    struct sampler *s = start(&c);
    write_gpus(1, 58, NULL, NULL);
    struct snapshot *snap = wait_for(s, one_gpu_and_ghost, NULL);
    assert_string_equal(snap->gpu[0].id.uuid, UUID0);
    assert_string_equal(snap->gpu[1].id.uuid, UUID1);
    assert_int_equal(snap->gpu[1].values.have, 0);
    /* Shown: both; reported by NVML (gpumon_gpus): one. */
    assert_int_equal(snap->n_gpu, 2);
    assert_int_equal(snap->n_nvml_gpu, 1);
    snapshot_unref(snap);

    write_gpus(2, 58, NULL, NULL);
    snap = wait_for(s, two_gpus_up, NULL);
    assert_string_equal(snap->gpu[1].id.uuid, UUID1);
    snapshot_unref(snap);
    sampler_free(s);
}

/* <dir>/sys/bus/pci/drivers/nvidia/<name>/class with class, as the kernel shows a bound device. */
static void add_pci(const char *name, const char *class)
{
    char path[PATH_MAX + 64];
    int n = snprintf(path, sizeof(path), "%s/sys/bus/pci/drivers/nvidia/%s", dir, name);
    assert_true(n > 0 && (size_t)n < sizeof(path) - 8);
    assert_int_equal(mkdir(path, 0755), 0);
    strcat(path, "/class");
    write_file(path, class);
}

/* NVML counts GPUs once per init, so a GPU that the kernel gains (hot-plug, back from a reset) is
 * only seen through the PCI devices bound to the nvidia driver: a change of that set since NVML
 * was opened re-opens it. The fake stands in for a driver that would see two GPUs after a re-init
 * (it reads FAKE_NVML_FIXTURE only at init). */
static void test_pci_count_reopens(void **state)
{
    char sysfs[PATH_MAX], path[PATH_MAX + 64], fixture2[PATH_MAX];
    snprintf(sysfs, sizeof(sysfs), "%s/sys", dir);
    const char *parts[] = {"/sys", "/sys/bus", "/sys/bus/pci", "/sys/bus/pci/drivers",
                           "/sys/bus/pci/drivers/nvidia"};
    for (size_t i = 0; i < sizeof(parts) / sizeof(parts[0]); i++) {
        snprintf(path, sizeof(path), "%s%s", dir, parts[i]);
        assert_int_equal(mkdir(path, 0755), 0);
    }
    /* What else a driver directory holds: files, the module link, an NVSwitch (a bridge). */
    snprintf(path, sizeof(path), "%s/bind", sysfs);
    write_file(path, "");
    snprintf(path, sizeof(path), "%s/bus/pci/drivers/nvidia/module", sysfs);
    assert_int_equal(mkdir(path, 0755), 0);
    add_pci("0000:00:00.0", "0x030200\n");
    add_pci("0000:8a:00.0", "0x068000\n");
    /* A GPU the kernel has and NVML does not count (a container given a subset, or
     * NVreg_ExcludedGpus): a lasting difference, never a reason to re-open. */
    add_pci("0000:02:00.0", "0x030200\n");

    write_gpus(1, 58, NULL, NULL);
    snprintf(fixture2, sizeof(fixture2), "%s/fixture2.json", dir);
    write_gpus_to(fixture2, 2, 58, NULL, NULL);
    struct sampler_config c = config();
    c.sysfs_root = sysfs;
    c.rescan_interval_s = 0.2;
    struct sampler *s = start(&c);
    /* No sampler thread reads the environment until NVML is re-opened. */
    setenv("FAKE_NVML_FIXTURE", fixture2, 1);

    /* Two GPUs in the kernel, one in the model, from the start: no re-open over several rescans
     * (else two GPUs would show). */
    usleep(1000 * 1000);
    skip_passes(s, 2);
    struct snapshot *snap = sampler_current(s);
    assert_int_equal(snap->n_gpu, 1);
    snapshot_unref(snap);

    /* The kernel's set changes: re-open, and NVML (fixture2) now counts two. */
    add_pci("0000:01:00.0", "0x030200\n");
    snap = wait_for(s, two_gpus_up, NULL);
    assert_string_equal(snap->gpu[1].id.uuid, UUID1);
    check_values(&snap->gpu[1].values);
    snapshot_unref(snap);
    sampler_free(s);
    setenv("FAKE_NVML_FIXTURE", fixture, 1);
}

static bool is_up(const struct snapshot *snap, const void *arg)
{
    return snap->up && snap->n_gpu == 1;
}

/* No driver: nvmlInit_v2 fails (the fake answers DRIVER_NOT_LOADED without its fixture file). */
static void no_driver(void)
{
    unlink(fixture);
}

static void test_no_driver_then_driver(void **state)
{
    no_driver();
    struct sampler_config c = config();
    c.rescan_interval_s = 0.2;
    struct sampler *s = start(&c);
    struct snapshot *snap = sampler_current(s);
    assert_false(snap->up);
    assert_non_null(strstr(snap->reason, "Driver Not Loaded"));
    assert_int_equal(snap->n_gpu, 0);
    assert_string_equal(snap->hostname, "testhost");
    snapshot_unref(snap);

    /* The driver appears: picked up without a restart. */
    write_gpus(1, 58, NULL, NULL);
    snap = wait_for(s, is_up, NULL);
    assert_string_equal(snap->reason, "");
    check_values(&snap->gpu[0].values);
    snapshot_unref(snap);
    sampler_free(s);
}

static void test_no_library(void **state)
{
    struct sampler_config c = config();
    c.nvml_library = "/nonexistent/libnvidia-ml.so.1";
    struct sampler *s = start(&c);
    struct snapshot *snap = sampler_current(s);
    assert_false(snap->up);
    assert_non_null(strstr(snap->reason, "/nonexistent/libnvidia-ml.so.1"));
    snapshot_unref(snap);
    sampler_free(s);
}

static void test_bad_intervals(void **state)
{
    struct sampler_config c = config();
    c.interval_s = 0;
    struct sampler *s = NULL;
    struct errmsg e = {""};
    assert_int_equal(sampler_new(&c, &s, &e), -EINVAL);
    assert_null(s);
}

/* ---- older drivers, MIG, process cache ---- */

static void test_old_driver(void **state)
{
    write_gpus(1, 58, ",\"processes\": [{\"pid\": 4242, \"used_memory\": 1048576}]", NULL);
    struct sampler_config c = config();
    c.nvml_library = getenv("FAKE_NVML_OLD_LIB");
    struct sampler *s = start(&c);
    struct snapshot *snap = sampler_current(s);
    const struct gpu_sample *g = &snap->gpu[0];
    assert_true(snap->up);
    /* Clock event reasons through the older ThrottleReasons call. */
    assert_true(has(g, GF_CLOCK_EVENTS));
    assert_true(g->values.v[GF_CLOCK_EVENTS] == 4);
    assert_true(has(g, GF_GPU_TEMP) && has(g, GF_TOTAL_ENERGY));
    /* Before memory info v2 the driver's reservation counts as used. */
    assert_true(g->values.v[GF_FB_USED] == 38912 + 1024);
    assert_true(g->values.v[GF_FB_FREE] == 41984);
    /* What the old library lacks is absent, not an error. */
    assert_false(has(g, GF_MEMORY_TEMP));
    assert_false(has(g, GF_ROWS_CORRECTABLE));
    assert_int_equal(snap->nvml_errors, 0);
    snapshot_unref(snap);
    sampler_free(s);
}

#define MIG_GPU(enabled, instances)                                                                \
    "{\"gpus\": [{\"name\": \"NVIDIA H100 80GB HBM3\", \"uuid\": \"" UUID0 "\","                   \
    " \"pci_bus_id\": \"00000000:1B:00.0\", \"temperature\": 50,"                                  \
    " \"memory\": {\"total\": 85520809984, \"used\": 42949672960},"                                \
    " \"mig_profiles\": [{\"index\": 0, \"id\": 19, \"name\": \"MIG 1g.10gb\", \"slices\": 1,"     \
    "  \"memory_mb\": 9984, \"instances\": 7, \"multiprocessors\": 16}],"                          \
    " \"mig\": {\"enabled\": " enabled ", \"instances\": [" instances "]}}]}"

#define MIG_INSTANCE(gi, uuid, used)                                                               \
    "{\"gi\": " gi ", \"ci\": 0, \"profile_id\": 19, \"uuid\": \"" uuid "\","                      \
    " \"memory\": {\"total\": 10468982784, \"used\": " used "}}"

static bool n_mig_is(const struct snapshot *snap, const void *arg)
{
    return snap->n_gpu == 1 && snap->gpu[0].n_mig == *(const unsigned *)arg;
}

static void test_mig(void **state)
{
    write_file(fixture, MIG_GPU("true", MIG_INSTANCE("9", "MIG-a", "6442450944") "," MIG_INSTANCE(
                                            "10", "MIG-b", "3221225472")));
    struct sampler_config c = config();
    struct sampler *s = start(&c);
    struct snapshot *snap = sampler_current(s);
    const struct gpu_sample *g = &snap->gpu[0];
    assert_int_equal(g->n_mig, 2);
    assert_int_equal(g->mig[0].id.gi_id, 9);
    assert_string_equal(g->mig[0].id.uuid, "MIG-a");
    assert_true(gpu_values_has(&g->mig[0].values, GF_FB_USED));
    assert_true(g->mig[0].values.v[GF_FB_USED] == 6144);
    assert_true(g->mig[1].values.v[GF_FB_USED] == 3072);
    assert_true(g->mig[1].values.v[GF_FB_TOTAL] == 9984);
    snapshot_unref(snap);

    /* Re-partitioned while running: the slow pass notices and the model follows. */
    write_file(fixture, MIG_GPU("true", MIG_INSTANCE("9", "MIG-a", "6442450944") "," MIG_INSTANCE(
                                            "11", "MIG-c",
                                            "1073741824") "," MIG_INSTANCE("12", "MIG-d", "0")));
    unsigned want = 3;
    snap = wait_for(s, n_mig_is, &want);
    assert_int_equal(snap->gpu[0].mig[1].id.gi_id, 11);
    assert_string_equal(snap->gpu[0].mig[1].id.uuid, "MIG-c");
    assert_true(snap->gpu[0].mig[1].values.v[GF_FB_USED] == 1024);
    snapshot_unref(snap);

    write_file(fixture, MIG_GPU("false", ""));
    want = 0;
    snapshot_unref(wait_for(s, n_mig_is, &want));
    sampler_free(s);
}

#define MIG_UTIL_GPU(enabled)                                                                      \
    "{\"gpus\": [{\"name\": \"NVIDIA H100 80GB HBM3\", \"uuid\": \"" UUID0 "\","                   \
    " \"pci_bus_id\": \"00000000:1B:00.0\", \"temperature\": 50,"                                  \
    " \"utilization\": {\"gpu\": 87, \"memory\": 42}, \"encoder_util\": 5,"                        \
    " \"memory\": {\"total\": 85520809984, \"used\": 42949672960},"                                \
    " \"mig_profiles\": [{\"index\": 0, \"id\": 19, \"name\": \"MIG 1g.10gb\", \"slices\": 1,"     \
    "  \"memory_mb\": 9984}],"                                                                     \
    " \"mig\": {\"enabled\": " enabled ", \"instances\": ["                                        \
    "  {\"gi\": 9, \"ci\": 0, \"profile_id\": 19, \"uuid\": \"MIG-a\"}]}}]}"

static bool util_shown(const struct snapshot *snap, const void *arg)
{
    return snap->n_gpu == 1 && has(&snap->gpu[0], GF_GPU_UTIL) == *(const bool *)arg &&
           snap->gpu[0].n_mig == (*(const bool *)arg ? 0 : 1);
}

/* In MIG mode the parent answers NOT_SUPPORTED for utilisation; once MIG is off it answers again,
 * and gpumon shows it without waiting for a rescan (a minute here) or a restart. */
static void test_mig_mode_change_reprobes(void **state)
{
    write_file(fixture, MIG_UTIL_GPU("true"));
    struct sampler_config c = config();
    struct sampler *s = start(&c);
    struct snapshot *snap = sampler_current(s);
    assert_false(has(&snap->gpu[0], GF_GPU_UTIL));
    assert_true(has(&snap->gpu[0], GF_ENC_UTIL));
    assert_int_equal(snap->gpu[0].n_mig, 1);
    snapshot_unref(snap);

    write_file(fixture, MIG_UTIL_GPU("false"));
    bool shown = true;
    snap = wait_for(s, util_shown, &shown);
    assert_true(snap->gpu[0].values.v[GF_GPU_UTIL] == 87);
    assert_true(snap->gpu[0].values.v[GF_MEM_COPY_UTIL] == 42);
    snapshot_unref(snap);

    write_file(fixture, MIG_UTIL_GPU("true"));
    shown = false;
    snap = wait_for(s, util_shown, &shown);
    assert_int_equal(snap->nvml_errors, 0);
    snapshot_unref(snap);
    sampler_free(s);
}

static bool comm_is(const struct snapshot *snap, const void *arg)
{
    const struct proc_sample *p = snap->n_gpu ? find_proc(&snap->gpu[0], 4242) : NULL;
    return p && strcmp(p->comm, arg) == 0;
}

static bool no_procs(const struct snapshot *snap, const void *arg)
{
    return snap->n_gpu == 1 && snap->gpu[0].n_proc == 0;
}

/* A known process is described once; a pid reused by a new process (new start time), or one
 * that left and came back, is described again. */
static void test_process_cache(void **state)
{
    const char *with = ",\"processes\": [{\"pid\": 4242, \"used_memory\": 1048576}]";
    write_proc(4242, "trainer", 1000);
    write_gpus(1, 58, with, NULL);
    struct sampler_config c = config();
    struct sampler *s = start(&c);
    snapshot_unref(wait_for(s, comm_is, "trainer"));

    /* Same process (start time unchanged): only its start time is read again, not the rest. */
    write_proc(4242, "renamed", 1000);
    skip_passes(s, 4);
    struct snapshot *snap = sampler_current(s);
    assert_true(comm_is(snap, "trainer"));
    snapshot_unref(snap);

    /* A new process under the same pid. */
    write_proc(4242, "newcomer", 2000);
    snapshot_unref(wait_for(s, comm_is, "newcomer"));

    /* Gone from NVML's list and back: forgotten in between, so described afresh. */
    write_gpus(1, 58, NULL, NULL);
    snapshot_unref(wait_for(s, no_procs, NULL));
    write_proc(4242, "third", 2000);
    write_gpus(1, 58, with, NULL);
    snapshot_unref(wait_for(s, comm_is, "third"));
    sampler_free(s);
}

/* A pid reused by a new process gets the newcomer's labels in the next pass, not a slow interval
 * (a minute here) later. */
static void test_pid_reuse_seen_at_once(void **state)
{
    write_proc(4242, "trainer", 1000);
    write_gpus(1, 58, ",\"processes\": [{\"pid\": 4242, \"used_memory\": 1048576}]", NULL);
    struct sampler_config c = config();
    c.slow_interval_s = 60;
    struct sampler *s = start(&c);
    snapshot_unref(wait_for(s, comm_is, "trainer"));
    write_proc(4242, "newcomer", 2000);
    snapshot_unref(wait_for(s, comm_is, "newcomer"));
    sampler_free(s);
}

/* A process gone from /proc that NVML still lists (it lags behind) keeps its labels: blank ones
 * would start a new series for the same process. */
static void test_process_gone_keeps_labels(void **state)
{
    write_proc(4242, "trainer", 1000);
    write_gpus(1, 58, ",\"processes\": [{\"pid\": 4242, \"used_memory\": 1048576}]", NULL);
    struct sampler_config c = config();
    struct sampler *s = start(&c);
    snapshot_unref(wait_for(s, comm_is, "trainer"));
    static const char *const files[] = {"comm", "status", "cgroup", "stat"};
    char path[PATH_MAX + 32];
    for (size_t i = 0; i < sizeof(files) / sizeof(files[0]); i++) {
        snprintf(path, sizeof(path), "%s/4242/%s", proc_root, files[i]);
        assert_int_equal(unlink(path), 0);
    }
    snprintf(path, sizeof(path), "%s/4242", proc_root);
    assert_int_equal(rmdir(path), 0);
    usleep(3 * 200 * 1000); /* past several slow intervals */
    skip_passes(s, 2);
    struct snapshot *snap = sampler_current(s);
    const struct proc_sample *p = find_proc(&snap->gpu[0], 4242);
    assert_non_null(p);
    assert_string_equal(p->comm, "trainer");
    assert_int_equal(p->uid, 1000);
    assert_string_equal(p->container, "docker://4f1c2a3b5d6e");
    snapshot_unref(snap);
    sampler_free(s);
}

/* ---- HTTP ---- */

static long get(uint16_t port, const char *method, const char *path, const char *accept,
                struct http_response *ret)
{
    char url[128], header[128];
    snprintf(url, sizeof(url), "http://127.0.0.1:%u%s", port, path);
    snprintf(header, sizeof(header), "Accept: %s", accept ? accept : "*/*");
    const char *headers[] = {header, NULL};
    struct http_client_opts o = {
        .method = method, .url = url, .headers = headers, .timeout_ms = 10000};
    struct errmsg e = {""};
    memset(ret, 0, sizeof(*ret));
    assert_int_equal(http_request_opts(&o, ret, &e), 0);
    return ret->status;
}

static void test_server(void **state)
{
    write_gpus(1, 58, NULL, NULL);
    struct sampler_config c = config();
    struct sampler *s = start(&c);
    struct server *srv = NULL;
    struct errmsg e = {""};
    struct expose_opts eo = {.version = "9.9.9"};
    assert_int_equal(server_new("127.0.0.1:0", s, c.interval_s, &eo, &srv, &e), 0);
    uint16_t port = server_port(srv);
    assert_true(port > 0);
    struct http_response r;
    char buf[256];

    assert_int_equal(get(port, "GET", "/metrics", NULL, &r), 200);
    assert_non_null(strstr(r.body, "DCGM_FI_DEV_GPU_TEMP{"));
    assert_non_null(strstr(r.body, UUID0));
    assert_non_null(strstr(r.body, "testhost"));
    assert_non_null(strstr(r.body, "9.9.9"));
    assert_true(http_response_header(&r, "Content-Type", buf, sizeof(buf)) > 0);
    assert_non_null(strstr(buf, "version=0.0.4"));
    http_response_done(&r);

    /* Prometheus prefers OpenMetrics but takes text 0.0.4, the one format in which dcgm's
     * counters without _total stay counters: it gets text. */
    assert_int_equal(get(port, "GET", "/metrics",
                         "application/openmetrics-text;version=1.0.0,application/openmetrics-text;"
                         "version=0.0.1;q=0.75,text/plain;version=0.0.4;q=0.5,*/*;q=0.1",
                         &r),
                     200);
    assert_true(http_response_header(&r, "Content-Type", buf, sizeof(buf)) > 0);
    assert_non_null(strstr(buf, "version=0.0.4"));
    assert_non_null(strstr(r.body, "# TYPE DCGM_FI_DEV_TOTAL_ENERGY_CONSUMPTION counter\n"));
    http_response_done(&r);

    /* A client that takes OpenMetrics only gets it. */
    assert_int_equal(get(port, "GET", "/metrics", "application/openmetrics-text", &r), 200);
    assert_true(http_response_header(&r, "Content-Type", buf, sizeof(buf)) > 0);
    assert_non_null(strstr(buf, "application/openmetrics-text"));
    assert_non_null(strstr(r.body, "# EOF"));
    http_response_done(&r);

    assert_int_equal(get(port, "HEAD", "/metrics", NULL, &r), 200);
    assert_int_equal(r.body_len, 0);
    http_response_done(&r);

    assert_int_equal(get(port, "GET", "/health", NULL, &r), 200);
    assert_string_equal(r.body, "ok\n");
    http_response_done(&r);

    assert_int_equal(get(port, "GET", "/", NULL, &r), 200);
    assert_non_null(strstr(r.body, "/metrics"));
    http_response_done(&r);

    assert_int_equal(get(port, "GET", "/nope", NULL, &r), 404);
    http_response_done(&r);

    assert_int_equal(get(port, "POST", "/metrics", NULL, &r), 405);
    assert_true(http_response_header(&r, "Allow", buf, sizeof(buf)) > 0);
    assert_string_equal(buf, "GET, HEAD");
    http_response_done(&r);

    server_free(srv);
    sampler_free(s);
}

static void test_server_health_down(void **state)
{
    no_driver();
    struct sampler_config c = config();
    struct sampler *s = start(&c);
    struct server *srv = NULL;
    struct errmsg e = {""};
    struct expose_opts eo = {0};
    assert_int_equal(server_new("127.0.0.1:0", s, c.interval_s, &eo, &srv, &e), 0);
    struct http_response r;
    assert_int_equal(get(server_port(srv), "GET", "/health", NULL, &r), 503);
    assert_non_null(strstr(r.body, "Driver Not Loaded"));
    http_response_done(&r);
    /* /metrics still answers: gpumon_up 0 is what the alert needs. */
    assert_int_equal(get(server_port(srv), "GET", "/metrics", NULL, &r), 200);
    assert_non_null(strstr(r.body, "gpumon_up"));
    http_response_done(&r);
    server_free(srv);
    sampler_free(s);
}

/* ---- setup ---- */

static int setup(void **state)
{
    if (!getenv("FAKE_NVML_LIB") || !getenv("FAKE_NVML_OLD_LIB")) {
        fprintf(stderr, "FAKE_NVML_LIB / FAKE_NVML_OLD_LIB are not set: run through meson test\n");
        return -1;
    }
    if (!mkdtemp(dir))
        return -1;
    snprintf(fixture, sizeof(fixture), "%s/fixture.json", dir);
    snprintf(proc_root, sizeof(proc_root), "%s/proc", dir);
    mkdir(proc_root, 0755);
    setenv("FAKE_NVML_FIXTURE", fixture, 1);
    return 0;
}

static int teardown(void **state)
{
    char cmd[PATH_MAX + 16];
    /* Only our own mkdtemp() directory. */
    snprintf(cmd, sizeof(cmd), "rm -rf '%s'", dir);
    return system(cmd) == 0 ? 0 : -1;
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_fixture_values),
        cmocka_unit_test(test_pcie_and_no_processes),
        cmocka_unit_test(test_profiling),
        cmocka_unit_test(test_fixture_change_shows),
        cmocka_unit_test(test_not_supported),
        cmocka_unit_test(test_unsupported_reprobed),
        cmocka_unit_test(test_slow_call_does_not_delay_fast),
        cmocka_unit_test(test_gpu_lost),
        cmocka_unit_test(test_gpu_back_after_reset),
        cmocka_unit_test(test_reset_required_is_lost),
        cmocka_unit_test(test_failing_gpu_shown_lost),
        cmocka_unit_test(test_gpu_vanishes),
        cmocka_unit_test(test_pci_count_reopens),
        cmocka_unit_test(test_no_driver_then_driver),
        cmocka_unit_test(test_no_library),
        cmocka_unit_test(test_bad_intervals),
        cmocka_unit_test(test_old_driver),
        cmocka_unit_test(test_mig),
        cmocka_unit_test(test_mig_mode_change_reprobes),
        cmocka_unit_test(test_process_cache),
        cmocka_unit_test(test_pid_reuse_seen_at_once),
        cmocka_unit_test(test_process_gone_keeps_labels),
        cmocka_unit_test(test_server),
        cmocka_unit_test(test_server_health_down),
    };
    return cmocka_run_group_tests(tests, setup, teardown);
}
