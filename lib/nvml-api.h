/* Our own declarations of the part of NVIDIA's NVML C API that gpunode uses.
 *
 * Debian ships no NVML header, and the library is only present where a driver is installed, so
 * nothing links against it: lib/nvml.c loads libnvidia-ml.so.1 with dlopen() and looks each
 * symbol up on its own. The types, constants and prototypes below follow NVIDIA's documented
 * API (nvml.h of driver 5xx); only the members gpunode reads are named, but every struct keeps
 * the documented layout since the library writes into it.
 *
 * NVML_API_FUNCTIONS is the one list of the entry points: the loader builds its function table
 * from it, and the fake library of the tests (tests/fake-nvml) checks its definitions
 * against it, so the two cannot drift apart. */
#pragma once

#include <stdint.h>

typedef int nvmlReturn_t;
enum {
    NVML_SUCCESS = 0,
    NVML_ERROR_UNINITIALIZED = 1,
    NVML_ERROR_INVALID_ARGUMENT = 2,
    NVML_ERROR_NOT_SUPPORTED = 3,
    NVML_ERROR_NO_PERMISSION = 4,
    NVML_ERROR_ALREADY_INITIALIZED = 5,
    NVML_ERROR_NOT_FOUND = 6,
    NVML_ERROR_INSUFFICIENT_SIZE = 7,
    NVML_ERROR_INSUFFICIENT_POWER = 8,
    NVML_ERROR_DRIVER_NOT_LOADED = 9,
    NVML_ERROR_TIMEOUT = 10,
    NVML_ERROR_IRQ_ISSUE = 11,
    NVML_ERROR_LIBRARY_NOT_FOUND = 12,
    NVML_ERROR_FUNCTION_NOT_FOUND = 13,
    NVML_ERROR_CORRUPTED_INFOROM = 14,
    NVML_ERROR_GPU_IS_LOST = 15,
    NVML_ERROR_RESET_REQUIRED = 16,
    NVML_ERROR_OPERATING_SYSTEM = 17,
    NVML_ERROR_LIB_RM_VERSION_MISMATCH = 18,
    NVML_ERROR_IN_USE = 19,
    NVML_ERROR_MEMORY = 20,
    NVML_ERROR_NO_DATA = 21,
    NVML_ERROR_VGPU_ECC_NOT_ENABLED = 22,
    NVML_ERROR_INSUFFICIENT_RESOURCES = 23,
    NVML_ERROR_FREQ_NOT_SUPPORTED = 24,
    NVML_ERROR_ARGUMENT_VERSION_MISMATCH = 25,
    NVML_ERROR_DEPRECATED = 26,
    NVML_ERROR_NOT_READY = 27,
    NVML_ERROR_GPU_NOT_FOUND = 28,
    NVML_ERROR_INVALID_STATE = 29,
    NVML_ERROR_UNKNOWN = 999,
};

typedef struct nvmlDevice_st *nvmlDevice_t;
typedef struct nvmlEventSet_st *nvmlEventSet_t;
typedef struct nvmlGpuInstance_st *nvmlGpuInstance_t;

/* Buffer sizes NVML documents as large enough. */
#define NVML_DEVICE_UUID_V2_BUFFER_SIZE        96
#define NVML_DEVICE_NAME_V2_BUFFER_SIZE        96
#define NVML_SYSTEM_DRIVER_VERSION_BUFFER_SIZE 80
#define NVML_DEVICE_PCI_BUS_ID_BUFFER_SIZE     32

/* Enumerations passed by value (C enums, int-sized). */
typedef int nvmlTemperatureSensors_t;
#define NVML_TEMPERATURE_GPU 0
typedef int nvmlClockType_t;
#define NVML_CLOCK_GRAPHICS 0
#define NVML_CLOCK_SM       1
#define NVML_CLOCK_MEM      2
#define NVML_CLOCK_VIDEO    3
typedef int nvmlPcieUtilCounter_t;
#define NVML_PCIE_UTIL_TX_BYTES 0
#define NVML_PCIE_UTIL_RX_BYTES 1
typedef int nvmlEnableState_t;
#define NVML_FEATURE_DISABLED 0
#define NVML_FEATURE_ENABLED  1
typedef int nvmlMemoryErrorType_t;
#define NVML_MEMORY_ERROR_TYPE_CORRECTED   0
#define NVML_MEMORY_ERROR_TYPE_UNCORRECTED 1
typedef int nvmlEccCounterType_t;
#define NVML_VOLATILE_ECC  0
#define NVML_AGGREGATE_ECC 1
typedef int nvmlValueType_t;
#define NVML_VALUE_TYPE_DOUBLE             0
#define NVML_VALUE_TYPE_UNSIGNED_INT       1
#define NVML_VALUE_TYPE_UNSIGNED_LONG      2
#define NVML_VALUE_TYPE_UNSIGNED_LONG_LONG 3
#define NVML_VALUE_TYPE_SIGNED_LONG_LONG   4
#define NVML_VALUE_TYPE_SIGNED_INT         5
#define NVML_VALUE_TYPE_UNSIGNED_SHORT     6

/* nvmlDeviceGetMigMode() */
#define NVML_DEVICE_MIG_DISABLE 0
#define NVML_DEVICE_MIG_ENABLE  1

/* Field ids for nvmlDeviceGetFieldValues(). */
#define NVML_FI_DEV_MEMORY_TEMP 82
/* Number of NVLinks the GPU has (uiVal). */
#define NVML_FI_DEV_NVLINK_LINK_COUNT 91
/* NVLink traffic counters, cumulative KiB since the driver loaded (ullVal): "data" is payload,
 * "raw" payload plus protocol overhead. They count per link: scopeId is the link (0 ..
 * NVML_NVLINK_MAX_LINKS - 1), and a scopeId of UINT_MAX asks for the sum over all links. (The
 * older NVML_FI_DEV_NVLINK_BANDWIDTH_C0/C1_* fields, 60..73, need counters set up with
 * nvmlDeviceSetNvLinkUtilizationControl and are deprecated.) */
#define NVML_FI_DEV_NVLINK_THROUGHPUT_DATA_TX 138
#define NVML_FI_DEV_NVLINK_THROUGHPUT_DATA_RX 139
#define NVML_FI_DEV_NVLINK_THROUGHPUT_RAW_TX  140
#define NVML_FI_DEV_NVLINK_THROUGHPUT_RAW_RX  141
#define NVML_NVLINK_MAX_LINKS                 18

/* nvmlDeviceGetVirtualizationMode(): how the GPU is virtualised. Bare metal is NONE; a vGPU
 * guest sees VGPU (and needs a licence), a hypervisor host HOST_VGPU or HOST_VSGA. */
typedef int nvmlGpuVirtualizationMode_t;
#define NVML_GPU_VIRTUALIZATION_MODE_NONE        0
#define NVML_GPU_VIRTUALIZATION_MODE_PASSTHROUGH 1
#define NVML_GPU_VIRTUALIZATION_MODE_VGPU        2
#define NVML_GPU_VIRTUALIZATION_MODE_HOST_VGPU   3
#define NVML_GPU_VIRTUALIZATION_MODE_HOST_VSGA   4

/* Event types (bit mask) for nvmlDeviceRegisterEvents(). */
#define nvmlEventTypeSingleBitEccError 0x0000000000000001ULL
#define nvmlEventTypeDoubleBitEccError 0x0000000000000002ULL
#define nvmlEventTypePState            0x0000000000000004ULL
#define nvmlEventTypeXidCriticalError  0x0000000000000008ULL
#define nvmlEventTypeClock             0x0000000000000010ULL
#define nvmlEventMigConfigChange       0x0000000000000100ULL

/* Clock event ("throttle") reasons, a bit mask. */
#define nvmlClocksEventReasonGpuIdle                   0x0000000000000001ULL
#define nvmlClocksEventReasonApplicationsClocksSetting 0x0000000000000002ULL
#define nvmlClocksEventReasonSwPowerCap                0x0000000000000004ULL
#define nvmlClocksThrottleReasonHwSlowdown             0x0000000000000008ULL
#define nvmlClocksEventReasonSyncBoost                 0x0000000000000010ULL
#define nvmlClocksEventReasonSwThermalSlowdown         0x0000000000000020ULL
#define nvmlClocksThrottleReasonHwThermalSlowdown      0x0000000000000040ULL
#define nvmlClocksThrottleReasonHwPowerBrakeSlowdown   0x0000000000000080ULL
#define nvmlClocksEventReasonDisplayClockSetting       0x0000000000000100ULL

/* Id NVML reports for "not in a MIG instance" (processes, events). */
#define NVML_INSTANCE_ID_NONE 0xFFFFFFFFu

typedef struct nvmlPciInfo_st {
    char busIdLegacy[16];
    unsigned int domain;
    unsigned int bus;
    unsigned int device;
    unsigned int pciDeviceId;
    unsigned int pciSubSystemId;
    char busId[NVML_DEVICE_PCI_BUS_ID_BUFFER_SIZE]; /* "00000000:07:00.0" */
} nvmlPciInfo_t;

typedef struct nvmlUtilization_st {
    unsigned int gpu;
    unsigned int memory;
} nvmlUtilization_t;

typedef struct nvmlMemory_st {
    unsigned long long total; /* bytes */
    unsigned long long free;
    unsigned long long used;
} nvmlMemory_t;

/* Version 2 tells the driver's own reservation apart: used is what applications hold, as
 * nvidia-smi reports it (version 1 counts the reservation as used). */
typedef struct nvmlMemory_v2_st {
    unsigned int version; /* nvmlMemory_v2, set by the caller */
    unsigned long long total;
    unsigned long long reserved;
    unsigned long long free;
    unsigned long long used;
} nvmlMemory_v2_t;
#define nvmlMemory_v2 ((unsigned int)(sizeof(nvmlMemory_v2_t) | (2u << 24)))

/* What the _v2/_v3 process queries fill in. */
typedef struct nvmlProcessInfo_st {
    unsigned int pid;
    unsigned long long usedGpuMemory; /* bytes; NVML_VALUE_NOT_AVAILABLE when unknown */
    unsigned int gpuInstanceId;       /* NVML_INSTANCE_ID_NONE without MIG */
    unsigned int computeInstanceId;
} nvmlProcessInfo_t;
#define NVML_VALUE_NOT_AVAILABLE 0xFFFFFFFFFFFFFFFFULL

typedef union nvmlValue_st {
    double dVal;
    int siVal;
    unsigned int uiVal;
    unsigned long ulVal;
    unsigned long long ullVal;
    signed long long sllVal;
    unsigned short usVal;
} nvmlValue_t;

typedef struct nvmlFieldValue_st {
    unsigned int fieldId; /* set by the caller */
    unsigned int scopeId; /* set by the caller (0) */
    long long timestamp;  /* µs since 1970 */
    long long latencyUsec;
    nvmlValueType_t valueType;
    nvmlReturn_t nvmlReturn; /* per field: read value only on NVML_SUCCESS */
    nvmlValue_t value;
} nvmlFieldValue_t;

typedef struct nvmlEventData_st {
    nvmlDevice_t device;
    unsigned long long eventType;
    unsigned long long eventData; /* the XID for nvmlEventTypeXidCriticalError */
    unsigned int gpuInstanceId;   /* NVML_INSTANCE_ID_NONE if not attributable */
    unsigned int computeInstanceId;
} nvmlEventData_t;

typedef struct nvmlGpuInstancePlacement_st {
    unsigned int start;
    unsigned int size;
} nvmlGpuInstancePlacement_t;

typedef struct nvmlGpuInstanceInfo_st {
    nvmlDevice_t device;
    unsigned int id;
    unsigned int profileId;
    nvmlGpuInstancePlacement_t placement;
} nvmlGpuInstanceInfo_t;

typedef struct nvmlGpuInstanceProfileInfo_v2_st {
    unsigned int version; /* nvmlGpuInstanceProfileInfo_v2, set by the caller */
    unsigned int id;
    unsigned int isP2pSupported;
    unsigned int sliceCount;
    unsigned int instanceCount;
    unsigned int multiprocessorCount;
    unsigned int copyEngineCount;
    unsigned int decoderCount;
    unsigned int encoderCount;
    unsigned int jpegCount;
    unsigned int ofaCount;
    unsigned long long memorySizeMB;
    char name[NVML_DEVICE_NAME_V2_BUFFER_SIZE]; /* "MIG 1g.10gb" */
} nvmlGpuInstanceProfileInfo_v2_t;
#define nvmlGpuInstanceProfileInfo_v2                                                              \
    ((unsigned int)(sizeof(nvmlGpuInstanceProfileInfo_v2_t) | (2u << 24)))
/* Profile indexes are small; NVML returns INVALID_ARGUMENT past the last one. */
#define NVML_GPU_INSTANCE_PROFILE_MAX_INDEX 32

typedef struct nvmlDeviceAttributes_st {
    unsigned int multiprocessorCount;
    unsigned int sharedCopyEngineCount;
    unsigned int sharedDecoderCount;
    unsigned int sharedEncoderCount;
    unsigned int sharedJpegCount;
    unsigned int sharedOfaCount;
    unsigned int gpuInstanceSliceCount;
    unsigned int computeInstanceSliceCount;
    unsigned long long memorySizeMB;
} nvmlDeviceAttributes_t;

/* GPU Performance Monitoring (GPM, Hopper and newer): the driver fills opaque sample buffers, and
 * nvmlGpmMetricsGet() computes metrics over the interval between two samples of the same GPU (or
 * MIG GPU instance). NVIDIA notes the samples should be more than 100 ms apart. */
typedef struct nvmlGpmSample_st *nvmlGpmSample_t;

/* Metric ids (nvmlGpmMetricId_t). Utilisations are percent, 0.0 to 100.0; the PCIe and NVLink
 * rates are MiB per second. Ids not listed here are either unused (8, 14..19, ...) or not used
 * by gpunode (NVDEC/NVJPG/OFA engines, per-link NVLink, newer cycle counters). */
#define NVML_GPM_METRIC_GRAPHICS_UTIL           1  /* time any graphics/compute engine was busy */
#define NVML_GPM_METRIC_SM_UTIL                 2  /* SMs busy */
#define NVML_GPM_METRIC_SM_OCCUPANCY            3  /* warps resident vs. the maximum */
#define NVML_GPM_METRIC_INTEGER_UTIL            4  /* SM time in integer instructions */
#define NVML_GPM_METRIC_ANY_TENSOR_UTIL         5  /* SM time in any tensor instruction */
#define NVML_GPM_METRIC_DFMA_TENSOR_UTIL        6  /* FP64 tensor */
#define NVML_GPM_METRIC_HMMA_TENSOR_UTIL        7  /* FP16/BF16 tensor */
#define NVML_GPM_METRIC_IMMA_TENSOR_UTIL        9  /* integer tensor */
#define NVML_GPM_METRIC_DRAM_BW_UTIL            10 /* DRAM bandwidth vs. the theoretical maximum */
#define NVML_GPM_METRIC_FP64_UTIL               11 /* non-tensor FP64 */
#define NVML_GPM_METRIC_FP32_UTIL               12 /* non-tensor FP32 */
#define NVML_GPM_METRIC_FP16_UTIL               13 /* non-tensor FP16 */
#define NVML_GPM_METRIC_PCIE_TX_PER_SEC         20 /* MiB/s from the GPU */
#define NVML_GPM_METRIC_PCIE_RX_PER_SEC         21 /* MiB/s to the GPU */
#define NVML_GPM_METRIC_NVDEC_0_UTIL            30 /* .. 37: one per decoder */
#define NVML_GPM_METRIC_NVJPG_0_UTIL            40 /* .. 47: one per JPEG engine */
#define NVML_GPM_METRIC_NVOFA_0_UTIL            50
#define NVML_GPM_METRIC_NVLINK_TOTAL_RX_PER_SEC 60 /* MiB/s read over all links */
#define NVML_GPM_METRIC_NVLINK_TOTAL_TX_PER_SEC 61 /* MiB/s written over all links */
#define NVML_GPM_METRIC_NVLINK_L0_RX_PER_SEC    62 /* then TX, and so on: 62 + 2 * link (+ 1) */
/* One above the highest id: 98 in the first headers with GPM (CUDA 12.0), 333 in later ones
 * (CUDA 13). It sizes the metrics array only: the driver reads and writes numMetrics entries,
 * and the struct version stayed 1, so the larger size serves old and new drivers alike. */
#define NVML_GPM_METRIC_MAX 333

typedef struct nvmlGpmMetric_st {
    unsigned int metricId;   /* NVML_GPM_METRIC_*, set by the caller */
    nvmlReturn_t nvmlReturn; /* per metric: value is valid only on NVML_SUCCESS */
    double value;
    struct {
        char *shortName; /* owned by NVML; may be NULL */
        char *longName;
        char *unit;
    } metricInfo;
} nvmlGpmMetric_t;

typedef struct nvmlGpmMetricsGet_st {
    unsigned int version;    /* NVML_GPM_METRICS_GET_VERSION, set by the caller */
    unsigned int numMetrics; /* entries of metrics[] to compute */
    nvmlGpmSample_t sample1; /* the earlier sample */
    nvmlGpmSample_t sample2; /* the later one */
    nvmlGpmMetric_t metrics[NVML_GPM_METRIC_MAX];
} nvmlGpmMetricsGet_t;
#define NVML_GPM_METRICS_GET_VERSION 1

typedef struct nvmlGpmSupport_st {
    unsigned int version;           /* NVML_GPM_SUPPORT_VERSION, set by the caller */
    unsigned int isSupportedDevice; /* 0 or 1 */
} nvmlGpmSupport_t;
#define NVML_GPM_SUPPORT_VERSION 1

/* X(name, return type, parameter list): every entry point gpunode may call. The first five are
 * required (the loader refuses a library without them); all others are optional and a NULL
 * pointer in the table means "this driver does not have it", which costs only what depends on
 * it. The versioned names (_v2, _v3) are the ones NVIDIA's header maps the plain names to. */
#define NVML_API_REQUIRED(X)                                                                       \
    X(nvmlInit_v2, nvmlReturn_t, (void))                                                           \
    X(nvmlShutdown, nvmlReturn_t, (void))                                                          \
    X(nvmlErrorString, const char *, (nvmlReturn_t result))                                        \
    X(nvmlDeviceGetCount_v2, nvmlReturn_t, (unsigned int *deviceCount))                            \
    X(nvmlDeviceGetHandleByIndex_v2, nvmlReturn_t, (unsigned int index, nvmlDevice_t *device))

#define NVML_API_OPTIONAL(X)                                                                       \
    X(nvmlSystemGetDriverVersion, nvmlReturn_t, (char *version, unsigned int length))              \
    X(nvmlSystemGetCudaDriverVersion_v2, nvmlReturn_t, (int *cudaDriverVersion))                   \
    X(nvmlDeviceGetIndex, nvmlReturn_t, (nvmlDevice_t device, unsigned int *index))                \
    X(nvmlDeviceGetName, nvmlReturn_t, (nvmlDevice_t device, char *name, unsigned int length))     \
    X(nvmlDeviceGetUUID, nvmlReturn_t, (nvmlDevice_t device, char *uuid, unsigned int length))     \
    X(nvmlDeviceGetPciInfo_v3, nvmlReturn_t, (nvmlDevice_t device, nvmlPciInfo_t * pci))           \
    X(nvmlDeviceGetMinorNumber, nvmlReturn_t, (nvmlDevice_t device, unsigned int *minorNumber))    \
    X(nvmlDeviceGetCudaComputeCapability, nvmlReturn_t,                                            \
      (nvmlDevice_t device, int *major, int *minor))                                               \
    X(nvmlDeviceGetUtilizationRates, nvmlReturn_t,                                                 \
      (nvmlDevice_t device, nvmlUtilization_t * utilization))                                      \
    X(nvmlDeviceGetMemoryInfo, nvmlReturn_t, (nvmlDevice_t device, nvmlMemory_t * memory))         \
    X(nvmlDeviceGetMemoryInfo_v2, nvmlReturn_t, (nvmlDevice_t device, nvmlMemory_v2_t * memory))   \
    X(nvmlDeviceGetTemperature, nvmlReturn_t,                                                      \
      (nvmlDevice_t device, nvmlTemperatureSensors_t sensorType, unsigned int *temp))              \
    X(nvmlDeviceGetPowerUsage, nvmlReturn_t, (nvmlDevice_t device, unsigned int *power))           \
    X(nvmlDeviceGetEnforcedPowerLimit, nvmlReturn_t, (nvmlDevice_t device, unsigned int *limit))   \
    X(nvmlDeviceGetTotalEnergyConsumption, nvmlReturn_t,                                           \
      (nvmlDevice_t device, unsigned long long *energy))                                           \
    X(nvmlDeviceGetClockInfo, nvmlReturn_t,                                                        \
      (nvmlDevice_t device, nvmlClockType_t type, unsigned int *clock))                            \
    X(nvmlDeviceGetFanSpeed, nvmlReturn_t, (nvmlDevice_t device, unsigned int *speed))             \
    X(nvmlDeviceGetPcieReplayCounter, nvmlReturn_t, (nvmlDevice_t device, unsigned int *value))    \
    X(nvmlDeviceGetPcieThroughput, nvmlReturn_t,                                                   \
      (nvmlDevice_t device, nvmlPcieUtilCounter_t counter, unsigned int *value))                   \
    X(nvmlDeviceGetEncoderUtilization, nvmlReturn_t,                                               \
      (nvmlDevice_t device, unsigned int *utilization, unsigned int *samplingPeriodUs))            \
    X(nvmlDeviceGetDecoderUtilization, nvmlReturn_t,                                               \
      (nvmlDevice_t device, unsigned int *utilization, unsigned int *samplingPeriodUs))            \
    X(nvmlDeviceGetCurrentClocksEventReasons, nvmlReturn_t,                                        \
      (nvmlDevice_t device, unsigned long long *reasons))                                          \
    X(nvmlDeviceGetCurrentClocksThrottleReasons, nvmlReturn_t,                                     \
      (nvmlDevice_t device, unsigned long long *reasons))                                          \
    X(nvmlDeviceGetEccMode, nvmlReturn_t,                                                          \
      (nvmlDevice_t device, nvmlEnableState_t * current, nvmlEnableState_t * pending))             \
    X(nvmlDeviceGetTotalEccErrors, nvmlReturn_t,                                                   \
      (nvmlDevice_t device, nvmlMemoryErrorType_t errorType, nvmlEccCounterType_t counterType,     \
       unsigned long long *eccCounts))                                                             \
    X(nvmlDeviceGetRemappedRows, nvmlReturn_t,                                                     \
      (nvmlDevice_t device, unsigned int *corrRows, unsigned int *uncRows,                         \
       unsigned int *isPending, unsigned int *failureOccurred))                                    \
    X(nvmlDeviceGetFieldValues, nvmlReturn_t,                                                      \
      (nvmlDevice_t device, int valuesCount, nvmlFieldValue_t *values))                            \
    X(nvmlDeviceGetComputeRunningProcesses_v3, nvmlReturn_t,                                       \
      (nvmlDevice_t device, unsigned int *infoCount, nvmlProcessInfo_t *infos))                    \
    X(nvmlDeviceGetGraphicsRunningProcesses_v3, nvmlReturn_t,                                      \
      (nvmlDevice_t device, unsigned int *infoCount, nvmlProcessInfo_t *infos))                    \
    X(nvmlDeviceGetMigMode, nvmlReturn_t,                                                          \
      (nvmlDevice_t device, unsigned int *currentMode, unsigned int *pendingMode))                 \
    X(nvmlDeviceGetMaxMigDeviceCount, nvmlReturn_t, (nvmlDevice_t device, unsigned int *count))    \
    X(nvmlDeviceGetMigDeviceHandleByIndex, nvmlReturn_t,                                           \
      (nvmlDevice_t device, unsigned int index, nvmlDevice_t *migDevice))                          \
    X(nvmlDeviceGetGpuInstanceId, nvmlReturn_t, (nvmlDevice_t device, unsigned int *id))           \
    X(nvmlDeviceGetComputeInstanceId, nvmlReturn_t, (nvmlDevice_t device, unsigned int *id))       \
    X(nvmlDeviceGetGpuInstanceById, nvmlReturn_t,                                                  \
      (nvmlDevice_t device, unsigned int id, nvmlGpuInstance_t *gpuInstance))                      \
    X(nvmlGpuInstanceGetInfo, nvmlReturn_t,                                                        \
      (nvmlGpuInstance_t gpuInstance, nvmlGpuInstanceInfo_t * info))                               \
    X(nvmlDeviceGetGpuInstanceProfileInfoV, nvmlReturn_t,                                          \
      (nvmlDevice_t device, unsigned int profile, nvmlGpuInstanceProfileInfo_v2_t *info))          \
    X(nvmlDeviceGetAttributes_v2, nvmlReturn_t,                                                    \
      (nvmlDevice_t device, nvmlDeviceAttributes_t * attributes))                                  \
    X(nvmlDeviceGetSupportedEventTypes, nvmlReturn_t,                                              \
      (nvmlDevice_t device, unsigned long long *eventTypes))                                       \
    X(nvmlEventSetCreate, nvmlReturn_t, (nvmlEventSet_t * set))                                    \
    X(nvmlDeviceRegisterEvents, nvmlReturn_t,                                                      \
      (nvmlDevice_t device, unsigned long long eventTypes, nvmlEventSet_t set))                    \
    X(nvmlEventSetWait_v2, nvmlReturn_t,                                                           \
      (nvmlEventSet_t set, nvmlEventData_t * data, unsigned int timeoutms))                        \
    X(nvmlEventSetFree, nvmlReturn_t, (nvmlEventSet_t set))                                        \
    X(nvmlDeviceGetVirtualizationMode, nvmlReturn_t,                                               \
      (nvmlDevice_t device, nvmlGpuVirtualizationMode_t * pVirtualMode))                           \
    X(nvmlGpmQueryDeviceSupport, nvmlReturn_t,                                                     \
      (nvmlDevice_t device, nvmlGpmSupport_t * gpmSupport))                                        \
    X(nvmlGpmSampleAlloc, nvmlReturn_t, (nvmlGpmSample_t * gpmSample))                             \
    X(nvmlGpmSampleFree, nvmlReturn_t, (nvmlGpmSample_t gpmSample))                                \
    X(nvmlGpmSampleGet, nvmlReturn_t, (nvmlDevice_t device, nvmlGpmSample_t gpmSample))            \
    X(nvmlGpmMigSampleGet, nvmlReturn_t,                                                           \
      (nvmlDevice_t device, unsigned int gpuInstanceId, nvmlGpmSample_t gpmSample))                \
    X(nvmlGpmMetricsGet, nvmlReturn_t, (nvmlGpmMetricsGet_t * metricsGet))

#define NVML_API_FUNCTIONS(X) NVML_API_REQUIRED(X) NVML_API_OPTIONAL(X)

/* The function table lib/nvml.c fills from the loaded library. */
struct nvml_api {
#define NVML_API_MEMBER(name, ret, params) ret(*name) params;
    NVML_API_FUNCTIONS(NVML_API_MEMBER)
#undef NVML_API_MEMBER
};
