/* MIG: mode, MIG device handles, GPU instances and their profiles.
 *
 * A fixture GPU without "mig" is not MIG-capable (a GeForce): the MIG calls answer
 * NOT_SUPPORTED. With "mig" but "enabled": false the calls answer as NVML does on a capable GPU
 * in normal mode: no MIG devices (NOT_FOUND), no GPU instances (INVALID_ARGUMENT). */
#include <stdint.h>
#include <string.h>

#include "fake-nvml.h"
#include "lib/macro.h"

/* GPU instance handles: like device handles, their position says which GPU and id. */
static struct nvmlGpuInstance_st {
    char unused;
} gi_slots[FAKE_MAX_GPUS][FAKE_MAX_GI];

const struct fake_mig_profile *fake_profile_by_id(const struct fake_gpu *g, unsigned id)
{
    for (unsigned i = 0; i < g->n_profiles; i++)
        if (g->profiles[i].id == id)
            return &g->profiles[i];
    return NULL;
}

const struct fake_mig_instance *fake_instance_by_gi(const struct fake_gpu *g, unsigned gi)
{
    if (!g->mig_enabled)
        return NULL;
    for (unsigned i = 0; i < g->n_instances; i++)
        if (g->instances[i].gi == gi)
            return &g->instances[i];
    return NULL;
}

nvmlReturn_t nvmlDeviceGetMigMode(nvmlDevice_t device, unsigned int *currentMode,
                                  unsigned int *pendingMode)
{
    struct fake_ctx c;
    nvmlReturn_t r = fake_begin(FC_nvmlDeviceGetMigMode, device, 0, &c);
    if (r == NVML_SUCCESS && (!currentMode || !pendingMode))
        r = NVML_ERROR_INVALID_ARGUMENT;
    if (r == NVML_SUCCESS && !c.gpu->has_mig)
        r = NVML_ERROR_NOT_SUPPORTED;
    if (r == NVML_SUCCESS) {
        *currentMode = c.gpu->mig_enabled ? NVML_DEVICE_MIG_ENABLE : NVML_DEVICE_MIG_DISABLE;
        *pendingMode = c.gpu->mig_pending ? NVML_DEVICE_MIG_ENABLE : NVML_DEVICE_MIG_DISABLE;
    }
    return fake_end(r);
}

nvmlReturn_t nvmlDeviceGetMaxMigDeviceCount(nvmlDevice_t device, unsigned int *count)
{
    struct fake_ctx c;
    nvmlReturn_t r = fake_begin(FC_nvmlDeviceGetMaxMigDeviceCount, device, 0, &c);
    if (r == NVML_SUCCESS && !count)
        r = NVML_ERROR_INVALID_ARGUMENT;
    /* NVML documents zero "if MIG is not supported or enabled". */
    if (r == NVML_SUCCESS)
        *count = c.gpu->mig_enabled ? c.gpu->mig_max_devices : 0;
    return fake_end(r);
}

nvmlReturn_t nvmlDeviceGetMigDeviceHandleByIndex(nvmlDevice_t device, unsigned int index,
                                                 nvmlDevice_t *migDevice)
{
    struct fake_ctx c;
    nvmlReturn_t r = fake_begin(FC_nvmlDeviceGetMigDeviceHandleByIndex, device, 0, &c);
    if (r == NVML_SUCCESS && !migDevice)
        r = NVML_ERROR_INVALID_ARGUMENT;
    if (r == NVML_SUCCESS && !c.gpu->has_mig)
        r = NVML_ERROR_NOT_SUPPORTED;
    if (r == NVML_SUCCESS && (!c.gpu->mig_enabled || index >= c.gpu->n_instances))
        r = NVML_ERROR_NOT_FOUND;
    if (r == NVML_SUCCESS)
        *migDevice = fake_mig_handle(c.index, index);
    return fake_end(r);
}

/* The GPU instance or compute instance id of a MIG device handle. */
static nvmlReturn_t get_instance_id(enum fake_call call, bool ci, nvmlDevice_t device,
                                    unsigned int *id)
{
    struct fake_ctx c;
    nvmlReturn_t r = fake_begin(call, device, FAKE_MIG_OK, &c);
    if (r == NVML_SUCCESS && !id)
        r = NVML_ERROR_INVALID_ARGUMENT;
    /* Only MIG device handles have instance ids. */
    if (r == NVML_SUCCESS && !c.mig)
        r = NVML_ERROR_NOT_SUPPORTED;
    if (r == NVML_SUCCESS)
        *id = ci ? c.mig->ci : c.mig->gi;
    return fake_end(r);
}

nvmlReturn_t nvmlDeviceGetGpuInstanceId(nvmlDevice_t device, unsigned int *id)
{
    return get_instance_id(FC_nvmlDeviceGetGpuInstanceId, false, device, id);
}

nvmlReturn_t nvmlDeviceGetComputeInstanceId(nvmlDevice_t device, unsigned int *id)
{
    return get_instance_id(FC_nvmlDeviceGetComputeInstanceId, true, device, id);
}

nvmlReturn_t nvmlDeviceGetGpuInstanceById(nvmlDevice_t device, unsigned int id,
                                          nvmlGpuInstance_t *gpuInstance)
{
    struct fake_ctx c;
    nvmlReturn_t r = fake_begin(FC_nvmlDeviceGetGpuInstanceById, device, 0, &c);
    if (r == NVML_SUCCESS && !gpuInstance)
        r = NVML_ERROR_INVALID_ARGUMENT;
    if (r == NVML_SUCCESS && !c.gpu->has_mig)
        r = NVML_ERROR_NOT_SUPPORTED;
    if (r == NVML_SUCCESS && !c.gpu->mig_enabled)
        r = NVML_ERROR_INVALID_ARGUMENT;
    if (r == NVML_SUCCESS && (id >= FAKE_MAX_GI || !fake_instance_by_gi(c.gpu, id)))
        r = NVML_ERROR_NOT_FOUND;
    if (r == NVML_SUCCESS)
        *gpuInstance = &gi_slots[c.index][id];
    return fake_end(r);
}

/* Where a GPU instance starts: the slices of the distinct instances listed before it. */
static unsigned placement_start(const struct fake_gpu *g, const struct fake_mig_instance *in)
{
    unsigned start = 0;
    for (unsigned i = 0; i < g->n_instances && &g->instances[i] != in; i++) {
        if (fake_instance_by_gi(g, g->instances[i].gi) != &g->instances[i])
            continue; /* a second compute instance of the same GPU instance */
        const struct fake_mig_profile *pf = fake_profile_by_id(g, g->instances[i].profile_id);
        start += pf ? pf->slices : 0;
    }
    return start;
}

nvmlReturn_t nvmlGpuInstanceGetInfo(nvmlGpuInstance_t gpuInstance, nvmlGpuInstanceInfo_t *info)
{
    struct fake_ctx c;
    uintptr_t p = (uintptr_t)gpuInstance, base = (uintptr_t)gi_slots;
    if (p < base || p >= base + sizeof(gi_slots) || (p - base) % sizeof(gi_slots[0][0]) != 0)
        return NVML_ERROR_INVALID_ARGUMENT;
    unsigned slot = (unsigned)((p - base) / sizeof(gi_slots[0][0]));
    unsigned gi = slot % FAKE_MAX_GI;
    /* Checked like a call on the parent GPU, whose "errors" and loss apply. */
    nvmlDevice_t parent = fake_gpu_handle(slot / FAKE_MAX_GI);
    nvmlReturn_t r = fake_begin(FC_nvmlGpuInstanceGetInfo, parent, 0, &c);
    if (r == NVML_SUCCESS && !info)
        r = NVML_ERROR_INVALID_ARGUMENT;
    const struct fake_mig_instance *in = r == NVML_SUCCESS ? fake_instance_by_gi(c.gpu, gi) : NULL;
    if (r == NVML_SUCCESS && !in)
        r = NVML_ERROR_INVALID_ARGUMENT; /* destroyed since the handle was taken */
    if (r == NVML_SUCCESS) {
        const struct fake_mig_profile *pf = fake_profile_by_id(c.gpu, in->profile_id);
        *info = (nvmlGpuInstanceInfo_t){
            .device = parent,
            .id = in->gi,
            .profileId = in->profile_id,
            .placement = {.start = placement_start(c.gpu, in), .size = pf ? pf->slices : 0},
        };
    }
    return fake_end(r);
}

#ifndef FAKE_NVML_OLD
nvmlReturn_t nvmlDeviceGetGpuInstanceProfileInfoV(nvmlDevice_t device, unsigned int profile,
                                                  nvmlGpuInstanceProfileInfo_v2_t *info)
{
    struct fake_ctx c;
    const struct fake_mig_profile *pf = NULL;
    nvmlReturn_t r = fake_begin(FC_nvmlDeviceGetGpuInstanceProfileInfoV, device, 0, &c);
    if (r == NVML_SUCCESS && !info)
        r = NVML_ERROR_INVALID_ARGUMENT;
    if (r == NVML_SUCCESS && !c.gpu->has_mig)
        r = NVML_ERROR_NOT_SUPPORTED;
    if (r == NVML_SUCCESS && info->version != nvmlGpuInstanceProfileInfo_v2)
        r = NVML_ERROR_ARGUMENT_VERSION_MISMATCH;
    for (unsigned i = 0; r == NVML_SUCCESS && i < c.gpu->n_profiles && !pf; i++)
        if (c.gpu->profiles[i].index == profile)
            pf = &c.gpu->profiles[i];
    if (r == NVML_SUCCESS && !pf)
        r = NVML_ERROR_INVALID_ARGUMENT;
    if (r == NVML_SUCCESS) {
        unsigned version = info->version;
        memset(info, 0, sizeof(*info));
        info->version = version;
        info->id = pf->id;
        info->sliceCount = pf->slices;
        info->instanceCount = pf->instances;
        info->multiprocessorCount = pf->multiprocessors;
        info->memorySizeMB = pf->memory_mb;
        memcpy(info->name, pf->name, sizeof(info->name));
    }
    return fake_end(r);
}
#endif

nvmlReturn_t nvmlDeviceGetAttributes_v2(nvmlDevice_t device, nvmlDeviceAttributes_t *attributes)
{
    struct fake_ctx c;
    nvmlReturn_t r = fake_begin(FC_nvmlDeviceGetAttributes_v2, device, FAKE_MIG_OK, &c);
    if (r == NVML_SUCCESS && !attributes)
        r = NVML_ERROR_INVALID_ARGUMENT;
    /* NVML documents this call for MIG device handles only. */
    if (r == NVML_SUCCESS && !c.mig)
        r = NVML_ERROR_NOT_SUPPORTED;
    if (r == NVML_SUCCESS) {
        const struct fake_mig_profile *pf = fake_profile_by_id(c.gpu, c.mig->profile_id);
        *attributes = (nvmlDeviceAttributes_t){
            .multiprocessorCount = pf->multiprocessors,
            .gpuInstanceSliceCount = pf->slices,
            .computeInstanceSliceCount = pf->slices,
            .memorySizeMB = pf->memory_mb,
        };
    }
    return fake_end(r);
}
