/* NVIDIA's texts for NVML's return codes, as nvmlErrorString() gives them: for lib/nvml.c when
 * no library is loaded, and for the fake library of the tests, so that messages read the same
 * as on a real node. */
#pragma once

#include "lib/nvml-api.h"

/* The text for r; "Unknown Error" for codes without one. Never NULL. */
static inline const char *nvml_api_error_text(nvmlReturn_t r)
{
    static const char *const texts[] = {
        [NVML_SUCCESS] = "Success",
        [NVML_ERROR_UNINITIALIZED] = "Uninitialized",
        [NVML_ERROR_INVALID_ARGUMENT] = "Invalid Argument",
        [NVML_ERROR_NOT_SUPPORTED] = "Not Supported",
        [NVML_ERROR_NO_PERMISSION] = "Insufficient Permissions",
        [NVML_ERROR_ALREADY_INITIALIZED] = "Already Initialized",
        [NVML_ERROR_NOT_FOUND] = "Not Found",
        [NVML_ERROR_INSUFFICIENT_SIZE] = "Insufficient Size",
        [NVML_ERROR_INSUFFICIENT_POWER] = "Insufficient External Power",
        [NVML_ERROR_DRIVER_NOT_LOADED] = "Driver Not Loaded",
        [NVML_ERROR_TIMEOUT] = "Timeout",
        [NVML_ERROR_IRQ_ISSUE] = "Interrupt request issue",
        [NVML_ERROR_LIBRARY_NOT_FOUND] = "NVML Shared Library Not Found",
        [NVML_ERROR_FUNCTION_NOT_FOUND] = "Function Not Found",
        [NVML_ERROR_CORRUPTED_INFOROM] = "Corrupted infoROM",
        [NVML_ERROR_GPU_IS_LOST] = "GPU is lost",
        [NVML_ERROR_RESET_REQUIRED] = "GPU requires restart",
        [NVML_ERROR_OPERATING_SYSTEM] = "The operating system has blocked the request.",
        [NVML_ERROR_LIB_RM_VERSION_MISMATCH] = "RM has detected an NVML/RM version mismatch.",
        [NVML_ERROR_IN_USE] = "In use by another client",
        [NVML_ERROR_MEMORY] = "Insufficient Memory",
        [NVML_ERROR_NO_DATA] = "No data",
        /* One text, split for the line length: the parentheses say so to the compiler. */
        [NVML_ERROR_VGPU_ECC_NOT_ENABLED] = ("The requested vgpu operation is not available on "
                                             "target device, because ECC is enabled"),
        [NVML_ERROR_INSUFFICIENT_RESOURCES] = "Insufficient resources for request",
        [NVML_ERROR_FREQ_NOT_SUPPORTED] = "Frequency not supported",
        [NVML_ERROR_ARGUMENT_VERSION_MISMATCH] = "Argument version mismatch",
        [NVML_ERROR_DEPRECATED] = "Deprecated",
        [NVML_ERROR_NOT_READY] = "Not Ready",
        [NVML_ERROR_GPU_NOT_FOUND] = "GPU not found",
        [NVML_ERROR_INVALID_STATE] = "Invalid state",
    };
    if (r >= 0 && (size_t)r < sizeof(texts) / sizeof(texts[0]) && texts[r])
        return texts[r];
    return "Unknown Error";
}
