/* The fake NVML's state: init/shutdown (ref-counted), the fixture and its re-reading, handles,
 * error strings, and fake_begin(), through which every device call passes. */
#include <errno.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>

#include "fake-nvml.h"
#include "lib/nvml-errors.h"
#include "lib/macro.h"

/* Identity of a fixture file's content as far as stat() tells: a renamed-over file has a new
 * inode, a rewritten one a new mtime or size. */
struct file_sig {
    dev_t dev;
    ino_t ino;
    off_t size;
    struct timespec mtime;
};

pthread_mutex_t fake_lock = PTHREAD_MUTEX_INITIALIZER;

static struct {
    unsigned refcount;
    struct fake_fixture *fx;
    char *path;
    struct file_sig sig;
    struct file_sig bad_sig; /* a broken version already reported */
    bool have_t0;
    struct timespec t0;
    struct timespec last_check;
} state;

/* Handles are addresses in these arrays; which GPU and MIG device a handle means follows from
 * its position alone, so the slots are never written and need no lock. */
static struct nvmlDevice_st {
    char unused;
} gpu_slots[FAKE_MAX_GPUS], mig_slots[FAKE_MAX_GPUS][FAKE_MAX_MIG];

#define RELOAD_INTERVAL_NS (100 * 1000 * 1000LL)

static long long mono_ns(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return ts.tv_sec * 1000000000LL + ts.tv_nsec;
}

static long long ts_ns(const struct timespec *ts)
{
    return ts->tv_sec * 1000000000LL + ts->tv_nsec;
}

double fake_now(void)
{
    if (!state.have_t0)
        return 0;
    return (double)(mono_ns() - ts_ns(&state.t0)) / 1e9;
}

bool fake_gpu_lost(const struct fake_gpu *g, double now)
{
    return g->lost_at >= 0 && now >= g->lost_at;
}

nvmlDevice_t fake_gpu_handle(unsigned index)
{
    return &gpu_slots[index];
}

nvmlDevice_t fake_mig_handle(unsigned index, unsigned mig_index)
{
    return &mig_slots[index][mig_index];
}

/* The position of p in an array of n elements of size bytes, -1 if p is not one of them. Handles
 * are compared as integers since they may be anything the caller passes. */
static long slot_of(const void *p, const void *base, size_t n, size_t size)
{
    uintptr_t a = (uintptr_t)p, b = (uintptr_t)base;
    if (a < b || a >= b + n * size || (a - b) % size != 0)
        return -1;
    return (long)((a - b) / size);
}

static int file_stat(const char *path, struct file_sig *sig)
{
    struct stat st;
    if (stat(path, &st) < 0)
        return -errno;
    *sig = (struct file_sig){st.st_dev, st.st_ino, st.st_size, st.st_mtim};
    return 0;
}

static bool sig_equal(const struct file_sig *a, const struct file_sig *b)
{
    return a->dev == b->dev && a->ino == b->ino && a->size == b->size &&
           a->mtime.tv_sec == b->mtime.tv_sec && a->mtime.tv_nsec == b->mtime.tv_nsec;
}

/* Loads path if it is not what is loaded already. Returns 0 (state.fx is current) or a negative
 * errno with err filled; state.fx is then unchanged. */
static int reload(const char *path, char *err, size_t errlen)
{
    struct file_sig sig = {0};
    struct fake_fixture *fx = NULL;
    int r = file_stat(path, &sig);
    if (r < 0) {
        snprintf(err, errlen, "%s: %s", path, strerror(-r));
        return r;
    }
    if (state.fx && state.path && strcmp(state.path, path) == 0 && sig_equal(&sig, &state.sig))
        return 0;
    r = fake_fixture_load(path, &fx, err, errlen);
    if (r < 0) {
        state.bad_sig = sig;
        return r;
    }
    char *p = strdup(path);
    if (!p) {
        fake_fixture_free(fx);
        snprintf(err, errlen, "out of memory");
        return -ENOMEM;
    }
    fake_fixture_free(state.fx);
    free(state.path);
    state.fx = fx;
    state.path = p;
    state.sig = sig;
    return 0;
}

/* Re-reads a changed fixture at most every 100 ms; a broken new version is reported once and the
 * old one kept, as tests write the file while a daemon runs. */
static void maybe_reload(void)
{
    long long now = mono_ns();
    char err[512];
    struct file_sig sig = {0};
    if (now - ts_ns(&state.last_check) < RELOAD_INTERVAL_NS)
        return;
    state.last_check = (struct timespec){now / 1000000000LL, now % 1000000000LL};
    if (file_stat(state.path, &sig) < 0 || sig_equal(&sig, &state.sig) ||
        sig_equal(&sig, &state.bad_sig))
        return;
    if (reload(state.path, err, sizeof(err)) < 0)
        fprintf(stderr, "fake-nvml: keeping the previous fixture: %s\n", err);
}

/* Calls per GPU slot and entry point since the last init from nothing, for "max_calls". Under
 * fake_lock. */
static unsigned calls_made[FAKE_MAX_GPUS][FC_COUNT];

nvmlReturn_t nvmlInit_v2(void)
{
    char err[512];
    pthread_mutex_lock(&fake_lock);
    const char *path = getenv("FAKE_NVML_FIXTURE");
    if (!path || !*path) {
        fprintf(stderr, "fake-nvml: FAKE_NVML_FIXTURE is not set\n");
        return fake_end(NVML_ERROR_DRIVER_NOT_LOADED);
    }
    if (reload(path, err, sizeof(err)) < 0) {
        if (state.refcount == 0 || !state.fx) {
            fprintf(stderr, "fake-nvml: %s\n", err);
            return fake_end(NVML_ERROR_DRIVER_NOT_LOADED);
        }
        fprintf(stderr, "fake-nvml: keeping the previous fixture: %s\n", err);
    }
    if (state.fx->init_error) {
        nvmlReturn_t r = state.fx->init_error;
        /* A failed init holds nothing: the caller unloads the library without a shutdown. */
        if (state.refcount == 0) {
            fake_fixture_free(state.fx);
            free(state.path);
            state.fx = NULL;
            state.path = NULL;
        }
        return fake_end(r);
    }
    if (!state.have_t0) {
        clock_gettime(CLOCK_MONOTONIC, &state.t0);
        state.have_t0 = true;
    }
    clock_gettime(CLOCK_MONOTONIC, &state.last_check);
    if (state.refcount == 0)
        memset(calls_made, 0, sizeof(calls_made));
    state.refcount++;
    return fake_end(NVML_SUCCESS);
}

nvmlReturn_t nvmlShutdown(void)
{
    pthread_mutex_lock(&fake_lock);
    if (state.refcount == 0)
        return fake_end(NVML_ERROR_UNINITIALIZED);
    if (--state.refcount == 0) {
        /* Forget the fixture, so that the next init reads FAKE_NVML_FIXTURE afresh. */
        fake_fixture_free(state.fx);
        free(state.path);
        state.fx = NULL;
        state.path = NULL;
        state.bad_sig = (struct file_sig){0};
    }
    return fake_end(NVML_SUCCESS);
}

nvmlReturn_t fake_end(nvmlReturn_t r)
{
    pthread_mutex_unlock(&fake_lock);
    return r;
}

nvmlReturn_t fake_begin_plain(struct fake_ctx *c)
{
    pthread_mutex_lock(&fake_lock);
    *c = (struct fake_ctx){0};
    if (state.refcount == 0)
        return NVML_ERROR_UNINITIALIZED;
    maybe_reload();
    c->fx = state.fx;
    c->now = fake_now();
    return NVML_SUCCESS;
}

/* Fills c->gpu and c->mig for device in the current fixture. */
static nvmlReturn_t resolve(nvmlDevice_t device, struct fake_ctx *c)
{
    long gpu = slot_of(device, gpu_slots, FAKE_MAX_GPUS, sizeof(gpu_slots[0])), mig = -1;
    if (gpu < 0) {
        long m = slot_of(device, mig_slots, FAKE_MAX_GPUS * FAKE_MAX_MIG, sizeof(mig_slots[0][0]));
        if (m < 0)
            return NVML_ERROR_INVALID_ARGUMENT;
        gpu = m / FAKE_MAX_MIG;
        mig = m % FAKE_MAX_MIG;
    }
    if ((unsigned long)gpu >= c->fx->n_gpus)
        return NVML_ERROR_INVALID_ARGUMENT;
    c->index = (unsigned)gpu;
    c->gpu = &c->fx->gpus[gpu];
    c->mig = NULL;
    if (mig >= 0) {
        /* A MIG handle outlives its instance only as an invalid argument (NVML: "the MIG
         * device handle would remain invalid"); the parent's loss wins though. */
        if (fake_gpu_lost(c->gpu, c->now))
            return NVML_SUCCESS;
        if (!c->gpu->mig_enabled || (unsigned long)mig >= c->gpu->n_instances)
            return NVML_ERROR_INVALID_ARGUMENT;
        c->mig_index = (unsigned)mig;
        c->mig = &c->gpu->instances[mig];
    }
    return NVML_SUCCESS;
}

nvmlReturn_t fake_begin(enum fake_call call, nvmlDevice_t device, unsigned flags,
                        struct fake_ctx *c)
{
    nvmlReturn_t r = fake_begin_plain(c);
    if (r != NVML_SUCCESS)
        return r;
    if (flags & FAKE_SYSTEM)
        return c->fx->forced[call] ? c->fx->forced[call] : NVML_SUCCESS;
    r = resolve(device, c);
    if (r != NVML_SUCCESS)
        return r;
    unsigned delay = c->gpu->delay_us[call];
    if (delay > 0) {
        /* Sleep unlocked, as the real library lets other threads call meanwhile; then look at
         * the world again, since it may have changed. */
        pthread_mutex_unlock(&fake_lock);
        struct timespec ts = {delay / 1000000, (long)(delay % 1000000) * 1000};
        while (nanosleep(&ts, &ts) < 0 && errno == EINTR)
            ;
        r = fake_begin_plain(c);
        if (r == NVML_SUCCESS)
            r = resolve(device, c);
        if (r != NVML_SUCCESS)
            return r;
    }
    if (fake_gpu_lost(c->gpu, c->now))
        return NVML_ERROR_GPU_IS_LOST;
    if (c->gpu->forced[call])
        return c->gpu->forced[call];
    /* Counted per GPU slot from the init, so fixture re-reads do not reset it. */
    if (c->gpu->max_calls[call] && ++calls_made[c->index][call] > c->gpu->max_calls[call])
        return NVML_ERROR_UNKNOWN;
    if (c->mig && !(flags & FAKE_MIG_OK))
        return NVML_ERROR_NOT_SUPPORTED;
    return NVML_SUCCESS;
}

nvmlReturn_t fake_copy_string(char *buf, unsigned length, const char *s)
{
    if (!buf)
        return NVML_ERROR_INVALID_ARGUMENT;
    size_t n = strlen(s);
    if (length < n + 1)
        return NVML_ERROR_INSUFFICIENT_SIZE;
    memcpy(buf, s, n + 1);
    return NVML_SUCCESS;
}

const char *nvmlErrorString(nvmlReturn_t result)
{
    return nvml_api_error_text(result);
}

nvmlReturn_t nvmlDeviceGetCount_v2(unsigned int *deviceCount)
{
    struct fake_ctx c;
    nvmlReturn_t r = fake_begin(FC_nvmlDeviceGetCount_v2, NULL, FAKE_SYSTEM, &c);
    if (r == NVML_SUCCESS && !deviceCount)
        r = NVML_ERROR_INVALID_ARGUMENT;
    if (r == NVML_SUCCESS)
        *deviceCount = c.fx->n_gpus;
    return fake_end(r);
}

nvmlReturn_t nvmlDeviceGetHandleByIndex_v2(unsigned int index, nvmlDevice_t *device)
{
    struct fake_ctx c;
    nvmlReturn_t r = fake_begin_plain(&c);
    if (r != NVML_SUCCESS)
        return fake_end(r);
    if (index >= c.fx->n_gpus || !device)
        return fake_end(NVML_ERROR_INVALID_ARGUMENT);
    /* The rest of the checks (lost, "errors", delay) as for any call on that GPU. */
    pthread_mutex_unlock(&fake_lock);
    r = fake_begin(FC_nvmlDeviceGetHandleByIndex_v2, fake_gpu_handle(index), 0, &c);
    if (r == NVML_SUCCESS)
        *device = fake_gpu_handle(index);
    return fake_end(r);
}

nvmlReturn_t nvmlSystemGetDriverVersion(char *version, unsigned int length)
{
    struct fake_ctx c;
    nvmlReturn_t r = fake_begin(FC_nvmlSystemGetDriverVersion, NULL, FAKE_SYSTEM, &c);
    if (r == NVML_SUCCESS && !c.fx->has_driver_version)
        r = NVML_ERROR_NOT_SUPPORTED;
    if (r == NVML_SUCCESS)
        r = fake_copy_string(version, length, c.fx->driver_version);
    return fake_end(r);
}

#ifndef FAKE_NVML_OLD
nvmlReturn_t nvmlSystemGetCudaDriverVersion_v2(int *cudaDriverVersion)
{
    struct fake_ctx c;
    nvmlReturn_t r = fake_begin(FC_nvmlSystemGetCudaDriverVersion_v2, NULL, FAKE_SYSTEM, &c);
    if (r == NVML_SUCCESS && !cudaDriverVersion)
        r = NVML_ERROR_INVALID_ARGUMENT;
    if (r == NVML_SUCCESS && !c.fx->has_cuda_version)
        r = NVML_ERROR_NOT_SUPPORTED;
    if (r == NVML_SUCCESS)
        *cudaDriverVersion = c.fx->cuda_version;
    return fake_end(r);
}
#endif
