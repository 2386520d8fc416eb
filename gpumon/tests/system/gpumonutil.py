"""Helpers for gpumon's system tests: the gpumon process against the fake libnvidia-ml.so.1,
its fixture file, checking /metrics against a fixture, golden expositions. What every
component's tests need alike (processes, polling, temp dirs, HTTP, the exposition parser) is in
tests/pylib/gntest.py and re-exported here under the names the tests use.

Every gpumon started here listens on 127.0.0.1 on a free port and keeps its files (log, config,
its own copy of the NVML fixture) in a temp dir of its own, so tests can run in parallel; whoever
starts a process stops it again (the fixtures at the bottom).

Named gpumonutil, not sysutil: coolant's system tests run in the same pytest session and a
module name used twice would shadow the other.
"""

import json
import os
import re
import shutil
import subprocess
import time
import urllib.error
import urllib.parse
import urllib.request
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[3]
FIXTURES = REPO / "tests" / "fixtures" / "nvml"
GOLDEN = REPO / "gpumon" / "tests" / "golden" / "system"

from gntest import (  # noqa: F401 - re-exported for the tests
    SAMPLE_RE,
    SANITIZER_MARKERS,
    ProcessDied,
    Proc,
    Response,
    TestUsers,
    build_dir,
    free_port,
    need_built,
    parse_metrics,
    request,
    run,
    scrape,
    short_tmpdir,
    wait_for,
)

TEXT_CONTENT_TYPE = "text/plain; version=0.0.4"
OPENMETRICS_ACCEPT = "application/openmetrics-text; version=1.0.0"

# ---- the build under test ----


def gpumon_binary():
    return str(need_built(build_dir() / "gpumon" / "gpumon", "gpumon"))


def fake_nvml_dir(variant="current"):
    """The folder holding the fake libnvidia-ml.so.1: "current" or "old" (an old driver that
    lacks the optional entry points)."""
    d = build_dir() / "tests" / "fake-nvml"
    if variant == "old":
        d = d / "old"
    need_built(d / "libnvidia-ml.so.1", f"fake libnvidia-ml.so.1 ({variant})")
    return str(d)


def fixture_path(name):
    return need_built(FIXTURES / f"{name}.json", f"NVML fixture {name}")


def load_fixture(name):
    return json.loads(fixture_path(name).read_text())


# ---- /metrics ----


def metric_series(samples, name, **match):
    """[(labels dict, value)] of one family whose labels include `match`."""
    out = []
    for (n, lab), v in samples.items():
        d = dict(lab)
        if n == name and all(d.get(k) == str(val) for k, val in match.items()):
            out.append((d, v))
    return out


def one(samples, name, **match):
    """The value of the one series of `name` whose labels include `match`; None if there is
    none; AssertionError if several match (the test's match was not specific enough)."""
    found = metric_series(samples, name, **match)
    assert len(found) <= 1, f"{len(found)} series of {name} match {match}: {found}"
    return found[0][1] if found else None


def families(samples):
    return {name for name, _ in samples}


def types(text):
    """{family: type} from the # TYPE lines."""
    out = {}
    for line in text.splitlines():
        if line.startswith("# TYPE "):
            _, _, name, typ = line.split(maxsplit=3)
            out[name] = typ
    return out


# promtool's lint findings that are deliberate: dcgm-exporter's names, which dashboards and alert
# rules depend on. Anything else promtool says fails the check.
DCGM_CAMEL_LABELS = {"modelName"}
_CAMEL_RE = re.compile(r"[a-z][A-Z]")


def _allowed_lint(problem, text):
    name, _, what = problem.partition(" ")
    if what == "label names should be written in 'snake_case' not 'camelCase'":
        camel = {lab for (n, labels) in parse_metrics(text) if n == name
                 for lab, _ in labels if _CAMEL_RE.search(lab)}
        return bool(camel) and camel <= DCGM_CAMEL_LABELS
    if what == 'counter metrics should have "_total" suffix':
        return name.startswith("DCGM_FI_DEV_")  # dcgm's counters carry no _total
    if what == "metric name should not include type 'counter'":
        return name == "DCGM_FI_DEV_PCIE_REPLAY_COUNTER"
    return False


def promtool_check(text):
    """`promtool check metrics` must parse the text (format 0.0.4), and every lint finding must
    be one of the deliberate dcgm-exporter names (_allowed_lint)."""
    if not shutil.which("promtool"):
        pytest.fail("promtool not found (scripts/install-deps.sh installs prometheus)")
    r = subprocess.run(["promtool", "check", "metrics"], input=text, capture_output=True,
                       text=True, timeout=30)
    out = r.stdout + r.stderr
    # Exit status 1: the text does not parse; 3: it parses, with lint findings.
    assert r.returncode in (0, 3), f"promtool check metrics ({r.returncode}):\n{out}\n---\n{text}"
    problems = [line for line in out.splitlines() if line.strip()]
    bad = [p for p in problems if not _allowed_lint(p, text)]
    assert not bad, "promtool check metrics:\n" + "\n".join(bad) + f"\n---\n{text}"


# ---- gpumon ----


def write_atomic(path, data):
    """Replaces a file in one rename, so a reader never sees half of it."""
    path = Path(path)
    tmp = path.with_name(f".{path.name}.tmp")
    tmp.write_text(data)
    os.replace(tmp, path)


class Gpumon:
    """gpumon on a free loopback port with the fake NVML and a private copy of a fixture.

    nvml: "current" / "old" (the fake's variants), or None for a host without a driver: gpumon
    is pointed at a libnvidia-ml.so.1 that does not exist (nvml_library), so that a GPU node's
    real library, which the dynamic loader would find in its ld cache, stays out too. fixture: a name under tests/fixtures/nvml, a dict, or
    None (no FAKE_NVML_FIXTURE). Short intervals by default so a test need not wait long. The
    process is started, not waited for: see wait_ready()."""

    def __init__(self, workdir, fixture="consumer-1gpu", nvml="current", name="gpumon",
                 interval="200ms", slow_interval="400ms", rescan_interval="1s", config=None,
                 args=(), env=None):
        self.workdir = Path(workdir)
        self.name = name
        self.port = free_port()
        self.fixture = self.workdir / f"{name}.fixture.json"
        if fixture is not None:
            data = load_fixture(fixture) if isinstance(fixture, str) else fixture
            self.write_fixture(data)
        self.config = self.workdir / f"{name}.conf"
        conf = {"rescan_interval": rescan_interval}
        if nvml is None:
            conf["nvml_library"] = str(self.workdir / "no-driver" / "libnvidia-ml.so.1")
        conf.update(config or {})
        self.config.write_text("[gpumon]\n" + "".join(f"{k} = {v}\n" for k, v in conf.items()))
        self.env = self._env(nvml, fixture is not None)
        self.env.update(env or {})
        argv = [gpumon_binary(), "--config", self.config, "--listen", f"127.0.0.1:{self.port}",
                "--hostname", "testhost", "--interval", interval,
                "--slow-interval", slow_interval, *args]
        self.proc = Proc(argv, self.workdir / f"{name}.log", env=self.env, replace_env=True)

    def wait_ready(self, timeout=20):
        wait_for(self._ready, timeout, f"{self.name} to serve /metrics")

    def _env(self, nvml, with_fixture):
        env = dict(os.environ)
        # The host's own library path must not bring a real or stale libnvidia-ml along.
        env.pop("LD_LIBRARY_PATH", None)
        env.pop("FAKE_NVML_FIXTURE", None)
        if nvml is not None:
            env["LD_LIBRARY_PATH"] = fake_nvml_dir(nvml)
        if with_fixture:
            env["FAKE_NVML_FIXTURE"] = str(self.fixture)
        return env

    def check_alive(self):
        if not self.proc.running():
            raise ProcessDied(f"{self.name} exited ({self.proc.popen.returncode}):\n"
                              f"{self.proc.tail()}")

    def _ready(self):
        self.check_alive()
        return scrape(self.port, timeout=3).status == 200

    def write_fixture(self, data):
        write_atomic(self.fixture, json.dumps(data, indent=1) + "\n")

    def read_fixture(self):
        return json.loads(self.fixture.read_text())

    def scrape(self, **kw):
        self.check_alive()
        return scrape(self.port, **kw)

    def text(self, **kw):
        r = self.scrape(**kw)
        assert r.status == 200, r
        return r.text()

    def metrics(self, **kw):
        return parse_metrics(self.text(**kw))

    def checked(self, **kw):
        """One text-format scrape that promtool must accept; returns (text, samples)."""
        text = self.text(**kw)
        promtool_check(text)
        return text, parse_metrics(text)

    def get(self, path, **kw):
        self.check_alive()
        return request(self.port, path, **kw)

    def wait_metric(self, what, check, timeout=10):
        """Scrapes until check(samples) is truthy; returns the samples."""
        def poll():
            s = self.metrics()
            return s if check(s) else None
        return wait_for(poll, timeout, f"{self.name}: {what}")

    def wait_values(self, fixture, symbols=None, timeout=15, gpus=None):
        """Scrapes until every GPU (or those in `gpus`) shows what the fixture says
        (check_gpu_values); returns the samples. On timeout the last mismatch is the failure."""
        deadline = time.monotonic() + timeout
        while True:
            s = self.metrics()
            try:
                for i in gpus if gpus is not None else range(len(fixture.get("gpus", []))):
                    check_gpu_values(s, fixture, i, symbols)
                return s
            except AssertionError:
                if time.monotonic() >= deadline:
                    raise
            time.sleep(0.1)

    def stop(self):
        return self.proc.stop()


def check_stopped(d):
    """Stops a gpumon at the end of a test; returns a problem description or None. gpumon must
    exit 0 on SIGTERM without a sanitizer report; one that died of a signal during the test is a
    problem too. The log tail is printed: pytest shows it only for a failed test."""
    was_running = d.proc.running()
    rc = d.stop()
    print(f"--- {d.proc.log_path.name} ---\n{d.proc.tail(80)}")
    report = d.proc.sanitizer_report()
    if report:
        return f"{d.name}: {report}\n{d.proc.tail(60)}"
    if was_running and rc != 0:
        return f"{d.name}: exit status {rc} after SIGTERM:\n{d.proc.tail()}"
    if not was_running and rc < 0:
        return f"{d.name}: killed by signal {-rc} during the test:\n{d.proc.tail()}"
    return None


# ---- what a fixture should produce ----

# Entry points (with their fallbacks) behind each dcgm family, for "unsupported", "errors" and
# the old driver's missing symbols.
FAMILY_CALLS = {
    "DCGM_FI_DEV_GPU_UTIL": ["nvmlDeviceGetUtilizationRates"],
    "DCGM_FI_DEV_MEM_COPY_UTIL": ["nvmlDeviceGetUtilizationRates"],
    "DCGM_FI_DEV_ENC_UTIL": ["nvmlDeviceGetEncoderUtilization"],
    "DCGM_FI_DEV_DEC_UTIL": ["nvmlDeviceGetDecoderUtilization"],
    "DCGM_FI_DEV_FB_USED": ["nvmlDeviceGetMemoryInfo"],
    "DCGM_FI_DEV_FB_FREE": ["nvmlDeviceGetMemoryInfo"],
    "DCGM_FI_DEV_FB_TOTAL": ["nvmlDeviceGetMemoryInfo"],
    "DCGM_FI_DEV_GPU_TEMP": ["nvmlDeviceGetTemperature"],
    "DCGM_FI_DEV_MEMORY_TEMP": ["nvmlDeviceGetFieldValues"],
    "DCGM_FI_DEV_POWER_USAGE": ["nvmlDeviceGetPowerUsage"],
    "DCGM_FI_DEV_ENFORCED_POWER_LIMIT": ["nvmlDeviceGetEnforcedPowerLimit"],
    "DCGM_FI_DEV_TOTAL_ENERGY_CONSUMPTION": ["nvmlDeviceGetTotalEnergyConsumption"],
    "DCGM_FI_DEV_SM_CLOCK": ["nvmlDeviceGetClockInfo"],
    "DCGM_FI_DEV_MEM_CLOCK": ["nvmlDeviceGetClockInfo"],
    "DCGM_FI_DEV_FAN_SPEED": ["nvmlDeviceGetFanSpeed"],
    "DCGM_FI_DEV_PCIE_REPLAY_COUNTER": ["nvmlDeviceGetPcieReplayCounter"],
    # The pre-535 name of the same call is the fallback.
    "DCGM_FI_DEV_CLOCKS_EVENT_REASONS": ["nvmlDeviceGetCurrentClocksEventReasons|"
                                         "nvmlDeviceGetCurrentClocksThrottleReasons"],
    "DCGM_FI_DEV_ECC_SBE_VOL_TOTAL": ["nvmlDeviceGetTotalEccErrors"],
    "DCGM_FI_DEV_ECC_DBE_VOL_TOTAL": ["nvmlDeviceGetTotalEccErrors"],
    "DCGM_FI_DEV_ECC_SBE_AGG_TOTAL": ["nvmlDeviceGetTotalEccErrors"],
    "DCGM_FI_DEV_ECC_DBE_AGG_TOTAL": ["nvmlDeviceGetTotalEccErrors"],
    "DCGM_FI_DEV_CORRECTABLE_REMAPPED_ROWS": ["nvmlDeviceGetRemappedRows"],
    "DCGM_FI_DEV_UNCORRECTABLE_REMAPPED_ROWS": ["nvmlDeviceGetRemappedRows"],
    "DCGM_FI_DEV_ROW_REMAP_PENDING": ["nvmlDeviceGetRemappedRows"],
    "DCGM_FI_DEV_ROW_REMAP_FAILURE": ["nvmlDeviceGetRemappedRows"],
    "DCGM_FI_DEV_FB_RESERVED": ["nvmlDeviceGetMemoryInfo_v2"],
    "DCGM_FI_DEV_NVLINK_BANDWIDTH_TOTAL": ["nvmlDeviceGetFieldValues"],
    "DCGM_FI_DEV_VGPU_LICENSE_STATUS": ["nvmlDeviceGetVirtualizationMode"],
}

# dcgm's profiling fields by the fake's GPM metric names, with the factor to dcgm's unit.
MIB = 1 << 20
PROF_METRICS = {
    "DCGM_FI_PROF_GR_ENGINE_ACTIVE": ("graphics_util", 0.01),
    "DCGM_FI_PROF_SM_ACTIVE": ("sm_util", 0.01),
    "DCGM_FI_PROF_SM_OCCUPANCY": ("sm_occupancy", 0.01),
    "DCGM_FI_PROF_PIPE_TENSOR_ACTIVE": ("any_tensor_util", 0.01),
    "DCGM_FI_PROF_PIPE_TENSOR_DFMA_ACTIVE": ("dfma_tensor_util", 0.01),
    "DCGM_FI_PROF_PIPE_TENSOR_HMMA_ACTIVE": ("hmma_tensor_util", 0.01),
    "DCGM_FI_PROF_PIPE_TENSOR_IMMA_ACTIVE": ("imma_tensor_util", 0.01),
    "DCGM_FI_PROF_DRAM_ACTIVE": ("dram_bw_util", 0.01),
    "DCGM_FI_PROF_PIPE_FP64_ACTIVE": ("fp64_util", 0.01),
    "DCGM_FI_PROF_PIPE_FP32_ACTIVE": ("fp32_util", 0.01),
    "DCGM_FI_PROF_PIPE_FP16_ACTIVE": ("fp16_util", 0.01),
    "DCGM_FI_PROF_PIPE_INT_ACTIVE": ("integer_util", 0.01),
    "DCGM_FI_PROF_PCIE_TX_BYTES": ("pcie_tx_per_sec", MIB),
    "DCGM_FI_PROF_PCIE_RX_BYTES": ("pcie_rx_per_sec", MIB),
    "DCGM_FI_PROF_NVLINK_TX_BYTES": ("nvlink_total_tx_per_sec", MIB),
    "DCGM_FI_PROF_NVLINK_RX_BYTES": ("nvlink_total_rx_per_sec", MIB),
}
GPM_CALLS = ("nvmlGpmQueryDeviceSupport", "nvmlGpmSampleGet", "nvmlGpmMetricsGet")

# Families whose value is computed from two readings: compared with a tolerance.
APPROX_FAMILIES = {"DCGM_FI_DEV_NVLINK_BANDWIDTH_TOTAL"} | set(PROF_METRICS)

CLOCK_REASON_BITS = {
    "GpuIdle": 0x1, "ApplicationsClocksSetting": 0x2, "SwPowerCap": 0x4, "HwSlowdown": 0x8,
    "SyncBoost": 0x10, "SwThermalSlowdown": 0x20, "HwThermalSlowdown": 0x40,
    "HwPowerBrakeSlowdown": 0x80, "DisplayClockSetting": 0x100,
}


def exported_symbols(variant="current"):
    """The nvml* functions a fake library variant exports (nm -D), so the old driver's
    expectations follow what it really lacks."""
    lib = Path(fake_nvml_dir(variant)) / "libnvidia-ml.so.1"
    r = subprocess.run(["nm", "-D", "--defined-only", str(lib)], capture_output=True, text=True,
                       check=True)
    return {line.split()[-1] for line in r.stdout.splitlines() if " T " in line}


def expected_gpu(fixture, index, symbols=None):
    """{family: value} of the whole-GPU series the fixture's GPU `index` must show, and None for
    each dcgm family it must NOT show, computed from the fixture alone: MiB are bytes >> 20, W are
    mW / 1000; a missing key, an "unsupported"/"errors" call or a call the library lacks
    (`symbols`, when given) means the family is absent. The energy counter grows from its fixture
    value, so its entry is that lower bound."""
    g = fixture["gpus"][index]
    mib = 1 << 20
    util = g.get("utilization")
    mem = g.get("memory")
    clocks = g.get("clocks") or {}
    ecc = g.get("ecc")
    ecc_on = ecc is not None and ecc.get("enabled", True)
    rows = g.get("remapped_rows")
    reasons = g.get("clock_event_reasons")
    if isinstance(reasons, list):
        reasons = sum(CLOCK_REASON_BITS[r] for r in reasons)
    mig_on = bool((g.get("mig") or {}).get("enabled"))
    nvlink = g.get("nvlink")
    gpm = g.get("gpm") or {}
    virt = g.get("virtualization_mode")
    v2 = symbols is None or "nvmlDeviceGetMemoryInfo_v2" in symbols

    def opt(key, scale=1.0):
        return None if g.get(key) is None else g[key] / scale

    want = {
        "DCGM_FI_DEV_GPU_UTIL": util["gpu"] if util and not mig_on else None,
        "DCGM_FI_DEV_MEM_COPY_UTIL": util["memory"] if util and not mig_on else None,
        "DCGM_FI_DEV_ENC_UTIL": opt("encoder_util"),
        "DCGM_FI_DEV_DEC_UTIL": opt("decoder_util"),
        # Without memory info v2 (an old driver) the reservation counts as used.
        "DCGM_FI_DEV_FB_USED": (mem["used"] + (0 if v2 else mem.get("reserved", 0))) // mib
        if mem else None,
        "DCGM_FI_DEV_FB_FREE":
            (mem["total"] - mem["used"] - mem.get("reserved", 0)) // mib if mem else None,
        "DCGM_FI_DEV_FB_RESERVED": mem.get("reserved", 0) // mib if mem else None,
        "DCGM_FI_DEV_FB_TOTAL": mem["total"] // mib if mem else None,
        "DCGM_FI_DEV_GPU_TEMP": opt("temperature"),
        "DCGM_FI_DEV_MEMORY_TEMP": opt("memory_temperature"),
        "DCGM_FI_DEV_POWER_USAGE": opt("power_usage_mw", 1000.0),
        "DCGM_FI_DEV_ENFORCED_POWER_LIMIT": opt("power_limit_mw", 1000.0),
        "DCGM_FI_DEV_TOTAL_ENERGY_CONSUMPTION": opt("energy_mj"),
        "DCGM_FI_DEV_SM_CLOCK": clocks.get("sm"),
        "DCGM_FI_DEV_MEM_CLOCK": clocks.get("mem"),
        "DCGM_FI_DEV_FAN_SPEED": opt("fan_speed"),
        "DCGM_FI_DEV_PCIE_REPLAY_COUNTER": opt("pcie_replay"),
        "DCGM_FI_DEV_CLOCKS_EVENT_REASONS": reasons,
        "DCGM_FI_DEV_ECC_SBE_VOL_TOTAL": ecc.get("sbe_volatile", 0) if ecc_on else None,
        "DCGM_FI_DEV_ECC_DBE_VOL_TOTAL": ecc.get("dbe_volatile", 0) if ecc_on else None,
        "DCGM_FI_DEV_ECC_SBE_AGG_TOTAL": ecc.get("sbe_aggregate", 0) if ecc_on else None,
        "DCGM_FI_DEV_ECC_DBE_AGG_TOTAL": ecc.get("dbe_aggregate", 0) if ecc_on else None,
        "DCGM_FI_DEV_CORRECTABLE_REMAPPED_ROWS": rows.get("correctable", 0) if rows else None,
        "DCGM_FI_DEV_UNCORRECTABLE_REMAPPED_ROWS": rows.get("uncorrectable", 0) if rows else None,
        "DCGM_FI_DEV_ROW_REMAP_PENDING": int(rows.get("pending", False)) if rows else None,
        "DCGM_FI_DEV_ROW_REMAP_FAILURE": int(rows.get("failure", False)) if rows else None,
        "DCGM_FI_DEV_NVLINK_BANDWIDTH_TOTAL":
            (nvlink["data_tx_kibps"] + nvlink["data_rx_kibps"]) / 1024 if nvlink else None,
        "DCGM_FI_DEV_VGPU_LICENSE_STATUS": 0 if virt not in (None, "VGPU") else None,
    }
    for family, (metric, factor) in PROF_METRICS.items():
        value = (gpm.get("metrics") or {}).get(metric)
        want[family] = value * factor if gpm.get("supported") and value is not None else None
        FAMILY_CALLS.setdefault(family, list(GPM_CALLS))
    failing = set(g.get("unsupported") or []) | set((g.get("errors") or {}).keys())
    for family, calls in FAMILY_CALLS.items():
        for alternatives in calls:
            names = alternatives.split("|")
            usable = [n for n in names
                      if n not in failing and (symbols is None or n in symbols)]
            if not usable:
                want[family] = None
    if mig_on and (g.get("mig") or {}).get("instances"):
        # dcgm-exporter's device mode: a GPU in MIG mode has no series of its own.
        want = {family: None for family in want}
    return want


def expected_xids(fixture):
    """{(gpu index, xid): count} once every event of the fixture has been delivered; a GPU that
    is lost (lost_at) gets the XID 79 the fake sends with the loss."""
    out = {}
    for i, g in enumerate(fixture.get("gpus", [])):
        events = list(g.get("events") or [])
        if "lost_at" in g:
            events.append({"xid": 79})
        for ev in events:
            out[(i, ev["xid"])] = out.get((i, ev["xid"]), 0) + 1
    return out


def xids_delivered(samples, fixture):
    """Whether the exposition counts every XID of expected_xids(), each exactly."""
    return all(one(samples, "gpumon_xid_errors_total", gpu=i, xid=x) == n
               for (i, x), n in expected_xids(fixture).items())


def gpu_labels(fixture, index, hostname="testhost"):
    """The dcgm-exporter labels every series of the fixture's GPU `index` must carry."""
    g = fixture["gpus"][index]
    return {
        "gpu": str(index),
        "UUID": g["uuid"],
        "pci_bus_id": g["pci_bus_id"],
        "device": f"nvidia{g['minor']}" if "minor" in g else "",
        "modelName": g["name"],
        "Hostname": hostname,
        "DCGM_FI_DRIVER_VERSION": fixture.get("driver_version", ""),
    }


def check_gpu_values(samples, fixture, index, symbols=None):
    """Asserts every dcgm family of GPU `index` against expected_gpu(): present with the right
    value and exactly the dcgm labels, or absent. Returns the number of families checked."""
    want = expected_gpu(fixture, index, symbols)
    labels = gpu_labels(fixture, index)
    problems = []
    for family, value in want.items():
        series = [(lab, v) for lab, v in metric_series(samples, family, gpu=index)
                  if "GPU_I_ID" not in lab]
        if value is None:
            if series:
                problems.append(f"{family}: expected absent, got {series}")
            continue
        if len(series) != 1:
            problems.append(f"{family}: expected one series, got {series}")
            continue
        lab, got = series[0]
        if lab != labels:
            problems.append(f"{family}: labels {lab}, expected {labels}")
        if family == "DCGM_FI_DEV_TOTAL_ENERGY_CONSUMPTION":
            if got < value:
                problems.append(f"{family}: {got} below the fixture's {value}")
        elif family in APPROX_FAMILIES:
            # A rate between two readings whose times the fake and gpumon take apart.
            if abs(got - value) > 0.02 * max(1.0, abs(value)):
                problems.append(f"{family}: {got}, expected about {value}")
        elif got != value:
            problems.append(f"{family}: {got}, expected {value}")
    assert not problems, f"GPU {index}:\n" + "\n".join(problems)
    return len(want)


# Fixture pids are small numbers that may well be live processes on this host (pid_max is often
# 32768), whose owner would then leak into the output. Tests move them above any pid_max (4194304
# at most) where no process can exist, and normalise them back for the golden files.
HIDDEN_PID_BASE = 2_000_000_000


def hide_pids(fixture):
    """Rewrites every process pid of the fixture (in place) to one no process can have; returns
    {new pid: fixture pid} for normalize()."""
    mapping = {}
    for gi, g in enumerate(fixture.get("gpus", [])):
        for pi, p in enumerate(g.get("processes") or []):
            new = HIDDEN_PID_BASE + gi * 1000 + pi
            mapping[new] = p["pid"]
            p["pid"] = new
    return mapping


# ---- golden expositions ----

# Families whose values depend on timing, not on the fixture: the value is replaced.
VOLATILE_VALUES = {
    "gpumon_sample_timestamp_seconds",
    "gpumon_sample_duration_seconds",
    "DCGM_FI_DEV_NVLINK_BANDWIDTH_TOTAL",
    "DCGM_FI_DEV_TOTAL_ENERGY_CONSUMPTION",
    "gpumon_xid_last_seen_timestamp_seconds",
}
# Labels whose values depend on the build or the run.
VOLATILE_LABELS = {"version": "<version>"}


def normalize(text, pids=None, volatile=()):
    """The exposition with the run-dependent parts replaced by placeholders: values of
    VOLATILE_VALUES families (and of `volatile`) become <volatile>, labels of VOLATILE_LABELS
    their placeholder and each pid label in `pids` ({pid: placeholder}) its placeholder."""
    volatile = VOLATILE_VALUES | set(volatile)
    out = []
    for line in text.splitlines():
        for label, placeholder in VOLATILE_LABELS.items():
            line = re.sub(rf'\b{label}="(?:[^"\\]|\\.)*"', f'{label}="{placeholder}"', line)
        for pid, placeholder in (pids or {}).items():
            line = re.sub(rf'\bpid="{pid}"', f'pid="{placeholder}"', line)
        if not line.startswith("#"):
            m = SAMPLE_RE.match(line)
            if m and m.group("name") in volatile:
                line = line[: m.start("value")] + "<volatile>" + line[m.end("value"):]
        out.append(line)
    return "\n".join(out) + "\n"


def check_golden(name, text, pids=None, volatile=()):
    """Compares the normalised exposition (see normalize) with
    gpumon/tests/golden/system/<name>.prom; GPUNODE_UPDATE_GOLDEN=1 rewrites the file instead
    (then read it line by line)."""
    got = normalize(text, pids, volatile)
    path = GOLDEN / f"{name}.prom"
    if os.environ.get("GPUNODE_UPDATE_GOLDEN") == "1":
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(got)
        return
    assert path.exists(), f"{path} missing: run with GPUNODE_UPDATE_GOLDEN=1 and review it"
    want = path.read_text()
    if got != want:
        import difflib

        diff = "".join(difflib.unified_diff(want.splitlines(True), got.splitlines(True),
                                            str(path), "scraped"))
        raise AssertionError(f"exposition differs from {path.name}:\n{diff}")


# ---- pytest fixtures (imported by the test modules) ----


@pytest.fixture
def workdir():
    path = short_tmpdir("gn-gpumon-")
    yield path
    if not os.environ.get("GPUNODE_KEEP_TMP"):
        shutil.rmtree(path, ignore_errors=True)


@pytest.fixture
def gpumon(workdir):
    """Factory: gpumon(fixture=..., wait=True, **options) -> Gpumon, answering /metrics unless
    wait=False. Every instance is stopped with SIGTERM at the end and must exit 0 without a
    sanitizer report."""
    daemons = []

    def start(fixture="consumer-1gpu", wait=True, **kw):
        kw.setdefault("name", f"gpumon{len(daemons) or ''}")
        d = Gpumon(workdir, fixture, **kw)
        daemons.append(d)
        if wait:
            d.wait_ready()
        return d

    yield start
    problems = [p for p in (check_stopped(d) for d in daemons) if p]
    assert not problems, "\n".join(problems)


def prometheus_api(port, path, **params):
    """The data of GET /api/v1/<path> of the Prometheus on 127.0.0.1:port."""
    url = f"http://127.0.0.1:{port}/api/v1/{path}?" + urllib.parse.urlencode(params)
    with urllib.request.urlopen(url, timeout=10) as r:
        reply = json.load(r)
    assert reply["status"] == "success", reply
    return reply["data"]


def prometheus_query(port, promql):
    """The result of an instant query against the Prometheus on 127.0.0.1:port."""
    url = f"http://127.0.0.1:{port}/api/v1/query?" + urllib.parse.urlencode({"query": promql})
    with urllib.request.urlopen(url, timeout=10) as r:
        reply = json.load(r)
    assert reply["status"] == "success", reply
    return reply["data"]["result"]


class Prometheus:
    """prometheus scraping one gpumon every second, on its own port and storage, and evaluating
    the rule files given every second (their groups' own intervals taken out)."""

    def __init__(self, workdir, target_port, rule_files=()):
        self.port = free_port()
        for path in rule_files:
            text = re.sub(r"^    interval: \w+\n", "", path.read_text(), flags=re.M)
            (workdir / path.name).write_text(text)
        config = workdir / "prometheus.yml"
        config.write_text(
            "global:\n  scrape_interval: 1s\n  scrape_timeout: 1s\n"
            "  evaluation_interval: 1s\n"
            "rule_files:\n" + "".join(f"  - {workdir / p.name}\n" for p in rule_files) +
            "scrape_configs:\n  - job_name: gpumon\n"
            f"    static_configs:\n      - targets: ['127.0.0.1:{target_port}']\n")
        self.proc = Proc(
            ["prometheus", f"--config.file={config}", f"--storage.tsdb.path={workdir / 'tsdb'}",
             f"--web.listen-address=127.0.0.1:{self.port}", "--log.level=warn"],
            workdir / "prometheus.log")

    def api(self, path, **params):
        """(status, data or error) of an API call; a query Prometheus rejects is an answer."""
        url = f"http://127.0.0.1:{self.port}/api/v1/{path}?" + urllib.parse.urlencode(params)
        try:
            with urllib.request.urlopen(url, timeout=10) as r:
                reply = json.load(r)
        except urllib.error.HTTPError as e:
            reply = json.load(e)
        if reply["status"] != "success":
            return "error", f"{reply.get('errorType')}: {reply.get('error')}"
        return "success", reply["data"]

    def query(self, promql):
        status, data = self.api("query", query=promql)
        assert status == "success", f"{promql}: {data}"
        return data["result"]

    def rules(self):
        """{name: rule} as Prometheus loaded and last evaluated them (query, health,
        lastError, lastEvaluation, type)."""
        status, data = self.api("rules")
        assert status == "success", data
        return {r["name"]: r for g in data["groups"] for r in g["rules"]}

    def wait(self, promql, check, timeout=60):
        last = []

        def ok():
            nonlocal last
            assert self.proc.running(), "prometheus exited:\n" + self.proc.tail()
            try:
                last = self.query(promql)
            except (OSError, urllib.error.URLError):
                return False
            return check(last)

        try:
            wait_for(ok, timeout, promql)
        except AssertionError:
            raise AssertionError(f"{promql}: got {last}\n{self.proc.tail()}") from None
        return last
