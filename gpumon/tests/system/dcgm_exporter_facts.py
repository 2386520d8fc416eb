"""What NVIDIA's dcgm-exporter (4.x) publishes, as facts for gpumon's drop-in tests: the metric
names, Prometheus types and help texts of its shipped default counters CSV
(etc/default-counters.csv), the label names and their order, the XID labels of
DCGM_FI_DEV_XID_ERRORS and the layout of MIG instances. Written down from dcgm-exporter's
published CSV, code and issue reports (names, types and texts are interface facts a dashboard or
alert depends on); nothing here is derived from gpumon.

Where dcgm-exporter versions differ, the 4.x value is the one kept (3.x enabled the PCIe
THROUGHPUT fields that PROF_PCIE_*_BYTES replaced). DCGM_FI_DEV_NVLINK_BANDWIDTH_TOTAL is typed
counter in every copy of the shipped CSV found (a proposal to make it a gauge, dcgm-exporter
PR 658, was closed unmerged), though DCGM computes it as a rate.
"""

from dataclasses import dataclass


@dataclass(frozen=True)
class Counter:
    """One row of a dcgm-exporter collectors CSV: DCGM field, Prometheus type, help text."""

    name: str
    type: str  # "gauge", "counter" or "label" (a label on every other series, not a series)
    help: str
    # The help text is the one in the shipped CSV (False for off-by-default rows whose text in
    # dcgm-exporter's alternate CSVs was not confirmed; their type and labels still count).
    help_known: bool = True


# etc/default-counters.csv of dcgm-exporter 4.x, its uncommented rows in file order: 25 series
# per GPU plus DCGM_FI_DRIVER_VERSION, which is a label. Help texts exactly as the CSV has them
# (dcgm-exporter trims the spaces around each comma-separated field).
DEFAULT_COUNTERS = (
    # Clocks
    Counter("DCGM_FI_DEV_SM_CLOCK", "gauge", "SM clock frequency (in MHz)."),
    Counter("DCGM_FI_DEV_MEM_CLOCK", "gauge", "Memory clock frequency (in MHz)."),
    # Temperature
    Counter("DCGM_FI_DEV_MEMORY_TEMP", "gauge", "Memory temperature (in C)."),
    Counter("DCGM_FI_DEV_GPU_TEMP", "gauge", "GPU temperature (in C)."),
    # Power
    Counter("DCGM_FI_DEV_POWER_USAGE", "gauge", "Power draw (in W)."),
    Counter("DCGM_FI_DEV_TOTAL_ENERGY_CONSUMPTION", "counter",
            "Total energy consumption since boot (in mJ)."),
    # PCIe
    Counter("DCGM_FI_DEV_PCIE_REPLAY_COUNTER", "counter", "Total number of PCIe retries."),
    # Utilization
    Counter("DCGM_FI_DEV_GPU_UTIL", "gauge", "GPU utilization (in %)."),
    Counter("DCGM_FI_DEV_MEM_COPY_UTIL", "gauge", "Memory utilization (in %)."),
    Counter("DCGM_FI_DEV_ENC_UTIL", "gauge", "Encoder utilization (in %)."),
    Counter("DCGM_FI_DEV_DEC_UTIL", "gauge", "Decoder utilization (in %)."),
    # Errors and violations
    Counter("DCGM_FI_DEV_XID_ERRORS", "gauge", "Value of the last XID error encountered."),
    # Memory usage
    Counter("DCGM_FI_DEV_FB_FREE", "gauge", "Framebuffer memory free (in MiB)."),
    Counter("DCGM_FI_DEV_FB_USED", "gauge", "Framebuffer memory used (in MiB)."),
    Counter("DCGM_FI_DEV_FB_RESERVED", "gauge", "Framebuffer memory reserved (in MiB)."),
    # NVLink
    Counter("DCGM_FI_DEV_NVLINK_BANDWIDTH_TOTAL", "counter",
            "Total number of NVLink bandwidth counters for all lanes."),
    # vGPU
    Counter("DCGM_FI_DEV_VGPU_LICENSE_STATUS", "gauge", "vGPU License status"),
    # Remapped rows
    Counter("DCGM_FI_DEV_UNCORRECTABLE_REMAPPED_ROWS", "counter",
            "Number of remapped rows for uncorrectable errors"),
    Counter("DCGM_FI_DEV_CORRECTABLE_REMAPPED_ROWS", "counter",
            "Number of remapped rows for correctable errors"),
    Counter("DCGM_FI_DEV_ROW_REMAP_FAILURE", "gauge", "Whether remapping of rows has failed"),
    # Static configuration: a label on the other series
    Counter("DCGM_FI_DRIVER_VERSION", "label", "Driver Version"),
    # Datacenter profiling (DCP): Volta and newer datacenter GPUs
    Counter("DCGM_FI_PROF_GR_ENGINE_ACTIVE", "gauge",
            "Ratio of time the graphics engine is active."),
    Counter("DCGM_FI_PROF_PIPE_TENSOR_ACTIVE", "gauge",
            "Ratio of cycles the tensor (HMMA) pipe is active."),
    Counter("DCGM_FI_PROF_DRAM_ACTIVE", "gauge",
            "Ratio of cycles the device memory interface is active sending or receiving data."),
    Counter("DCGM_FI_PROF_PCIE_TX_BYTES", "gauge",
            "The rate of data transmitted over the PCIe bus - including both protocol headers "
            "and data payloads - in bytes per second."),
    Counter("DCGM_FI_PROF_PCIE_RX_BYTES", "gauge",
            "The rate of data received over the PCIe bus - including both protocol headers and "
            "data payloads - in bytes per second."),
)

# The series of the default CSV (the label row left out): 25.
DEFAULT_SERIES = tuple(c for c in DEFAULT_COUNTERS if c.type != "label")
assert len(DEFAULT_COUNTERS) == 26 and len(DEFAULT_SERIES) == 25

# Profiling fields that the default CSV has commented out (dcp-metrics-included.csv enables
# them). All are gauges: ratios 0..1, or bytes per second.
OFF_BY_DEFAULT_PROF = (
    Counter("DCGM_FI_PROF_SM_ACTIVE", "gauge",
            "The ratio of cycles an SM has at least 1 warp assigned."),
    Counter("DCGM_FI_PROF_SM_OCCUPANCY", "gauge",
            "The ratio of number of warps resident on an SM."),
    Counter("DCGM_FI_PROF_PIPE_FP64_ACTIVE", "gauge", "Ratio of cycles the fp64 pipes are active."),
    Counter("DCGM_FI_PROF_PIPE_FP32_ACTIVE", "gauge", "", help_known=False),
    Counter("DCGM_FI_PROF_PIPE_FP16_ACTIVE", "gauge", "", help_known=False),
    Counter("DCGM_FI_PROF_NVLINK_TX_BYTES", "gauge", "", help_known=False),
    Counter("DCGM_FI_PROF_NVLINK_RX_BYTES", "gauge", "", help_known=False),
    Counter("DCGM_FI_PROF_PIPE_TENSOR_HMMA_ACTIVE", "gauge", "", help_known=False),
    Counter("DCGM_FI_PROF_PIPE_TENSOR_IMMA_ACTIVE", "gauge", "", help_known=False),
    Counter("DCGM_FI_PROF_PIPE_TENSOR_DFMA_ACTIVE", "gauge", "", help_known=False),
    Counter("DCGM_FI_PROF_PIPE_INT_ACTIVE", "gauge", "", help_known=False),
)

# Header of dcgm-exporter's collectors CSV format: '#' starts a comment; each row is
# "DCGM field, Prometheus metric type, help message" (always two commas).
CSV_HEADER = ("# Format\n"
              "# If line starts with a '#' it is considered a comment\n"
              "# DCGM FIELD, Prometheus metric type, help message\n")


def collectors_csv(counters=DEFAULT_COUNTERS):
    """A collectors file in dcgm-exporter's CSV layout with the given rows. The
    DCGM_FI_DEV_DEC_UTIL row keeps the space before its comma that the shipped file has, since a
    reader must trim it."""
    lines = [CSV_HEADER]
    for c in counters:
        name = f"{c.name} " if c.name == "DCGM_FI_DEV_DEC_UTIL" else c.name
        lines.append(f"{name}, {c.type}, {c.help}\n")
    return "".join(lines)


# ---- labels ----

# Every GPU series, in dcgm-exporter's order. A MIG GPU instance's series insert the instance
# labels after modelName; label-type CSV fields (DCGM_FI_DRIVER_VERSION) follow Hostname; the
# XID family's attributes come last.
GPU_LABELS = ("gpu", "UUID", "pci_bus_id", "device", "modelName")
MIG_LABELS = ("GPU_I_PROFILE", "GPU_I_ID")
HOST_LABELS = ("Hostname", "DCGM_FI_DRIVER_VERSION")
XID_LABELS = ("err_code", "err_msg")


def label_order(name, mig=False):
    """The label names of a series of dcgm field `name`, in dcgm-exporter's order."""
    labels = GPU_LABELS + (MIG_LABELS if mig else ()) + HOST_LABELS
    if name == "DCGM_FI_DEV_XID_ERRORS":
        labels += XID_LABELS
    return labels


# err_msg of DCGM_FI_DEV_XID_ERRORS by XID (err_code, decimal), from dcgm-exporter's table
# (built from NVIDIA's XID catalogue); err_code "0" / "No Error" while no XID was seen.
XID_MESSAGES = {
    0: "No Error",
    13: "Graphics Engine Exception",
    31: "GPU memory page fault",
    43: "GPU stopped processing",
    48: "Double Bit ECC Error",
    63: "ECC page retirement or row remapping recording event",
    64: "ECC page retirement or row remapper recording failure",
    74: "NVLINK Error",
    79: "GPU has fallen off the bus",
    92: "High single-bit ECC error rate",
    94: "Contained ECC error",
    95: "Uncontained ECC error",
    119: "GSP RPC Timeout",
    120: "GSP Error",
}

# ---- MIG ----

# Fields dcgm-exporter does not show for a MIG GPU instance: the device utilisations (GPU,
# memory copy, encoder, decoder), which its maintainers document as unsupported in MIG
# configurations (PROF_GR_ENGINE_ACTIVE and PROF_DRAM_ACTIVE are their replacements), and PCIe /
# NVLink traffic, which has no per-instance meaning in DCGM.
NOT_ON_MIG_INSTANCES = {
    "DCGM_FI_DEV_GPU_UTIL": "device utilisation is not supported in MIG mode",
    "DCGM_FI_DEV_MEM_COPY_UTIL": "device utilisation is not supported in MIG mode",
    "DCGM_FI_DEV_ENC_UTIL": "device utilisation is not supported in MIG mode",
    "DCGM_FI_DEV_DEC_UTIL": "device utilisation is not supported in MIG mode",
    "DCGM_FI_PROF_PCIE_TX_BYTES": "DCGM returns N/A for MIG instances",
    "DCGM_FI_PROF_PCIE_RX_BYTES": "DCGM returns N/A for MIG instances",
    "DCGM_FI_PROF_NVLINK_TX_BYTES": "DCGM returns N/A for MIG instances",
    "DCGM_FI_PROF_NVLINK_RX_BYTES": "DCGM returns N/A for MIG instances",
}

# Fields whose value on a MIG instance is the instance's own; every other field is the whole
# GPU's, repeated on each instance.
PER_INSTANCE_VALUES = {
    "DCGM_FI_DEV_FB_USED", "DCGM_FI_DEV_FB_FREE", "DCGM_FI_DEV_FB_TOTAL",
    "DCGM_FI_DEV_FB_RESERVED",
    "DCGM_FI_PROF_GR_ENGINE_ACTIVE", "DCGM_FI_PROF_PIPE_TENSOR_ACTIVE", "DCGM_FI_PROF_DRAM_ACTIVE",
    "DCGM_FI_PROF_SM_ACTIVE", "DCGM_FI_PROF_SM_OCCUPANCY", "DCGM_FI_PROF_PIPE_FP64_ACTIVE",
    "DCGM_FI_PROF_PIPE_FP32_ACTIVE", "DCGM_FI_PROF_PIPE_FP16_ACTIVE",
    "DCGM_FI_PROF_PIPE_TENSOR_HMMA_ACTIVE", "DCGM_FI_PROF_PIPE_TENSOR_IMMA_ACTIVE",
    "DCGM_FI_PROF_PIPE_TENSOR_DFMA_ACTIVE", "DCGM_FI_PROF_PIPE_INT_ACTIVE",
}

# ---- profiling fields ----

# Ratios of activity, 0..1 (NVML GPM gives percent; DCGM divides by 100).
PROF_RATIOS = {c.name for c in DEFAULT_SERIES + OFF_BY_DEFAULT_PROF
               if c.name.startswith("DCGM_FI_PROF_") and not c.name.endswith("_BYTES")}
# Rates in bytes per second.
PROF_RATES = {c.name for c in DEFAULT_SERIES + OFF_BY_DEFAULT_PROF
              if c.name.startswith("DCGM_FI_PROF_") and c.name.endswith("_BYTES")}

# ---- HTTP ----

# The Accept header of Prometheus 2.x scrapes (OpenMetrics preferred, text 0.0.4 accepted), and
# of Prometheus 3.x (adds text 1.0.0 and UTF-8 escaping parameters).
PROMETHEUS_2_ACCEPT = ("application/openmetrics-text;version=1.0.0,application/openmetrics-text;"
                       "version=0.0.1;q=0.75,text/plain;version=0.0.4;q=0.5,*/*;q=0.1")
PROMETHEUS_3_ACCEPT = ("application/openmetrics-text;version=1.0.0;escaping=allow-utf-8;q=0.5,"
                       "application/openmetrics-text;version=0.0.1;q=0.4,"
                       "text/plain;version=1.0.0;escaping=allow-utf-8;q=0.3,"
                       "text/plain;version=0.0.4;q=0.2,*/*;q=0.1")
