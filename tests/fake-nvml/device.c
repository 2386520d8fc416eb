/* The per-device queries: identity, telemetry, ECC, field values and process lists. Each one
 * answers from the fixture and NOT_SUPPORTED when its key is absent. */
#include <limits.h>
#include <stddef.h>
#include <stdio.h>
#include <string.h>
#include <time.h>

#include "fake-nvml.h"
#include "lib/macro.h"

/* Sampling period reported with encoder/decoder utilisation (µs), a value real GPUs report. */
#define CODEC_SAMPLING_PERIOD_US 167000

static const struct fake_num *num_at(const struct fake_gpu *g, size_t offset)
{
    return (const struct fake_num *)((const char *)g + offset);
}

static nvmlReturn_t put_u32(const struct fake_num *n, unsigned int *out)
{
    if (!out)
        return NVML_ERROR_INVALID_ARGUMENT;
    if (!n->set)
        return NVML_ERROR_NOT_SUPPORTED;
    *out = (unsigned int)n->v;
    return NVML_SUCCESS;
}

/* The shape of most queries: one optional number of the GPU into one unsigned int. */
static nvmlReturn_t get_u32(enum fake_call call, nvmlDevice_t device, size_t offset,
                            unsigned int *out)
{
    struct fake_ctx c;
    nvmlReturn_t r = fake_begin(call, device, 0, &c);
    if (r == NVML_SUCCESS)
        r = put_u32(num_at(c.gpu, offset), out);
    return fake_end(r);
}

nvmlReturn_t nvmlDeviceGetIndex(nvmlDevice_t device, unsigned int *index)
{
    struct fake_ctx c;
    nvmlReturn_t r = fake_begin(FC_nvmlDeviceGetIndex, device, FAKE_MIG_OK, &c);
    if (r == NVML_SUCCESS && !index)
        r = NVML_ERROR_INVALID_ARGUMENT;
    /* On a MIG handle NVML answers the index for nvmlDeviceGetMigDeviceHandleByIndex. */
    if (r == NVML_SUCCESS)
        *index = c.mig ? c.mig_index : c.index;
    return fake_end(r);
}

nvmlReturn_t nvmlDeviceGetName(nvmlDevice_t device, char *name, unsigned int length)
{
    struct fake_ctx c;
    char buf[2 * FAKE_STR_MAX];
    nvmlReturn_t r = fake_begin(FC_nvmlDeviceGetName, device, FAKE_MIG_OK, &c);
    if (r == NVML_SUCCESS) {
        /* A MIG device is named after its parent and profile: "NVIDIA H100 80GB HBM3 MIG
         * 1g.10gb". */
        const struct fake_mig_profile *pf =
            c.mig ? fake_profile_by_id(c.gpu, c.mig->profile_id) : NULL;
        snprintf(buf, sizeof(buf), "%s%s%s", c.gpu->name, pf ? " " : "", pf ? pf->name : "");
        r = fake_copy_string(name, length, buf);
    }
    return fake_end(r);
}

nvmlReturn_t nvmlDeviceGetUUID(nvmlDevice_t device, char *uuid, unsigned int length)
{
    struct fake_ctx c;
    nvmlReturn_t r = fake_begin(FC_nvmlDeviceGetUUID, device, FAKE_MIG_OK, &c);
    if (r == NVML_SUCCESS)
        r = fake_copy_string(uuid, length, c.mig ? c.mig->uuid : c.gpu->uuid);
    return fake_end(r);
}

nvmlReturn_t nvmlDeviceGetPciInfo_v3(nvmlDevice_t device, nvmlPciInfo_t *pci)
{
    struct fake_ctx c;
    nvmlReturn_t r = fake_begin(FC_nvmlDeviceGetPciInfo_v3, device, 0, &c);
    if (r == NVML_SUCCESS && !pci)
        r = NVML_ERROR_INVALID_ARGUMENT;
    if (r == NVML_SUCCESS) {
        const struct fake_gpu *g = c.gpu;
        memset(pci, 0, sizeof(*pci));
        snprintf(pci->busIdLegacy, sizeof(pci->busIdLegacy), "%04x:%02x:%02x.0",
                 g->pci_domain & 0xffff, g->pci_bus, g->pci_device);
        snprintf(pci->busId, sizeof(pci->busId), "%s", g->pci_bus_id);
        pci->domain = g->pci_domain;
        pci->bus = g->pci_bus;
        pci->device = g->pci_device;
        pci->pciDeviceId = g->pci_device_id;
        pci->pciSubSystemId = g->pci_subsystem_id;
    }
    return fake_end(r);
}

nvmlReturn_t nvmlDeviceGetMinorNumber(nvmlDevice_t device, unsigned int *minorNumber)
{
    return get_u32(FC_nvmlDeviceGetMinorNumber, device, offsetof(struct fake_gpu, minor),
                   minorNumber);
}

nvmlReturn_t nvmlDeviceGetCudaComputeCapability(nvmlDevice_t device, int *major, int *minor)
{
    struct fake_ctx c;
    nvmlReturn_t r = fake_begin(FC_nvmlDeviceGetCudaComputeCapability, device, 0, &c);
    if (r == NVML_SUCCESS && (!major || !minor))
        r = NVML_ERROR_INVALID_ARGUMENT;
    if (r == NVML_SUCCESS && !c.gpu->has_cc)
        r = NVML_ERROR_NOT_SUPPORTED;
    if (r == NVML_SUCCESS) {
        *major = c.gpu->cc_major;
        *minor = c.gpu->cc_minor;
    }
    return fake_end(r);
}

nvmlReturn_t nvmlDeviceGetUtilizationRates(nvmlDevice_t device, nvmlUtilization_t *utilization)
{
    struct fake_ctx c;
    nvmlReturn_t r = fake_begin(FC_nvmlDeviceGetUtilizationRates, device, 0, &c);
    if (r == NVML_SUCCESS && !utilization)
        r = NVML_ERROR_INVALID_ARGUMENT;
    /* A GPU in MIG mode has no whole-GPU utilisation (real behaviour). */
    if (r == NVML_SUCCESS && (!c.gpu->util_gpu.set || c.gpu->mig_enabled))
        r = NVML_ERROR_NOT_SUPPORTED;
    if (r == NVML_SUCCESS) {
        utilization->gpu = (unsigned int)c.gpu->util_gpu.v;
        utilization->memory = (unsigned int)c.gpu->util_mem.v;
    }
    return fake_end(r);
}

/* The fixture's "used" is what applications hold; the driver's own reservation ("reserved")
 * counts as used in the version 1 query and separately in version 2, as on a real driver. */
nvmlReturn_t nvmlDeviceGetMemoryInfo(nvmlDevice_t device, nvmlMemory_t *memory)
{
    struct fake_ctx c;
    nvmlReturn_t r = fake_begin(FC_nvmlDeviceGetMemoryInfo, device, FAKE_MIG_OK, &c);
    if (r == NVML_SUCCESS && !memory)
        r = NVML_ERROR_INVALID_ARGUMENT;
    if (r != NVML_SUCCESS)
        return fake_end(r);
    const struct fake_num *total = c.mig ? &c.mig->mem_total : &c.gpu->mem_total;
    const struct fake_num *used = c.mig ? &c.mig->mem_used : &c.gpu->mem_used;
    unsigned long long reserved = c.mig ? 0 : c.gpu->mem_reserved.v;
    if (!total->set)
        return fake_end(NVML_ERROR_NOT_SUPPORTED);
    memory->total = total->v;
    memory->used = used->v + reserved;
    memory->free = total->v - used->v - reserved;
    return fake_end(NVML_SUCCESS);
}

#ifndef FAKE_NVML_OLD
nvmlReturn_t nvmlDeviceGetMemoryInfo_v2(nvmlDevice_t device, nvmlMemory_v2_t *memory)
{
    struct fake_ctx c;
    nvmlReturn_t r = fake_begin(FC_nvmlDeviceGetMemoryInfo_v2, device, FAKE_MIG_OK, &c);
    if (r == NVML_SUCCESS && !memory)
        r = NVML_ERROR_INVALID_ARGUMENT;
    if (r == NVML_SUCCESS && memory->version != nvmlMemory_v2)
        r = NVML_ERROR_ARGUMENT_VERSION_MISMATCH;
    if (r != NVML_SUCCESS)
        return fake_end(r);
    const struct fake_num *total = c.mig ? &c.mig->mem_total : &c.gpu->mem_total;
    const struct fake_num *used = c.mig ? &c.mig->mem_used : &c.gpu->mem_used;
    unsigned long long reserved = c.mig ? 0 : c.gpu->mem_reserved.v;
    if (!total->set)
        return fake_end(NVML_ERROR_NOT_SUPPORTED);
    memory->total = total->v;
    memory->reserved = reserved;
    memory->used = used->v;
    memory->free = total->v - used->v - reserved;
    return fake_end(NVML_SUCCESS);
}
#endif

nvmlReturn_t nvmlDeviceGetTemperature(nvmlDevice_t device, nvmlTemperatureSensors_t sensorType,
                                      unsigned int *temp)
{
    struct fake_ctx c;
    nvmlReturn_t r = fake_begin(FC_nvmlDeviceGetTemperature, device, 0, &c);
    if (r == NVML_SUCCESS && sensorType != NVML_TEMPERATURE_GPU)
        r = NVML_ERROR_INVALID_ARGUMENT;
    if (r == NVML_SUCCESS)
        r = put_u32(&c.gpu->temperature, temp);
    return fake_end(r);
}

nvmlReturn_t nvmlDeviceGetPowerUsage(nvmlDevice_t device, unsigned int *power)
{
    return get_u32(FC_nvmlDeviceGetPowerUsage, device, offsetof(struct fake_gpu, power_usage_mw),
                   power);
}

nvmlReturn_t nvmlDeviceGetEnforcedPowerLimit(nvmlDevice_t device, unsigned int *limit)
{
    return get_u32(FC_nvmlDeviceGetEnforcedPowerLimit, device,
                   offsetof(struct fake_gpu, power_limit_mw), limit);
}

nvmlReturn_t nvmlDeviceGetTotalEnergyConsumption(nvmlDevice_t device, unsigned long long *energy)
{
    struct fake_ctx c;
    nvmlReturn_t r = fake_begin(FC_nvmlDeviceGetTotalEnergyConsumption, device, 0, &c);
    if (r == NVML_SUCCESS && !energy)
        r = NVML_ERROR_INVALID_ARGUMENT;
    if (r == NVML_SUCCESS && !c.gpu->energy_mj.set)
        r = NVML_ERROR_NOT_SUPPORTED;
    if (r == NVML_SUCCESS) {
        /* A counter that grows with the power drawn since init, as on a real GPU: mW·s = mJ. */
        double drawn = c.gpu->power_usage_mw.set ? (double)c.gpu->power_usage_mw.v * c.now : 0;
        *energy = c.gpu->energy_mj.v + (unsigned long long)drawn;
    }
    return fake_end(r);
}

nvmlReturn_t nvmlDeviceGetClockInfo(nvmlDevice_t device, nvmlClockType_t type, unsigned int *clock)
{
    struct fake_ctx c;
    nvmlReturn_t r = fake_begin(FC_nvmlDeviceGetClockInfo, device, 0, &c);
    if (r == NVML_SUCCESS && (type < 0 || type >= (int)ELEMENTSOF(c.gpu->clocks)))
        r = NVML_ERROR_INVALID_ARGUMENT;
    if (r == NVML_SUCCESS)
        r = put_u32(&c.gpu->clocks[type], clock);
    return fake_end(r);
}

nvmlReturn_t nvmlDeviceGetFanSpeed(nvmlDevice_t device, unsigned int *speed)
{
    return get_u32(FC_nvmlDeviceGetFanSpeed, device, offsetof(struct fake_gpu, fan_speed), speed);
}

nvmlReturn_t nvmlDeviceGetPcieReplayCounter(nvmlDevice_t device, unsigned int *value)
{
    return get_u32(FC_nvmlDeviceGetPcieReplayCounter, device,
                   offsetof(struct fake_gpu, pcie_replay), value);
}

nvmlReturn_t nvmlDeviceGetPcieThroughput(nvmlDevice_t device, nvmlPcieUtilCounter_t counter,
                                         unsigned int *value)
{
    struct fake_ctx c;
    nvmlReturn_t r = fake_begin(FC_nvmlDeviceGetPcieThroughput, device, 0, &c);
    if (r == NVML_SUCCESS && counter != NVML_PCIE_UTIL_TX_BYTES &&
        counter != NVML_PCIE_UTIL_RX_BYTES)
        r = NVML_ERROR_INVALID_ARGUMENT;
    if (r == NVML_SUCCESS)
        r = put_u32(counter == NVML_PCIE_UTIL_TX_BYTES ? &c.gpu->pcie_tx_kbps
                                                       : &c.gpu->pcie_rx_kbps,
                    value);
    return fake_end(r);
}

static nvmlReturn_t get_codec(enum fake_call call, nvmlDevice_t device, size_t offset,
                              unsigned int *utilization, unsigned int *samplingPeriodUs)
{
    struct fake_ctx c;
    nvmlReturn_t r = fake_begin(call, device, 0, &c);
    if (r == NVML_SUCCESS && !samplingPeriodUs)
        r = NVML_ERROR_INVALID_ARGUMENT;
    if (r == NVML_SUCCESS)
        r = put_u32(num_at(c.gpu, offset), utilization);
    if (r == NVML_SUCCESS)
        *samplingPeriodUs = CODEC_SAMPLING_PERIOD_US;
    return fake_end(r);
}

nvmlReturn_t nvmlDeviceGetEncoderUtilization(nvmlDevice_t device, unsigned int *utilization,
                                             unsigned int *samplingPeriodUs)
{
    return get_codec(FC_nvmlDeviceGetEncoderUtilization, device,
                     offsetof(struct fake_gpu, encoder_util), utilization, samplingPeriodUs);
}

nvmlReturn_t nvmlDeviceGetDecoderUtilization(nvmlDevice_t device, unsigned int *utilization,
                                             unsigned int *samplingPeriodUs)
{
    return get_codec(FC_nvmlDeviceGetDecoderUtilization, device,
                     offsetof(struct fake_gpu, decoder_util), utilization, samplingPeriodUs);
}

static nvmlReturn_t get_reasons(enum fake_call call, nvmlDevice_t device,
                                unsigned long long *reasons)
{
    struct fake_ctx c;
    nvmlReturn_t r = fake_begin(call, device, 0, &c);
    if (r == NVML_SUCCESS && !reasons)
        r = NVML_ERROR_INVALID_ARGUMENT;
    if (r == NVML_SUCCESS && !c.gpu->clock_event_reasons.set)
        r = NVML_ERROR_NOT_SUPPORTED;
    if (r == NVML_SUCCESS)
        *reasons = c.gpu->clock_event_reasons.v;
    return fake_end(r);
}

#ifndef FAKE_NVML_OLD
nvmlReturn_t nvmlDeviceGetCurrentClocksEventReasons(nvmlDevice_t device,
                                                    unsigned long long *reasons)
{
    return get_reasons(FC_nvmlDeviceGetCurrentClocksEventReasons, device, reasons);
}
#endif

/* The name NVML had for the same call before driver 535; still exported. */
nvmlReturn_t nvmlDeviceGetCurrentClocksThrottleReasons(nvmlDevice_t device,
                                                       unsigned long long *reasons)
{
    return get_reasons(FC_nvmlDeviceGetCurrentClocksThrottleReasons, device, reasons);
}

nvmlReturn_t nvmlDeviceGetEccMode(nvmlDevice_t device, nvmlEnableState_t *current,
                                  nvmlEnableState_t *pending)
{
    struct fake_ctx c;
    nvmlReturn_t r = fake_begin(FC_nvmlDeviceGetEccMode, device, 0, &c);
    if (r == NVML_SUCCESS && (!current || !pending))
        r = NVML_ERROR_INVALID_ARGUMENT;
    if (r == NVML_SUCCESS && !c.gpu->has_ecc)
        r = NVML_ERROR_NOT_SUPPORTED;
    if (r == NVML_SUCCESS)
        *current = *pending = c.gpu->ecc_enabled ? NVML_FEATURE_ENABLED : NVML_FEATURE_DISABLED;
    return fake_end(r);
}

nvmlReturn_t nvmlDeviceGetTotalEccErrors(nvmlDevice_t device, nvmlMemoryErrorType_t errorType,
                                         nvmlEccCounterType_t counterType,
                                         unsigned long long *eccCounts)
{
    struct fake_ctx c;
    nvmlReturn_t r = fake_begin(FC_nvmlDeviceGetTotalEccErrors, device, 0, &c);
    if (r == NVML_SUCCESS && (!eccCounts || (unsigned)errorType > 1 || (unsigned)counterType > 1))
        r = NVML_ERROR_INVALID_ARGUMENT;
    /* The counters need ECC enabled. */
    if (r == NVML_SUCCESS && (!c.gpu->has_ecc || !c.gpu->ecc_enabled))
        r = NVML_ERROR_NOT_SUPPORTED;
    if (r == NVML_SUCCESS) {
        const struct fake_gpu *g = c.gpu;
        const struct fake_num *n[2][2] = {
            [NVML_MEMORY_ERROR_TYPE_CORRECTED] =
                {[NVML_VOLATILE_ECC] = &g->ecc_sbe_vol, [NVML_AGGREGATE_ECC] = &g->ecc_sbe_agg},
            [NVML_MEMORY_ERROR_TYPE_UNCORRECTED] =
                {[NVML_VOLATILE_ECC] = &g->ecc_dbe_vol, [NVML_AGGREGATE_ECC] = &g->ecc_dbe_agg},
        };
        *eccCounts = n[errorType][counterType]->set ? n[errorType][counterType]->v : 0;
    }
    return fake_end(r);
}

#ifndef FAKE_NVML_OLD
nvmlReturn_t nvmlDeviceGetRemappedRows(nvmlDevice_t device, unsigned int *corrRows,
                                       unsigned int *uncRows, unsigned int *isPending,
                                       unsigned int *failureOccurred)
{
    struct fake_ctx c;
    nvmlReturn_t r = fake_begin(FC_nvmlDeviceGetRemappedRows, device, 0, &c);
    if (r == NVML_SUCCESS && (!corrRows || !uncRows || !isPending || !failureOccurred))
        r = NVML_ERROR_INVALID_ARGUMENT;
    if (r == NVML_SUCCESS && !c.gpu->has_remapped)
        r = NVML_ERROR_NOT_SUPPORTED;
    if (r == NVML_SUCCESS) {
        *corrRows = c.gpu->remap_corr;
        *uncRows = c.gpu->remap_unc;
        *isPending = c.gpu->remap_pending;
        *failureOccurred = c.gpu->remap_failure;
    }
    return fake_end(r);
}

/* An NVLink counter: KiB at the fixture's rate since init, for one link (an even share) or all
 * of them (scopeId UINT_MAX). kind: 0 data tx, 1 data rx, 2 raw tx, 3 raw rx. */
static void nvlink_counter(const struct fake_ctx *c, unsigned kind, nvmlFieldValue_t *v)
{
    const struct fake_gpu *g = c->gpu;
    if (v->scopeId != UINT_MAX && v->scopeId >= NVML_NVLINK_MAX_LINKS) {
        v->nvmlReturn = NVML_ERROR_INVALID_ARGUMENT;
        return;
    }
    if (g->nvlink_links == 0 || (v->scopeId != UINT_MAX && v->scopeId >= g->nvlink_links)) {
        v->nvmlReturn = NVML_ERROR_NOT_SUPPORTED;
        return;
    }
    double kib = (double)g->nvlink_kibps[kind] * c->now;
    if (v->scopeId != UINT_MAX)
        kib /= g->nvlink_links;
    v->valueType = NVML_VALUE_TYPE_UNSIGNED_LONG_LONG;
    v->value.ullVal = (unsigned long long)kib;
    v->nvmlReturn = NVML_SUCCESS;
}

/* One field of nvmlDeviceGetFieldValues(); unknown ids are NOT_SUPPORTED, as a driver answers
 * for fields this GPU lacks. */
static void field_value(const struct fake_ctx *c, nvmlFieldValue_t *v)
{
    const struct fake_gpu *g = c->gpu;
    v->nvmlReturn = NVML_ERROR_NOT_SUPPORTED;
    switch (v->fieldId) {
    case NVML_FI_DEV_MEMORY_TEMP:
        if (g->memory_temperature.set) {
            v->valueType = NVML_VALUE_TYPE_UNSIGNED_INT;
            v->value.uiVal = (unsigned int)g->memory_temperature.v;
            v->nvmlReturn = NVML_SUCCESS;
        }
        break;
    case NVML_FI_DEV_NVLINK_LINK_COUNT:
        if (g->nvlink_links > 0) {
            v->valueType = NVML_VALUE_TYPE_UNSIGNED_INT;
            v->value.uiVal = g->nvlink_links;
            v->nvmlReturn = NVML_SUCCESS;
        }
        break;
    case NVML_FI_DEV_NVLINK_THROUGHPUT_DATA_TX:
    case NVML_FI_DEV_NVLINK_THROUGHPUT_DATA_RX:
    case NVML_FI_DEV_NVLINK_THROUGHPUT_RAW_TX:
    case NVML_FI_DEV_NVLINK_THROUGHPUT_RAW_RX:
        nvlink_counter(c, v->fieldId - NVML_FI_DEV_NVLINK_THROUGHPUT_DATA_TX, v);
        break;
    }
}

nvmlReturn_t nvmlDeviceGetFieldValues(nvmlDevice_t device, int valuesCount,
                                      nvmlFieldValue_t *values)
{
    struct fake_ctx c;
    struct timespec now;
    nvmlReturn_t r = fake_begin(FC_nvmlDeviceGetFieldValues, device, 0, &c);
    if (r == NVML_SUCCESS && (!values || valuesCount < 0))
        r = NVML_ERROR_INVALID_ARGUMENT;
    if (r != NVML_SUCCESS)
        return fake_end(r);
    clock_gettime(CLOCK_REALTIME, &now);
    for (int i = 0; i < valuesCount; i++) {
        nvmlFieldValue_t *v = &values[i];
        v->timestamp = now.tv_sec * 1000000LL + now.tv_nsec / 1000;
        v->latencyUsec = 0;
        /* Per field: the call succeeds, each value says whether it could be read. */
        field_value(&c, v);
    }
    return fake_end(NVML_SUCCESS);
}

static bool proc_matches(const struct fake_proc *p, bool graphics, const struct fake_ctx *c)
{
    if (graphics ? !p->graphics : !p->compute)
        return false;
    /* A MIG device sees only the processes of its own instance; the parent sees all. */
    return !c->mig || (p->gi == c->mig->gi && p->ci == c->mig->ci);
}

static nvmlReturn_t get_processes(enum fake_call call, bool graphics, nvmlDevice_t device,
                                  unsigned int *infoCount, nvmlProcessInfo_t *infos)
{
    struct fake_ctx c;
    nvmlReturn_t r = fake_begin(call, device, FAKE_MIG_OK, &c);
    if (r == NVML_SUCCESS && (!infoCount || (!infos && *infoCount > 0)))
        r = NVML_ERROR_INVALID_ARGUMENT;
    if (r != NVML_SUCCESS)
        return fake_end(r);
    unsigned n = 0;
    for (size_t i = 0; i < c.gpu->n_procs; i++)
        n += proc_matches(&c.gpu->procs[i], graphics, &c);
    /* NVML's protocol: too small a buffer gets the needed count back; *infoCount 0 with infos
     * NULL is how callers ask for it. */
    if (n > *infoCount) {
        *infoCount = n;
        return fake_end(NVML_ERROR_INSUFFICIENT_SIZE);
    }
    unsigned k = 0;
    for (size_t i = 0; i < c.gpu->n_procs; i++) {
        const struct fake_proc *p = &c.gpu->procs[i];
        if (!proc_matches(p, graphics, &c))
            continue;
        infos[k++] = (nvmlProcessInfo_t){.pid = p->pid,
                                         .usedGpuMemory = p->used_memory,
                                         .gpuInstanceId = p->gi,
                                         .computeInstanceId = p->ci};
    }
    *infoCount = n;
    return fake_end(NVML_SUCCESS);
}

nvmlReturn_t nvmlDeviceGetComputeRunningProcesses_v3(nvmlDevice_t device, unsigned int *infoCount,
                                                     nvmlProcessInfo_t *infos)
{
    return get_processes(FC_nvmlDeviceGetComputeRunningProcesses_v3, false, device, infoCount,
                         infos);
}

nvmlReturn_t nvmlDeviceGetGraphicsRunningProcesses_v3(nvmlDevice_t device, unsigned int *infoCount,
                                                      nvmlProcessInfo_t *infos)
{
    return get_processes(FC_nvmlDeviceGetGraphicsRunningProcesses_v3, true, device, infoCount,
                         infos);
}
#endif

/* Much older than the calls the old variant lacks, so it has this one. */
nvmlReturn_t nvmlDeviceGetVirtualizationMode(nvmlDevice_t device,
                                             nvmlGpuVirtualizationMode_t *pVirtualMode)
{
    struct fake_ctx c;
    nvmlReturn_t r = fake_begin(FC_nvmlDeviceGetVirtualizationMode, device, 0, &c);
    if (r == NVML_SUCCESS && !pVirtualMode)
        r = NVML_ERROR_INVALID_ARGUMENT;
    if (r == NVML_SUCCESS && !c.gpu->virt_mode.set)
        r = NVML_ERROR_NOT_SUPPORTED;
    if (r == NVML_SUCCESS)
        *pVirtualMode = (nvmlGpuVirtualizationMode_t)c.gpu->virt_mode.v;
    return fake_end(r);
}
