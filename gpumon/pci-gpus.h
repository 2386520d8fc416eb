/* The GPUs the kernel has bound to the nvidia driver, from sysfs, as a set of PCI addresses.
 *
 * NVML enumerates GPUs once per init, so its own count never changes while it is open; the
 * kernel's set does (a GPU hot-plugged, back after a reset, or handed to vfio-pci). gpumon
 * re-opens NVML when this set changes, not when its size differs from NVML's count: a container
 * given a subset of the GPUs, or GPUs excluded from NVML (NVreg_ExcludedGpus), keep the two
 * apart for good. */
#pragma once

#include <stdbool.h>
#include <stdint.h>

#define PCI_GPUS_MAX 256

struct pci_gpus {
    unsigned n;
    uint64_t addr[PCI_GPUS_MAX]; /* pci_address_parse() values, ascending */
};

/* Parses a PCI address as sysfs ("0000:3b:00.0") or NVML ("00000000:3B:00.0") writes it, into
 * one comparable number. Returns 0, or -EINVAL for anything else. */
int pci_address_parse(const char *s, uint64_t *ret);

/* Reads the display-class devices (class 0x03xxxx: NVSwitches are bound too, but are no GPUs)
 * under <sysfs_root>/bus/pci/drivers/nvidia/. Returns 0 and fills *ret (at most PCI_GPUS_MAX),
 * or -errno: -ENOENT when there is no such directory (no driver, or no sysfs here). */
int pci_gpus_read(const char *sysfs_root, struct pci_gpus *ret);

bool pci_gpus_equal(const struct pci_gpus *a, const struct pci_gpus *b);

/* Whether the set holds the device at bus_id (either form above); false for a bad bus_id. */
bool pci_gpus_has(const struct pci_gpus *set, const char *bus_id);
