/* Tests for gpumon/expose.c: the exposition of hand-built snapshots (a consumer GPU, a MIG GPU
 * with instances and processes, a lost GPU, NVML down, odd label values) compared exactly with
 * golden files, the rules dashboards rely on checked one by one, and promtool's verdict.
 *
 * Golden files live in gpumon/tests/golden/. After an intended change of the output, regenerate
 * them with GPUMON_UPDATE_GOLDEN=1 ./test-expose and review the diff. */
#include <errno.h>
#include <fcntl.h>
#include <math.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include <cmocka.h>

#include "test-main.h"

#include "test-skip.h"

#include "expose.h"

#ifndef GOLDEN_DIR
#error "GOLDEN_DIR must name gpumon/tests/golden"
#endif

#define TAKEN_AT 1767225600.0 /* 2026-01-01T00:00:00Z */
#define GIB      (1024.0 * 1024 * 1024)
#define NONE     NVML_INSTANCE_ID_NONE
#define END      (-1)

/* ---- building snapshots ---- */

static struct snapshot *snap_new(bool up, unsigned n_gpu)
{
    struct snapshot *s = snapshot_new();
    assert_non_null(s);
    s->taken_at = TAKEN_AT;
    s->sample_duration = 0.0125;
    s->up = up;
    s->nvml_errors = up ? 3 : 0;
    strcpy(s->hostname, "node1");
    if (up) {
        strcpy(s->driver_version, "580.159.04");
        s->cuda_version = 13000;
    }
    s->n_gpu = n_gpu;
    s->n_nvml_gpu = n_gpu;
    if (n_gpu) {
        s->gpu = calloc(n_gpu, sizeof(*s->gpu));
        assert_non_null(s->gpu);
    }
    return s;
}

static void gpu_ident(struct gpu_sample *g, unsigned index, const char *uuid, const char *name,
                      const char *bus_id)
{
    g->id.index = index;
    snprintf(g->id.uuid, sizeof(g->id.uuid), "%s", uuid);
    snprintf(g->id.name, sizeof(g->id.name), "%s", name);
    snprintf(g->id.pci_bus_id, sizeof(g->id.pci_bus_id), "%s", bus_id);
    g->id.minor = index;
    g->id.has_minor = true;
}

/* Sets field/value pairs, ended by END. */
static void set(struct gpu_values *v, ...)
{
    va_list ap;
    va_start(ap, v);
    for (int f; (f = va_arg(ap, int)) != END;)
        gpu_values_set(v, (enum gpu_field)f, va_arg(ap, double));
    va_end(ap);
}

static void add_proc(struct gpu_sample *g, pid_t pid, unsigned gi_id, double memory,
                     const char *user, const char *comm, const char *container, const char *job)
{
    g->proc = realloc(g->proc, (g->n_proc + 1) * sizeof(*g->proc));
    assert_non_null(g->proc);
    struct proc_sample *p = &g->proc[g->n_proc++];
    *p = (struct proc_sample){.pid = pid, .gi_id = gi_id, .uid = 1000};
    p->has_memory = memory >= 0;
    p->memory = memory >= 0 ? (uint64_t)memory : 0;
    snprintf(p->user, sizeof(p->user), "%s", user);
    snprintf(p->comm, sizeof(p->comm), "%s", comm);
    snprintf(p->container, sizeof(p->container), "%s", container);
    snprintf(p->job, sizeof(p->job), "%s", job);
}

static void add_xid(struct gpu_sample *g, unsigned xid, uint64_t count, double last_seen)
{
    g->xid = realloc(g->xid, (g->n_xid + 1) * sizeof(*g->xid));
    assert_non_null(g->xid);
    g->xid[g->n_xid++] = (struct xid_count){.xid = xid, .count = count, .last_seen = last_seen};
}

static void add_mig(struct gpu_sample *g, unsigned gi_id, unsigned ci_id, const char *profile,
                    double used, double total)
{
    g->mig = realloc(g->mig, (g->n_mig + 1) * sizeof(*g->mig));
    assert_non_null(g->mig);
    struct mig_sample *m = &g->mig[g->n_mig];
    *m = (struct mig_sample){.id = {.index = g->n_mig, .gi_id = gi_id, .ci_id = ci_id}};
    snprintf(m->id.profile, sizeof(m->id.profile), "%s", profile);
    snprintf(m->id.uuid, sizeof(m->id.uuid), "MIG-%u-%u", gi_id, ci_id);
    set(&m->values, GF_FB_USED, used, GF_FB_FREE, total - used, GF_FB_TOTAL, total,
        GF_PROF_GR_ENGINE_ACTIVE, gi_id / 8.0, END);
    g->n_mig++;
    g->id.mig_enabled = true;
}

/* A workstation GPU: no ECC, no memory temperature, no row remapping, PCIe throughput off. */
static struct snapshot *consumer_snapshot(void)
{
    struct snapshot *s = snap_new(true, 1);
    struct gpu_sample *g = &s->gpu[0];
    gpu_ident(g, 0, "GPU-5c4b7b1a-3f2e-4d8a-9c1b-2a6e8f0d1c3b", "NVIDIA GeForce RTX 4090",
              "00000000:01:00.0");
    set(&g->values, GF_GPU_UTIL, 87.0, GF_MEM_COPY_UTIL, 41.0, GF_ENC_UTIL, 0.0, GF_DEC_UTIL, 0.0,
        GF_FB_USED, 18211.0, GF_FB_FREE, 5953.0, GF_FB_TOTAL, 24564.0, GF_GPU_TEMP, 63.0,
        GF_POWER_USAGE, 402.512, GF_POWER_LIMIT, 450.0, GF_TOTAL_ENERGY, 123456789012.0,
        GF_SM_CLOCK, 2520.0, GF_MEM_CLOCK, 10501.0, GF_FAN_SPEED, 65.0, GF_PCIE_REPLAY, 0.0,
        GF_CLOCK_EVENTS, (double)(nvmlClocksEventReasonSwPowerCap), END);
    g->xid_supported = true;
    add_proc(g, 4242, NONE, 17 * GIB, "alice", "python3", "docker://0123456789ab", "");
    add_proc(g, 4243, NONE, -1, "alice", "nomem", "", ""); /* NVML did not know its memory */
    add_proc(g, 4300, NONE, 512 * 1024 * 1024, "1001", "Xorg", "", "");
    return s;
}

/* A data-centre GPU in MIG mode: two GPU instances, the second with two compute instances. */
static struct snapshot *mig_snapshot(void)
{
    struct snapshot *s = snap_new(true, 1);
    struct gpu_sample *g = &s->gpu[0];
    gpu_ident(g, 0, "GPU-0a1b2c3d-4e5f-6071-8293-a4b5c6d7e8f9", "NVIDIA H200", "00000000:07:00.0");
    set(&g->values, GF_FB_USED, 36864.0, GF_FB_FREE, 106907.0, GF_FB_TOTAL, 143771.0, GF_GPU_TEMP,
        41.0, GF_MEMORY_TEMP, 38.0, GF_POWER_USAGE, 121.25, GF_POWER_LIMIT, 700.0, GF_TOTAL_ENERGY,
        9876543210.0, GF_SM_CLOCK, 1980.0, GF_MEM_CLOCK, 3201.0, GF_PCIE_REPLAY, 2.0, GF_PCIE_TX,
        1.5e9, GF_PCIE_RX, 2.25e8, GF_CLOCK_EVENTS, 0.0, GF_ECC_SBE_VOL, 4.0, GF_ECC_DBE_VOL, 0.0,
        GF_ECC_SBE_AGG, 17.0, GF_ECC_DBE_AGG, 1.0, GF_ROWS_CORRECTABLE, 2.0, GF_ROWS_UNCORRECTABLE,
        1.0, GF_ROW_REMAP_PENDING, 0.0, GF_ROW_REMAP_FAILURE, 0.0, END);
    add_mig(g, 1, 0, "3g.71gb", 30720.0, 71424.0);
    add_mig(g, 2, 0, "1g.18gb", 6144.0, 17664.0);
    add_mig(g, 2, 1, "1g.18gb", 9999.0, 99999.0); /* same instance: must not repeat */
    add_proc(g, 5001, 1, 30 * GIB, "bob", "torchrun", "capsule://llm-ft", "gpuq://1234");
    add_proc(g, 5002, 2, 4 * GIB, "carol", "python", "", "slurm://998877");
    g->xid_supported = true;
    g->last_xid = 31;
    add_xid(g, 13, 2, TAKEN_AT - 3600);
    add_xid(g, 31, 1, TAKEN_AT - 60);
    return s;
}

#define LOST_UUID "GPU-dead0000-0000-0000-0000-000000000001"

/* GPU 1 fell off the bus after the model was loaded; GPU 2 could never be read. */
static struct snapshot *lost_snapshot(void)
{
    struct snapshot *s = snap_new(true, 3);
    gpu_ident(&s->gpu[0], 0, "GPU-11111111-2222-3333-4444-555555555555", "NVIDIA H200",
              "00000000:07:00.0");
    set(&s->gpu[0].values, GF_GPU_UTIL, 5.0, GF_GPU_TEMP, 40.0, END);
    s->gpu[0].xid_supported = true;

    struct gpu_sample *lost = &s->gpu[1];
    gpu_ident(lost, 1, LOST_UUID, "NVIDIA H200", "00000000:0F:00.0");
    lost->lost = true;
    set(&lost->values, GF_GPU_UTIL, 99.0, GF_GPU_TEMP, 90.0, GF_CLOCK_EVENTS, 8.0, END);
    add_proc(lost, 6001, NONE, GIB, "dave", "stuck", "", "");
    lost->xid_supported = true;
    lost->last_xid = 79;
    add_xid(lost, 79, 1, TAKEN_AT - 5);

    struct gpu_sample *bad = &s->gpu[2];
    bad->id.index = 2;
    bad->id.error = -EACCES;
    return s;
}

static struct snapshot *down_snapshot(void)
{
    struct snapshot *s = snap_new(false, 0);
    strcpy(s->reason, "libnvidia-ml.so.1: cannot open shared object file: No such file or "
                      "directory");
    return s;
}

/* Label values a scrape must survive: quotes, backslashes, newlines, bytes that are not UTF-8. */
static struct snapshot *odd_snapshot(void)
{
    struct snapshot *s = snap_new(true, 1);
    strcpy(s->hostname, "n\xc5\x93ud \"east\"\\7");
    struct gpu_sample *g = &s->gpu[0];
    gpu_ident(g, 0, "GPU-odd", "NVIDIA \"Weird\" \\ GPU\nrev2 \xff", "00000000:81:00.0");
    g->id.has_minor = false;
    set(&g->values, GF_GPU_UTIL, 1.0, END);
    add_proc(g, 7, NONE, 1024, "d\xc3\xa6mon", "a\"b\\c", "", "");
    return s;
}

/* ---- rendering and checking ---- */

static struct expose_opts fixed_opts(enum prom_format f)
{
    return (struct expose_opts){
        .format = f,
        .version = "0.1.0-test",
    };
}

/* Every family has HELP, TYPE and at least one sample; the last family is the NVML error count;
 * no value is a -1 sentinel; OpenMetrics ends with "# EOF". */
static void check_structure(const char *text, enum prom_format f)
{
    size_t len = strlen(text);
    assert_true(len > 0 && text[len - 1] == '\n');
    bool want_type = false, want_sample = false;
    const char *last_sample = NULL;
    for (const char *line = text; *line;) {
        const char *nl = strchr(line, '\n');
        if (strncmp(line, "# HELP ", 7) == 0) {
            assert_false(want_sample); /* previous family empty */
            want_type = true;
        } else if (strncmp(line, "# TYPE ", 7) == 0) {
            assert_true(want_type);
            want_type = false;
            want_sample = true;
        } else if (strncmp(line, "# EOF\n", 6) == 0) {
            assert_int_equal(f, PROM_FORMAT_OPENMETRICS);
            assert_ptr_equal(nl + 1, text + len);
        } else {
            assert_false(want_type);
            want_sample = false;
            last_sample = line;
            assert_false(nl - line > 3 && strncmp(nl - 3, " -1", 3) == 0);
        }
        line = nl + 1;
    }
    assert_false(want_type || want_sample);
    assert_non_null(last_sample);
    assert_int_equal(strncmp(last_sample, "gpumon_nvml_errors_total ", 25), 0);
    if (f == PROM_FORMAT_OPENMETRICS)
        assert_string_equal(text + len - 6, "# EOF\n");
}

static char *render(const struct snapshot *s, const struct expose_opts *o)
{
    char *text = NULL;
    size_t len = 0;
    assert_int_equal(expose_render(s, o, &text, &len), 0);
    assert_non_null(text);
    assert_int_equal(len, strlen(text));
    check_structure(text, o->format);
    return text;
}

static char *read_file(const char *path)
{
    FILE *f = fopen(path, "re");
    if (!f)
        fail_msg("cannot open %s: %s (GPUMON_UPDATE_GOLDEN=1 writes it)", path, strerror(errno));
    char *buf = NULL;
    size_t size = 0;
    FILE *m = open_memstream(&buf, &size);
    assert_non_null(m);
    char chunk[4096];
    for (size_t n; (n = fread(chunk, 1, sizeof(chunk), f)) > 0;)
        fwrite(chunk, 1, n, m);
    fclose(f);
    fclose(m);
    return buf;
}

static void check_golden(const char *name, const char *text)
{
    char path[512];
    snprintf(path, sizeof(path), "%s/%s", GOLDEN_DIR, name);
    if (getenv("GPUMON_UPDATE_GOLDEN")) {
        FILE *f = fopen(path, "we");
        assert_non_null(f);
        fputs(text, f);
        assert_int_equal(fclose(f), 0);
        return;
    }
    char *want = read_file(path);
    assert_string_equal(text, want);
    free(want);
}

/* The sample line of text that starts with prefix (name and labels), or NULL. */
static const char *find_line(const char *text, const char *prefix)
{
    size_t n = strlen(prefix);
    for (const char *line = text; *line; line = strchr(line, '\n') + 1)
        if (strncmp(line, prefix, n) == 0)
            return line;
    return NULL;
}

static double value_of(const char *text, const char *prefix)
{
    const char *line = find_line(text, prefix);
    if (!line)
        fail_msg("no line starting with %s", prefix);
    const char *nl = strchr(line, '\n');
    const char *sp = nl;
    while (sp > line && sp[-1] != ' ')
        sp--;
    return strtod(sp, NULL);
}

static size_t count_lines(const char *text, const char *prefix)
{
    size_t n = 0, m = strlen(prefix);
    for (const char *line = text; *line; line = strchr(line, '\n') + 1)
        n += strncmp(line, prefix, m) == 0;
    return n;
}

/* dcgm-exporter's names cannot pass promtool's lint: its counters lack _total (and one is called
 * ..._COUNTER), and its label modelName is camelCase. Those complaints are accepted for the
 * families that carry them; anything else, and any parse error, fails. */
static bool lint_expected(const char *line, const char *text)
{
    static const char no_total[] = " counter metrics should have \"_total\" suffix";
    static const char type_in_name[] = " metric name should not include type 'counter'";
    static const char camel[] = " label names should be written in 'snake_case' not 'camelCase'";
    const char *sp = strchr(line, ' ');
    if (!sp)
        return false;
    char family[128];
    snprintf(family, sizeof(family), "%.*s{", (int)(sp - line), line);
    if (strcmp(sp, no_total) == 0)
        return strncmp(line, "DCGM_FI_DEV_", 12) == 0;
    if (strcmp(sp, type_in_name) == 0)
        return strncmp(line, "DCGM_FI_DEV_PCIE_REPLAY_COUNTER ", 32) == 0;
    if (strcmp(sp, camel) == 0) {
        const char *sample = find_line(text, family);
        const char *model = sample ? strstr(sample, "modelName=") : NULL;
        return model && model < strchr(sample, '\n');
    }
    return false;
}

static void check_promtool(const char *text)
{
    if (system("command -v promtool >/dev/null 2>&1") != 0)
        test_skip("promtool is not installed (Debian: prometheus)");
    char in[] = "/tmp/test-expose-in-XXXXXX", out[] = "/tmp/test-expose-out-XXXXXX";
    int fd = mkstemp(in), fd2 = mkstemp(out);
    assert_true(fd >= 0 && fd2 >= 0);
    assert_int_equal(write(fd, text, strlen(text)), (ssize_t)strlen(text));
    close(fd);
    close(fd2);
    char cmd[256];
    snprintf(cmd, sizeof(cmd), "promtool check metrics < %s > %s 2>&1", in, out);
    int status = system(cmd);
    char *report = read_file(out);
    unlink(in);
    unlink(out);
    /* 0: clean; 3: lint problems only (checked below); 1: parse error. */
    assert_true(WIFEXITED(status));
    if (WEXITSTATUS(status) != 0 && WEXITSTATUS(status) != 3)
        fail_msg("promtool: %s", report);
    for (char *line = report, *nl; *line; line = nl + 1) {
        nl = strchrnul(line, '\n');
        bool last = *nl == '\0';
        *nl = '\0';
        if (*line && !lint_expected(line, text))
            fail_msg("promtool: unexpected: %s", line);
        if (last)
            break;
    }
    free(report);
}

/* ---- tests ---- */

static void test_consumer_gpu(void **state)
{
    _cleanup_(snapshot_unrefp) struct snapshot *s = consumer_snapshot();
    struct expose_opts o = fixed_opts(PROM_FORMAT_TEXT);
    _cleanup_free_ char *t = render(s, &o);
    check_golden("consumer.prom", t);
    check_promtool(t);

    /* Unsupported fields are absent, with no empty HELP/TYPE block left behind. */
    assert_null(strstr(t, "ECC"));
    assert_null(strstr(t, "DCGM_FI_DEV_MEMORY_TEMP"));
    assert_null(strstr(t, "ROW_REMAP"));
    assert_null(strstr(t, "REMAPPED_ROWS"));
    assert_null(strstr(t, "gpumon_pcie_"));
    /* dcgm's label set, in dcgm's order. */
    static const char labels[] =
        "{gpu=\"0\",UUID=\"GPU-5c4b7b1a-3f2e-4d8a-9c1b-2a6e8f0d1c3b\",pci_bus_id="
        "\"00000000:01:00.0\",device=\"nvidia0\",modelName=\"NVIDIA GeForce RTX 4090\","
        "Hostname=\"node1\",DCGM_FI_DRIVER_VERSION=\"580.159.04\"}";
    assert_non_null(find_line(t, "DCGM_FI_DEV_GPU_UTIL{gpu=\"0\""));
    assert_non_null(strstr(t, labels));
    assert_true(value_of(t, "DCGM_FI_DEV_POWER_USAGE{") == 402.512);
    assert_true(value_of(t, "DCGM_FI_DEV_TOTAL_ENERGY_CONSUMPTION{") == 123456789012.0);
    assert_non_null(strstr(t, "# TYPE DCGM_FI_DEV_TOTAL_ENERGY_CONSUMPTION counter\n"));
    /* XID support known, none seen yet: 0, not absent, labelled as dcgm-exporter does. */
    assert_true(value_of(t, "DCGM_FI_DEV_XID_ERRORS{") == 0);
    assert_non_null(strstr(t, "DCGM_FI_DRIVER_VERSION=\"580.159.04\",err_code=\"0\","
                              "err_msg=\"No Error\"} 0\n"));
    assert_null(strstr(t, "gpumon_xid_errors_total"));
    /* Clock events: the raw mask and one 0/1 series per reason. */
    assert_true(value_of(t, "DCGM_FI_DEV_CLOCKS_EVENT_REASONS{") == 4);
    assert_null(strstr(t, "DCGM_FI_DEV_CLOCK_THROTTLE_REASONS"));
    assert_int_equal(count_lines(t, "gpumon_clock_event_active{"), 9);
    const char *cap = strstr(t, ",reason=\"sw_power_cap\"} 1\n");
    const char *idle = strstr(t, ",reason=\"gpu_idle\"} 0\n");
    assert_true(cap && idle);
    /* Processes with known memory only. */
    assert_int_equal(count_lines(t, "gpumon_process_memory_bytes{"), 2);
    assert_null(strstr(t, "nomem"));
    assert_non_null(strstr(t, ",pid=\"4242\",process=\"python3\",user=\"alice\","
                              "container=\"docker://0123456789ab\",hpc_job=\"\"} 18253611008\n"));
    assert_true(value_of(t, "gpumon_up ") == 1);
    assert_true(value_of(t, "gpumon_gpus ") == 1);
    assert_true(value_of(t, "gpumon_sample_timestamp_seconds ") == TAKEN_AT);
    assert_null(strstr(t, "gpumon_last_error_info"));
}

static void test_mig_gpu(void **state)
{
    _cleanup_(snapshot_unrefp) struct snapshot *s = mig_snapshot();
    struct expose_opts o = fixed_opts(PROM_FORMAT_TEXT);
    _cleanup_free_ char *t = render(s, &o);
    check_golden("mig.prom", t);
    check_promtool(t);

    /* dcgm-exporter's device mode: no series for the parent, one per GPU instance, with
     * GPU_I_PROFILE and GPU_I_ID after modelName; memory is each instance's own, so a sum over
     * the GPU counts it once. */
    assert_int_equal(count_lines(t, "DCGM_FI_DEV_FB_USED{"), 2);
    assert_null(strstr(t, "DCGM_FI_DEV_FB_USED{gpu=\"0\",UUID=\"GPU-0a1b2c3d-4e5f-6071-8293-"
                          "a4b5c6d7e8f9\",pci_bus_id=\"00000000:07:00.0\",device=\"nvidia0\","
                          "modelName=\"NVIDIA H200\",Hostname"));
    static const char gi2[] = "DCGM_FI_DEV_FB_USED{gpu=\"0\",UUID=\"GPU-0a1b2c3d-4e5f-6071-8293-"
                              "a4b5c6d7e8f9\",pci_bus_id=\"00000000:07:00.0\",device=\"nvidia0\","
                              "modelName=\"NVIDIA H200\",GPU_I_PROFILE=\"1g.18gb\",GPU_I_ID=\"2\","
                              "Hostname=\"node1\",DCGM_FI_DRIVER_VERSION=\"580.159.04\"}";
    assert_true(value_of(t, gi2) == 6144);
    assert_null(strstr(t, "9999"));
    assert_int_equal(count_lines(t, "DCGM_FI_DEV_FB_TOTAL{"), 2);
    /* Device-wide fields repeat the GPU's value on each instance. */
    assert_int_equal(count_lines(t, "DCGM_FI_DEV_GPU_TEMP{"), 2);
    assert_non_null(strstr(t, "GPU_I_PROFILE=\"3g.71gb\",GPU_I_ID=\"1\",Hostname=\"node1\","
                              "DCGM_FI_DRIVER_VERSION=\"580.159.04\"} 41\n"));
    assert_null(strstr(t, "DCGM_FI_DEV_GPU_UTIL"));
    /* The instances' profiling values are their own; PCIe traffic has none per instance. */
    assert_int_equal(count_lines(t, "DCGM_FI_PROF_GR_ENGINE_ACTIVE{"), 2);
    assert_non_null(strstr(t, "GPU_I_ID=\"2\",Hostname=\"node1\",DCGM_FI_DRIVER_VERSION=\"580.159."
                              "04\"} 0.25\n"));
    assert_null(strstr(t, "DCGM_FI_PROF_PCIE_TX_BYTES"));
    /* gpumon's own families stay per GPU. */
    assert_int_equal(count_lines(t, "gpumon_pcie_tx_bytes_per_second{"), 1);
    /* Processes in an instance carry its GPU_I_ID. */
    assert_non_null(strstr(t, "modelName=\"NVIDIA H200\",GPU_I_ID=\"1\",Hostname=\"node1\","
                              "DCGM_FI_DRIVER_VERSION=\"580.159.04\",pid=\"5001\","
                              "process=\"torchrun\",user=\"bob\",container=\"capsule://llm-ft\","
                              "hpc_job=\"gpuq://1234\"} 32212254720\n"));
    /* XIDs: the last one, per instance as dcgm-exporter shows it, and per XID a count and a
     * time. */
    assert_int_equal(count_lines(t, "DCGM_FI_DEV_XID_ERRORS{"), 2);
    assert_true(value_of(t, "DCGM_FI_DEV_XID_ERRORS{") == 31);
    assert_non_null(strstr(t, "GPU_I_ID=\"2\",Hostname=\"node1\",DCGM_FI_DRIVER_VERSION=\"580.159."
                              "04\",err_code=\"31\",err_msg=\"GPU memory page fault\"} 31\n"));
    assert_non_null(strstr(t, ",xid=\"13\"} 2\n"));
    assert_int_equal(count_lines(t, "gpumon_xid_errors_total{"), 2);
    assert_int_equal(count_lines(t, "gpumon_xid_last_seen_timestamp_seconds{"), 2);
    assert_true(value_of(t, "gpumon_pcie_tx_bytes_per_second{") == 1.5e9);
    assert_true(value_of(t, "DCGM_FI_DEV_ECC_SBE_AGG_TOTAL{") == 17);
    assert_non_null(strstr(t, "# TYPE DCGM_FI_DEV_ECC_SBE_AGG_TOTAL counter\n"));
    assert_null(strstr(t, "_TOTAL_total"));
}

static void test_openmetrics(void **state)
{
    _cleanup_(snapshot_unrefp) struct snapshot *s = mig_snapshot();
    struct expose_opts o = fixed_opts(PROM_FORMAT_OPENMETRICS);
    _cleanup_free_ char *t = render(s, &o);
    check_golden("mig.om", t);
    /* dcgm's counters keep their names, so OpenMetrics must call them unknown; gpumon's own
     * counters are real ones. */
    assert_non_null(strstr(t, "# TYPE DCGM_FI_DEV_TOTAL_ENERGY_CONSUMPTION unknown\n"));
    assert_non_null(strstr(t, "# TYPE DCGM_FI_DEV_PCIE_REPLAY_COUNTER unknown\n"));
    assert_non_null(strstr(t, "# TYPE DCGM_FI_DEV_ECC_DBE_VOL_TOTAL unknown\n"));
    assert_non_null(strstr(t, "# TYPE gpumon_xid_errors counter\n"));
    assert_non_null(find_line(t, "gpumon_xid_errors_total{"));
    assert_non_null(strstr(t, "# TYPE gpumon_nvml_errors counter\ngpumon_nvml_errors_total 3\n"));
    assert_null(strstr(t, " counter\nDCGM_FI_DEV"));

    _cleanup_(snapshot_unrefp) struct snapshot *d = down_snapshot();
    _cleanup_free_ char *dt = render(d, &o);
    check_golden("down.om", dt);
}

static void test_lost_gpu(void **state)
{
    _cleanup_(snapshot_unrefp) struct snapshot *s = lost_snapshot();
    struct expose_opts o = fixed_opts(PROM_FORMAT_TEXT);
    _cleanup_free_ char *t = render(s, &o);
    check_golden("lost.prom", t);
    check_promtool(t);

    /* The lost GPU shows it is down and the XIDs that say why, nothing else: its old readings
     * would look current. */
    size_t lost_lines = 0;
    for (const char *line = t; *line; line = strchr(line, '\n') + 1) {
        const char *nl = strchr(line, '\n');
        const char *u = strstr(line, LOST_UUID);
        if (!u || u > nl)
            continue;
        lost_lines++;
        assert_true(strncmp(line, "gpumon_gpu_up{", 14) == 0 ||
                    strncmp(line, "DCGM_FI_DEV_XID_ERRORS{", 23) == 0 ||
                    strncmp(line, "gpumon_xid_", 11) == 0);
    }
    assert_int_equal(lost_lines, 4);
    assert_true(value_of(t, "gpumon_gpu_up{gpu=\"1\"") == 0);
    assert_true(value_of(t, "DCGM_FI_DEV_XID_ERRORS{gpu=\"1\"") == 79);
    assert_true(value_of(t, "gpumon_xid_errors_total{gpu=\"1\"") == 1);
    assert_null(strstr(t, "stuck"));
    /* The unreadable GPU: only its up series, without identity it does not have. */
    assert_true(
        value_of(t, "gpumon_gpu_up{gpu=\"2\",UUID=\"\",pci_bus_id=\"\",device=\"nvidia2\"") == 0);
    assert_int_equal(count_lines(t, "DCGM_FI_DEV_GPU_UTIL{"), 1);
    assert_true(value_of(t, "gpumon_gpu_up{gpu=\"0\"") == 1);
    assert_true(value_of(t, "gpumon_gpus ") == 3);
}

static void test_nvml_down(void **state)
{
    _cleanup_(snapshot_unrefp) struct snapshot *s = down_snapshot();
    struct expose_opts o = fixed_opts(PROM_FORMAT_TEXT);
    _cleanup_free_ char *t = render(s, &o);
    check_golden("down.prom", t);
    check_promtool(t);
    assert_true(value_of(t, "gpumon_up ") == 0);
    assert_non_null(strstr(t, "gpumon_last_error_info{reason=\"libnvidia-ml.so.1: cannot open "
                              "shared object file: No such file or directory\"} 1\n"));
    assert_non_null(strstr(t, "gpumon_info{version=\"0.1.0-test\",driver_version=\"\","
                              "cuda_version=\"\"} 1\n"));
    assert_null(strstr(t, "DCGM_"));
    assert_null(strstr(t, "gpumon_gpu_up"));
}

static void test_odd_labels(void **state)
{
    _cleanup_(snapshot_unrefp) struct snapshot *s = odd_snapshot();
    struct expose_opts o = fixed_opts(PROM_FORMAT_TEXT);
    _cleanup_free_ char *t = render(s, &o);
    check_golden("odd.prom", t);
    check_promtool(t);
    /* Quotes and backslashes escaped, the newline and the stray byte replaced, UTF-8 kept. */
    assert_non_null(strstr(t,
                           "device=\"nvidia0\",modelName=\"NVIDIA \\\"Weird\\\" \\\\ GPU?rev2 ?\","
                           "Hostname=\"n\xc5\x93ud \\\"east\\\"\\\\7\""));
    assert_non_null(strstr(t, "process=\"a\\\"b\\\\c\",user=\"d\xc3\xa6mon\""));
    /* The OpenMetrics variant escapes the same way. */
    o.format = PROM_FORMAT_OPENMETRICS;
    _cleanup_free_ char *om = render(s, &o);
    assert_non_null(strstr(om, "modelName=\"NVIDIA \\\"Weird\\\" \\\\ GPU?rev2 ?\""));
}

static void test_no_gpus(void **state)
{
    _cleanup_(snapshot_unrefp) struct snapshot *s = snap_new(true, 0);
    struct expose_opts o = fixed_opts(PROM_FORMAT_TEXT);
    _cleanup_free_ char *t = render(s, &o);
    assert_true(value_of(t, "gpumon_up ") == 1);
    assert_true(value_of(t, "gpumon_gpus ") == 0);
    assert_non_null(strstr(t, "cuda_version=\"13.0\"} 1\n"));
    assert_null(strstr(t, "DCGM_"));
    assert_null(strstr(t, "gpumon_gpu_up"));
}

/* A counter NVML reported nonsensically is left out, not the whole scrape. */
static void test_negative_counter_left_out(void **state)
{
    _cleanup_(snapshot_unrefp) struct snapshot *s = consumer_snapshot();
    gpu_values_set(&s->gpu[0].values, GF_TOTAL_ENERGY, -1);
    struct expose_opts o = fixed_opts(PROM_FORMAT_TEXT);
    _cleanup_free_ char *t = render(s, &o);
    assert_null(strstr(t, "ENERGY"));
    assert_non_null(find_line(t, "DCGM_FI_DEV_SM_CLOCK{"));
}

/* A pre-rendered page must not depend on the scrape: the sample's own time replaces an age. */
static void test_sample_time(void **state)
{
    _cleanup_(snapshot_unrefp) struct snapshot *s = consumer_snapshot();
    struct expose_opts o = {.format = PROM_FORMAT_TEXT};
    _cleanup_free_ char *t = render(s, &o);
    assert_true(value_of(t, "gpumon_sample_timestamp_seconds ") == TAKEN_AT);
    assert_null(strstr(t, "gpumon_sample_age_seconds"));
    assert_null(strstr(t, "gpumon_scrape_duration_seconds"));
    assert_non_null(strstr(t, "gpumon_info{version=\"" GPUNODE_VERSION "\""));
    _cleanup_free_ char *again = render(s, &o);
    assert_string_equal(t, again);
}

/* What a collectors file selects: only its fields, its label, DCGM 3's name when listed. */
static void test_selection(void **state)
{
    _cleanup_(snapshot_unrefp) struct snapshot *s = consumer_snapshot();
    const char *names[EXPOSE_DCGM_NAMES_MAX];
    bool selected[EXPOSE_DCGM_NAMES_MAX] = {false};
    size_t n = expose_dcgm_names(names);
    assert_true(n > 40 && n <= EXPOSE_DCGM_NAMES_MAX);
    for (size_t i = 0; i < n; i++)
        selected[i] = strcmp(names[i], "DCGM_FI_DEV_GPU_TEMP") == 0 ||
                      strcmp(names[i], "DCGM_FI_DEV_CLOCK_THROTTLE_REASONS") == 0;
    struct expose_selection sel;
    expose_select(names, selected, n, &sel);
    struct expose_opts o = {.format = PROM_FORMAT_TEXT, .sel = &sel};
    _cleanup_free_ char *t = render(s, &o);
    assert_int_equal(count_lines(t, "DCGM_"), 2);
    assert_non_null(strstr(t, "Hostname=\"node1\"} 63\n")); /* no driver label */
    assert_true(value_of(t, "DCGM_FI_DEV_CLOCK_THROTTLE_REASONS{") == 4);
    assert_null(strstr(t, "DCGM_FI_DEV_CLOCKS_EVENT_REASONS"));
    assert_null(strstr(t, "DCGM_FI_DEV_XID_ERRORS"));
    /* gpumon's own families do not depend on it. */
    assert_non_null(find_line(t, "gpumon_clock_event_active{"));
    assert_non_null(find_line(t, "gpumon_process_memory_bytes{"));

    expose_select_all(&sel, true);
    _cleanup_free_ char *both = render(s, &o);
    assert_true(value_of(both, "DCGM_FI_DEV_CLOCK_THROTTLE_REASONS{") == 4);
    assert_true(value_of(both, "DCGM_FI_DEV_CLOCKS_EVENT_REASONS{") == 4);
}

/* A GPU without GPM says why its profiling fields are missing. */
static void test_profiling_reason(void **state)
{
    _cleanup_(snapshot_unrefp) struct snapshot *s = consumer_snapshot();
    snprintf(s->gpu[0].prof_reason, sizeof(s->gpu[0].prof_reason),
             "GPM is not supported on this GPU");
    struct expose_opts o = {.format = PROM_FORMAT_TEXT};
    _cleanup_free_ char *t = render(s, &o);
    assert_non_null(strstr(t, "DCGM_FI_DRIVER_VERSION=\"580.159.04\",reason=\"GPM is not "
                              "supported on this GPU\"} 1\n"));
    assert_null(find_line(t, "DCGM_FI_PROF_"));
}

/* 8 busy GPUs with processes and XIDs, rendered as every scrape does. */
static void test_eight_gpus(void **state)
{
    _cleanup_(snapshot_unrefp) struct snapshot *s = snap_new(true, 8);
    for (unsigned i = 0; i < 8; i++) {
        struct gpu_sample *g = &s->gpu[i];
        char uuid[64], bus[32];
        snprintf(uuid, sizeof(uuid), "GPU-%08x-0000-0000-0000-000000000000", i);
        snprintf(bus, sizeof(bus), "00000000:%02X:00.0", 0x10 + i);
        gpu_ident(g, i, uuid, "NVIDIA H200", bus);
        for (int f = 0; f < GF_COUNT; f++)
            gpu_values_set(&g->values, (enum gpu_field)f, 1000.0 * f + i);
        for (int p = 0; p < 4; p++)
            add_proc(g, 1000 + 10 * (int)i + p, NONE, GIB, "user", "python3",
                     "docker://0123456789ab", "gpuq://42");
        g->xid_supported = true;
        add_xid(g, 13, 1, TAKEN_AT);
        add_xid(g, 48, 2, TAKEN_AT);
    }
    struct expose_opts o = fixed_opts(PROM_FORMAT_TEXT);
    _cleanup_free_ char *t = render(s, &o);
    /* Every GPU, every field, every process and XID: nothing dropped at this size. How fast it
     * renders is bench/gpumon's business, not a test's. */
    assert_int_equal(count_lines(t, "DCGM_FI_DEV_GPU_UTIL{"), 8);
    assert_int_equal(count_lines(t, "DCGM_FI_DEV_TOTAL_ENERGY_CONSUMPTION{"), 8);
    assert_int_equal(count_lines(t, "gpumon_process_memory_bytes{"), 32);
    assert_int_equal(count_lines(t, "gpumon_xid_errors_total{"), 16);
    assert_int_equal(count_lines(t, "gpumon_clock_event_active{"), 8 * 9);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_consumer_gpu), cmocka_unit_test(test_mig_gpu),
        cmocka_unit_test(test_openmetrics),  cmocka_unit_test(test_lost_gpu),
        cmocka_unit_test(test_nvml_down),    cmocka_unit_test(test_odd_labels),
        cmocka_unit_test(test_no_gpus),      cmocka_unit_test(test_negative_counter_left_out),
        cmocka_unit_test(test_sample_time),  cmocka_unit_test(test_eight_gpus),
        cmocka_unit_test(test_selection),    cmocka_unit_test(test_profiling_reason),
    };
    return test_run_cases(tests);
}
