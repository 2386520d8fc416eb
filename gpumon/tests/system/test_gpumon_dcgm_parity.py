"""gpumon against dcgm-exporter's published interface (dcgm_exporter_facts): every default
counter of dcgm-exporter 4.x on every GPU that has it, with its name, # TYPE, # HELP and labels
in dcgm-exporter's order; the XID labels; dcgm-exporter's MIG layout; the Hostname from
NODE_NAME; the content type Prometheus gets; and the collectors CSV (-f / --collectors).

The tests iterate the facts, not a list of their own, so a counter gpumon lacks fails by name.
gpumon runs on the fake NVML with the dgx-8gpu-mig fixture: eight H100 (GPM supported), GPU 3
in MIG mode with GPU instances 2 (3g.40gb), 9 and 10 (1g.10gb), XID 13 on GPU 5 and XID 48 on
GPU 6.
"""

import re
import shutil
import socket
import time

import pytest

import dcgm_exporter_facts as facts
import gpumonutil as gu
from gpumonutil import gpumon, workdir  # noqa: F401 - pytest fixtures

FIXTURE = "dgx-8gpu-mig"
MIB = 1 << 20
MIG_GPU = 3
# GPU_I_ID -> GPU_I_PROFILE of GPU 3's instances, as the fixture has them.
MIG_INSTANCES = {"2": "3g.40gb", "9": "1g.10gb", "10": "1g.10gb"}
TEXT_TYPE = "text/plain; version=0.0.4"

# GPM metric of the fake's fixture behind each profiling field (NVML GPM ids of the same name).
GPM_METRIC = {
    "DCGM_FI_PROF_GR_ENGINE_ACTIVE": "graphics_util",
    "DCGM_FI_PROF_SM_ACTIVE": "sm_util",
    "DCGM_FI_PROF_SM_OCCUPANCY": "sm_occupancy",
    "DCGM_FI_PROF_PIPE_TENSOR_ACTIVE": "any_tensor_util",
    "DCGM_FI_PROF_DRAM_ACTIVE": "dram_bw_util",
    "DCGM_FI_PROF_PIPE_FP64_ACTIVE": "fp64_util",
    "DCGM_FI_PROF_PIPE_FP32_ACTIVE": "fp32_util",
    "DCGM_FI_PROF_PIPE_FP16_ACTIVE": "fp16_util",
    "DCGM_FI_PROF_PIPE_TENSOR_HMMA_ACTIVE": "hmma_tensor_util",
    "DCGM_FI_PROF_PIPE_TENSOR_IMMA_ACTIVE": "imma_tensor_util",
    "DCGM_FI_PROF_PIPE_TENSOR_DFMA_ACTIVE": "dfma_tensor_util",
    "DCGM_FI_PROF_PIPE_INT_ACTIVE": "integer_util",
    "DCGM_FI_PROF_PCIE_TX_BYTES": "pcie_tx_per_sec",
    "DCGM_FI_PROF_PCIE_RX_BYTES": "pcie_rx_per_sec",
    "DCGM_FI_PROF_NVLINK_TX_BYTES": "nvlink_total_tx_per_sec",
    "DCGM_FI_PROF_NVLINK_RX_BYTES": "nvlink_total_rx_per_sec",
}


# ---- the exposition, with the label order kept ----

_LABEL_RE = re.compile(r'\s*([a-zA-Z_][a-zA-Z0-9_]*)="((?:[^"\\]|\\.)*)"\s*,?')


class Series:
    """One sample line: name, labels as (name, value) pairs in the order sent, value."""

    def __init__(self, name, pairs, value):
        self.name = name
        self.pairs = pairs
        self.labels = dict(pairs)
        self.value = value

    @property
    def label_names(self):
        return tuple(k for k, _ in self.pairs)

    @property
    def mig(self):
        return "GPU_I_ID" in self.labels

    def __repr__(self):
        inner = ",".join(f'{k}="{v}"' for k, v in self.pairs)
        return f"{self.name}{{{inner}}} {self.value}"


class Exposition:
    """A text-format scrape: its series in order, and the # TYPE and # HELP of each family."""

    def __init__(self, text):
        self.text = text
        self.series = []
        self.type = {}
        self.help = {}
        for line in text.splitlines():
            if line.startswith("# TYPE "):
                _, _, name, typ = line.split(" ", 3)
                self.type[name] = typ
            elif line.startswith("# HELP "):
                parts = line.split(" ", 3)
                self.help[parts[2]] = _unescape_help(parts[3] if len(parts) > 3 else "")
            elif line and not line.startswith("#"):
                self.series.append(_parse_sample(line))

    def of(self, name, **match):
        return [s for s in self.series if s.name == name
                and all(s.labels.get(k) == str(v) for k, v in match.items())]

    def families(self):
        return {s.name for s in self.series}

    def value(self, name, **match):
        found = self.of(name, **match)
        assert len(found) == 1, f"{name} {match}: expected one series, got {found}"
        return found[0].value

    def timestamp(self):
        return self.value("gpumon_sample_timestamp_seconds")


def _unescape_help(text):
    return re.sub(r"\\(.)", lambda m: "\n" if m.group(1) == "n" else m.group(1), text)


def _parse_sample(line):
    m = gu.SAMPLE_RE.match(line)
    assert m, f"malformed sample line: {line!r}"
    raw, pairs, pos = m.group("labels") or "", [], 0
    while pos < len(raw):
        lm = _LABEL_RE.match(raw, pos)
        assert lm, f"malformed labels: {line!r}"
        pairs.append((lm.group(1), lm.group(2)))
        pos = lm.end()
    return Series(m.group("name"), tuple(pairs), float(m.group("value")))


def expose(d, **kw):
    r = d.scrape(**kw)
    assert r.status == 200, r
    return Exposition(r.text())


def wait_exposition(d, what, check, timeout=20):
    """Scrapes until check(exposition) is truthy; returns that exposition."""
    def poll():
        e = expose(d)
        return e if check(e) else None
    return gu.wait_for(poll, timeout, f"{d.name}: {what}")


def has_prof(e):
    """Whether the profiling fields are in (they appear from the second sampling pass on)."""
    return bool(e.of("DCGM_FI_PROF_GR_ENGINE_ACTIVE"))


def xids_in(e):
    """Whether both of the fixture's XIDs have reached DCGM_FI_DEV_XID_ERRORS."""
    return any(s.value == 13 for s in e.of("DCGM_FI_DEV_XID_ERRORS", gpu=5)) and \
        any(s.value == 48 for s in e.of("DCGM_FI_DEV_XID_ERRORS", gpu=6))


# ---- one gpumon on the DGX fixture for the read-only checks ----


@pytest.fixture(scope="module")
def dgx():
    """(fixture dict, Exposition) of one gpumon on dgx-8gpu-mig, scraped once the profiling
    fields and both XIDs are in (or after 20 s, so that tests fail by name, not here)."""
    path = gu.short_tmpdir("gn-parity-")
    fx = gu.load_fixture(FIXTURE)
    gu.hide_pids(fx)
    d = gu.Gpumon(path, fx, name="gpumon-dgx")
    try:
        d.wait_ready()
        try:
            wait_exposition(d, "profiling fields and XIDs", lambda e: has_prof(e) and xids_in(e))
        except AssertionError:
            pass
        yield fx, d
    finally:
        problem = gu.check_stopped(d)
        shutil.rmtree(path, ignore_errors=True)
        assert not problem, problem


@pytest.fixture(scope="module")
def dgx_expo(dgx):
    _, d = dgx
    return expose(d)


def gpus(fx):
    return range(len(fx["gpus"]))


def whole_gpus(fx):
    return [i for i in gpus(fx) if not (fx["gpus"][i].get("mig") or {}).get("enabled")]


# ---- the default counters ----


@pytest.mark.parametrize("counter", facts.DEFAULT_SERIES, ids=lambda c: c.name)
def test_default_counter_on_every_gpu(dgx, dgx_expo, counter):
    """Each of dcgm-exporter's 25 default series is there for every H100: once per GPU, and on
    the GPU in MIG mode once per GPU instance (except where dcgm-exporter has none)."""
    fx, _ = dgx
    problems = []
    for i in whole_gpus(fx):
        found = [s for s in dgx_expo.of(counter.name, gpu=i) if not s.mig]
        if len(found) != 1:
            problems.append(f"GPU {i}: {len(found)} whole-GPU series: {found}")
    found = dgx_expo.of(counter.name, gpu=MIG_GPU)
    if counter.name in facts.NOT_ON_MIG_INSTANCES:
        if found:
            problems.append(f"GPU {MIG_GPU} (MIG): expected none "
                            f"({facts.NOT_ON_MIG_INSTANCES[counter.name]}), got {found}")
    else:
        ids = sorted(s.labels.get("GPU_I_ID", "<none>") for s in found)
        if ids != sorted(MIG_INSTANCES):
            problems.append(f"GPU {MIG_GPU} (MIG): GPU_I_IDs {ids}, expected one series each "
                            f"for {sorted(MIG_INSTANCES)}")
    assert not problems, f"{counter.name}:\n" + "\n".join(problems)


@pytest.mark.parametrize("counter", facts.DEFAULT_SERIES, ids=lambda c: c.name)
def test_default_counter_type_and_help(dgx_expo, counter):
    assert dgx_expo.type.get(counter.name) == counter.type, \
        f"# TYPE {counter.name} {dgx_expo.type.get(counter.name)}, dcgm-exporter: {counter.type}"
    assert dgx_expo.help.get(counter.name) == counter.help, \
        f"# HELP {counter.name} {dgx_expo.help.get(counter.name)!r}, dcgm-exporter: " \
        f"{counter.help!r}"


@pytest.mark.parametrize("counter", facts.DEFAULT_SERIES, ids=lambda c: c.name)
def test_default_counter_label_order(dgx_expo, counter):
    series = dgx_expo.of(counter.name)
    assert series, f"no {counter.name}"
    for s in series:
        assert s.label_names == facts.label_order(counter.name, s.mig), s


def test_gpumon_lacks_no_default_counter(dgx_expo):
    """The whole list at once: the names of dcgm-exporter's default series gpumon does not
    export at all."""
    missing = [c.name for c in facts.DEFAULT_SERIES if c.name not in dgx_expo.families()]
    assert not missing, f"gpumon lacks dcgm-exporter default counters: {missing}"


def test_every_dcgm_series_has_dcgm_labels(dgx_expo):
    """Not only the default counters: every DCGM_FI_* family gpumon shows (FB_TOTAL, ECC,
    clock event reasons...) carries dcgm-exporter's labels in its order."""
    wrong = [s for s in dgx_expo.series if s.name.startswith("DCGM_FI_")
             and s.label_names != facts.label_order(s.name, s.mig)]
    assert not wrong, "\n".join(map(repr, wrong[:20]))


def test_label_values(dgx, dgx_expo):
    fx, _ = dgx
    for s in dgx_expo.series:
        if not s.name.startswith("DCGM_FI_"):
            continue
        want = gu.gpu_labels(fx, int(s.labels["gpu"]))
        got = {k: v for k, v in s.labels.items() if k in want}
        assert got == want, s


def test_new_fields_values(dgx, dgx_expo):
    """FB_RESERVED is the driver's reservation in MiB, VGPU_LICENSE_STATUS is 0 on bare metal,
    NVLINK_BANDWIDTH_TOTAL is MiB/s of both directions (the fake's counters grow at the
    fixture's KiB/s: allow for the sampling jitter)."""
    fx, _ = dgx
    for i in whole_gpus(fx):
        g = fx["gpus"][i]
        assert dgx_expo.value("DCGM_FI_DEV_FB_RESERVED", gpu=i) == g["memory"]["reserved"] // MIB
        assert dgx_expo.value("DCGM_FI_DEV_VGPU_LICENSE_STATUS", gpu=i) == 0
        want = (g["nvlink"]["data_tx_kibps"] + g["nvlink"]["data_rx_kibps"]) / 1024
        got = dgx_expo.value("DCGM_FI_DEV_NVLINK_BANDWIDTH_TOTAL", gpu=i)
        assert got == pytest.approx(want, rel=0.1, abs=1), f"GPU {i}: {got} MiB/s, want {want}"


def test_clocks_event_reasons_dcgm4_name(dgx, dgx_expo):
    """DCGM 4's name; the old THROTTLE name is gone unless asked for."""
    fx, _ = dgx
    assert dgx_expo.value("DCGM_FI_DEV_CLOCKS_EVENT_REASONS", gpu=7) == 0x8  # HwSlowdown
    assert dgx_expo.value("DCGM_FI_DEV_CLOCKS_EVENT_REASONS", gpu=2) == 0x1  # GpuIdle
    assert dgx_expo.type.get("DCGM_FI_DEV_CLOCKS_EVENT_REASONS") == "gauge"
    assert not dgx_expo.of("DCGM_FI_DEV_CLOCK_THROTTLE_REASONS")


# ---- profiling (GPM) ----


def _want_prof(name, metrics):
    v = metrics[GPM_METRIC[name]]
    return v * MIB if name in facts.PROF_RATES else v / 100


@pytest.mark.parametrize("name", sorted(n for n in GPM_METRIC
                                        if n in {c.name for c in facts.DEFAULT_SERIES}))
def test_prof_values(dgx, dgx_expo, name):
    """Ratios are GPM percent / 100, rates GPM MiB/s in bytes/s; a MIG instance shows its own
    GPM metrics."""
    fx, _ = dgx
    for i in whole_gpus(fx):
        want = _want_prof(name, fx["gpus"][i]["gpm"]["metrics"])
        assert dgx_expo.value(name, gpu=i) == pytest.approx(want, rel=1e-4, abs=1e-6), f"GPU {i}"
    if name in facts.NOT_ON_MIG_INSTANCES:
        return
    for inst in fx["gpus"][MIG_GPU]["mig"]["instances"]:
        want = _want_prof(name, inst["gpm_metrics"])
        got = dgx_expo.value(name, gpu=MIG_GPU, GPU_I_ID=inst["gi"])
        assert got == pytest.approx(want, rel=1e-4, abs=1e-6), f"GPU {MIG_GPU} GI {inst['gi']}"


def test_prof_from_second_pass(gpumon):  # noqa: F811
    """The first pass has one GPM sample only, so no profiling values (none shown rather than
    0); the second has them."""
    t0 = time.time()
    d = gpumon(FIXTURE, interval="2s", slow_interval="2s")
    first = expose(d)
    if first.timestamp() < t0 + 1.5:  # still the first pass's snapshot
        assert not [n for n in first.families() if n.startswith("DCGM_FI_PROF_")], \
            "profiling fields in the first pass"
    second = wait_exposition(d, "the second pass", lambda e: e.timestamp() > first.timestamp())
    assert has_prof(second), "no profiling fields in the second pass"


def test_no_prof_without_gpm(gpumon):  # noqa: F811
    """A GeForce RTX 4090 has no GPM (nor DCGM profiling): no DCGM_FI_PROF_* at all."""
    d = gpumon("consumer-1gpu")
    first = expose(d).timestamp()
    e = wait_exposition(d, "two more passes", lambda e: e.timestamp() > first + 0.3)
    assert not [n for n in e.families() if n.startswith("DCGM_FI_PROF_")], e.text
    # The rest of the default counters this GPU has are there.
    for name in ("DCGM_FI_DEV_GPU_UTIL", "DCGM_FI_DEV_FB_RESERVED", "DCGM_FI_DEV_POWER_USAGE"):
        assert e.of(name, gpu=0), name


# ---- XID ----


def test_xid_labels(dgx, dgx_expo):
    fx, _ = dgx
    want = {5: 13, 6: 48}
    for i in gpus(fx):
        code = want.get(i, 0)
        for s in dgx_expo.of("DCGM_FI_DEV_XID_ERRORS", gpu=i):
            assert s.value == code, s
            assert s.labels["err_code"] == str(code), s
            assert s.labels["err_msg"] == facts.XID_MESSAGES[code], s
            assert s.label_names[-2:] == facts.XID_LABELS, s
        assert dgx_expo.of("DCGM_FI_DEV_XID_ERRORS", gpu=i), f"GPU {i}: no XID series"


# ---- MIG layout ----


def test_mig_gpu_has_no_whole_gpu_dcgm_series(dgx_expo):
    """dcgm-exporter's device mode: a GPU in MIG mode with GPU instances shows every DCGM field
    per instance only."""
    parent = [s for s in dgx_expo.series if s.name.startswith("DCGM_FI_")
              and s.labels.get("gpu") == str(MIG_GPU) and not s.mig]
    assert not parent, "\n".join(map(repr, parent))


def test_mig_instances_once_per_field(dgx_expo):
    by_family = {}
    for s in dgx_expo.series:
        if s.name.startswith("DCGM_FI_") and s.labels.get("gpu") == str(MIG_GPU):
            by_family.setdefault(s.name, []).append(s)
    assert by_family, f"no DCGM series for GPU {MIG_GPU}"
    for name, series in by_family.items():
        ids = sorted(s.labels["GPU_I_ID"] for s in series)
        assert ids == sorted(MIG_INSTANCES), f"{name}: {ids}"
        for s in series:
            assert s.labels["GPU_I_PROFILE"] == MIG_INSTANCES[s.labels["GPU_I_ID"]], s


def test_mig_device_wide_fields_repeat_the_gpus_value(dgx, dgx_expo):
    fx, _ = dgx
    g = fx["gpus"][MIG_GPU]
    want = {
        "DCGM_FI_DEV_GPU_TEMP": g["temperature"],
        "DCGM_FI_DEV_MEMORY_TEMP": g["memory_temperature"],
        "DCGM_FI_DEV_POWER_USAGE": g["power_usage_mw"] / 1000,
        "DCGM_FI_DEV_SM_CLOCK": g["clocks"]["sm"],
        "DCGM_FI_DEV_MEM_CLOCK": g["clocks"]["mem"],
        "DCGM_FI_DEV_PCIE_REPLAY_COUNTER": g["pcie_replay"],
        "DCGM_FI_DEV_XID_ERRORS": 0,
        "DCGM_FI_DEV_VGPU_LICENSE_STATUS": 0,
        "DCGM_FI_DEV_CORRECTABLE_REMAPPED_ROWS": g["remapped_rows"]["correctable"],
        "DCGM_FI_DEV_ROW_REMAP_FAILURE": 0,
    }
    for name, value in want.items():
        got = {s.labels["GPU_I_ID"]: s.value for s in dgx_expo.of(name, gpu=MIG_GPU)}
        assert got == {gi: value for gi in MIG_INSTANCES}, name
    # The energy counter grows, but all instances show the one value of the snapshot.
    energy = {s.value for s in dgx_expo.of("DCGM_FI_DEV_TOTAL_ENERGY_CONSUMPTION", gpu=MIG_GPU)}
    assert len(energy) == 1 and energy.pop() >= g["energy_mj"]


def test_mig_framebuffer_is_the_instances(dgx, dgx_expo):
    """FB fields are each instance's own, so summing them per GPU counts nothing twice."""
    fx, _ = dgx
    insts = fx["gpus"][MIG_GPU]["mig"]["instances"]
    for inst in insts:
        gi, mem = inst["gi"], inst["memory"]
        assert dgx_expo.value("DCGM_FI_DEV_FB_USED", gpu=MIG_GPU, GPU_I_ID=gi) == \
            mem["used"] // MIB
        assert dgx_expo.value("DCGM_FI_DEV_FB_FREE", gpu=MIG_GPU, GPU_I_ID=gi) == \
            (mem["total"] - mem["used"] - mem.get("reserved", 0)) // MIB
        assert dgx_expo.value("DCGM_FI_DEV_FB_RESERVED", gpu=MIG_GPU, GPU_I_ID=gi) == \
            mem.get("reserved", 0) // MIB
    # What `sum by (gpu) (DCGM_FI_DEV_FB_USED)` gives: the instances' sum, not that plus the
    # whole GPU's (the GPU's own figure, 40448 MiB, differs from the sum, 39936).
    total = sum(s.value for s in dgx_expo.of("DCGM_FI_DEV_FB_USED", gpu=MIG_GPU))
    assert total == sum(i["memory"]["used"] // MIB for i in insts)


def test_gpumon_families_stay_per_gpu(dgx_expo):
    up = dgx_expo.of("gpumon_gpu_up", gpu=MIG_GPU)
    assert len(up) == 1 and not up[0].mig and up[0].value == 1, up
    for s in dgx_expo.of("gpumon_clock_event_active", gpu=MIG_GPU):
        assert not s.mig, s


# ---- gpumon's own families ----


def test_sample_timestamp_replaces_age_and_scrape_duration(dgx, dgx_expo):
    _, d = dgx
    assert "gpumon_sample_age_seconds" not in dgx_expo.families()
    assert "gpumon_scrape_duration_seconds" not in dgx_expo.families()
    assert dgx_expo.type.get("gpumon_sample_timestamp_seconds") == "gauge"
    e = expose(d)
    assert abs(time.time() - e.timestamp()) < 5, e.timestamp()


def test_scrapes_of_one_snapshot_are_identical(gpumon):  # noqa: F811
    """Every scrape of a snapshot serves the bytes rendered once for it."""
    d = gpumon(FIXTURE, interval="2s", slow_interval="2s")
    for _ in range(20):
        a, b = d.text(), d.text()
        if Exposition(a).timestamp() == Exposition(b).timestamp():
            assert a == b
            return
    pytest.fail("no two scrapes of one snapshot in 20 tries")


# ---- Hostname from NODE_NAME ----


def test_node_name_is_the_hostname(gpumon, monkeypatch):  # noqa: F811
    """dcgm-exporter's Helm chart sets NODE_NAME to the Kubernetes node; with no hostname
    configured it is the Hostname label."""
    real = gu.Proc

    def without_hostname(argv, *args, **kw):
        argv = list(argv)
        i = argv.index("--hostname")
        del argv[i:i + 2]
        return real(argv, *args, **kw)

    monkeypatch.setattr(gu, "Proc", without_hostname)
    d = gpumon(FIXTURE, env={"NODE_NAME": "k8s-node-17"})
    monkeypatch.setattr(gu, "Proc", real)
    e = expose(d)
    hosts = {s.labels.get("Hostname") for s in e.series if s.name.startswith("DCGM_FI_")}
    assert hosts == {"k8s-node-17"}, (hosts, socket.gethostname())


# ---- content type ----


@pytest.mark.parametrize("accept,want", [
    (None, TEXT_TYPE),
    ("*/*", TEXT_TYPE),
    ("text/plain", TEXT_TYPE),
    (facts.PROMETHEUS_2_ACCEPT, TEXT_TYPE),
    (facts.PROMETHEUS_3_ACCEPT, TEXT_TYPE),
    ("application/openmetrics-text;version=1.0.0,*/*;q=0.1", TEXT_TYPE),
    ("application/openmetrics-text; version=1.0.0", "application/openmetrics-text"),
    ("application/openmetrics-text", "application/openmetrics-text"),
], ids=["none", "any", "text", "prometheus2", "prometheus3", "om-or-any", "om-1.0.0", "om"])
def test_content_type(dgx, accept, want):
    """Text 0.0.4 to every client that accepts it (Prometheus included, so that dcgm-exporter's
    counters keep their type); OpenMetrics only to a client that accepts nothing else."""
    _, d = dgx
    r = d.scrape(accept=accept)
    assert r.status == 200, r
    assert r.headers["content-type"].startswith(want), r.headers
    if want == TEXT_TYPE:
        e = Exposition(r.text())
        assert e.type["DCGM_FI_DEV_TOTAL_ENERGY_CONSUMPTION"] == "counter"
        gu.promtool_check(r.text())
    else:
        assert r.text().rstrip().endswith("# EOF"), r.text()[-200:]


# ---- the collectors CSV ----


def start_with_csv(workdir, csv, flag="-f", **kw):  # noqa: F811 - workdir is a path here
    path = workdir / "counters.csv"
    path.write_text(csv)
    fx = gu.load_fixture(FIXTURE)
    gu.hide_pids(fx)
    return path, gu.Gpumon(workdir, fx, name=f"gpumon-csv{time.monotonic_ns()}",
                           args=(flag, str(path)), **kw)


@pytest.fixture
def csv_gpumon(workdir):  # noqa: F811
    started = []

    def start(csv, flag="-f", wait=True):
        path, d = start_with_csv(workdir, csv, flag)
        started.append(d)
        if wait:
            d.wait_ready()
        return path, d

    yield start
    problems = [p for p in (gu.check_stopped(d) for d in started) if p]
    assert not problems, "\n".join(problems)


def dcgm_families(e):
    return {n for n in e.families() if n.startswith("DCGM_FI_")}


def test_collectors_default_csv(csv_gpumon):
    """dcgm-exporter's default CSV selects exactly its 25 series, with its types and help."""
    _, d = csv_gpumon(facts.collectors_csv())
    e = wait_exposition(d, "profiling fields", has_prof)
    assert dcgm_families(e) == {c.name for c in facts.DEFAULT_SERIES}
    for c in facts.DEFAULT_SERIES:
        assert (e.type.get(c.name), e.help.get(c.name)) == (c.type, c.help), c.name
    # The label row keeps the driver version label; gpumon's own families stay.
    assert all(s.labels.get("DCGM_FI_DRIVER_VERSION") for s in e.of("DCGM_FI_DEV_GPU_TEMP"))
    assert {"gpumon_up", "gpumon_gpu_up", "gpumon_sample_timestamp_seconds"} <= e.families()


def test_collectors_subset_long_flag(csv_gpumon):
    rows = [c for c in facts.DEFAULT_COUNTERS
            if c.name in ("DCGM_FI_DEV_GPU_TEMP", "DCGM_FI_DEV_POWER_USAGE",
                          "DCGM_FI_DRIVER_VERSION")]
    _, d = csv_gpumon(facts.collectors_csv(rows), flag="--collectors")
    e = expose(d)
    assert dcgm_families(e) == {"DCGM_FI_DEV_GPU_TEMP", "DCGM_FI_DEV_POWER_USAGE"}
    assert "gpumon_up" in e.families()


def test_collectors_from_environment(workdir, gpumon):  # noqa: F811
    """dcgm-exporter's DCGM_EXPORTER_COLLECTORS names the file when no flag does."""
    rows = [c for c in facts.DEFAULT_COUNTERS
            if c.name in ("DCGM_FI_DEV_SM_CLOCK", "DCGM_FI_DRIVER_VERSION")]
    path = workdir / "env-counters.csv"
    path.write_text(facts.collectors_csv(rows))
    d = gpumon(FIXTURE, env={"DCGM_EXPORTER_COLLECTORS": str(path)})
    assert dcgm_families(expose(d)) == {"DCGM_FI_DEV_SM_CLOCK"}


def test_dcgm3_clock_name_on_request(gpumon, csv_gpumon):  # noqa: F811
    """DCGM 3's DCGM_FI_DEV_CLOCK_THROTTLE_REASONS: with dcgm3_names = yes beside the DCGM 4
    name, or alone when a collectors file lists it."""
    d = gpumon(FIXTURE, config={"dcgm3_names": "yes"})
    e = expose(d)
    for name in ("DCGM_FI_DEV_CLOCKS_EVENT_REASONS", "DCGM_FI_DEV_CLOCK_THROTTLE_REASONS"):
        assert e.value(name, gpu=7) == 0x8, name
        assert e.type[name] == "gauge", name
    row = facts.Counter("DCGM_FI_DEV_CLOCK_THROTTLE_REASONS", "gauge",
                        "Frequency throttling reasons.")
    _, d = csv_gpumon(facts.collectors_csv([row]))
    e = expose(d)
    assert dcgm_families(e) == {"DCGM_FI_DEV_CLOCK_THROTTLE_REASONS"}
    assert e.value("DCGM_FI_DEV_CLOCK_THROTTLE_REASONS", gpu=7) == 0x8


def test_collectors_off_by_default_prof(csv_gpumon):
    """The profiling fields dcgm-exporter ships commented out, turned on in a CSV: gauges on
    every GPM GPU, ratios 0..1 and bytes/s from the GPM metrics; the NVLink and PCIe rates not
    on MIG instances."""
    csv = facts.collectors_csv(facts.DEFAULT_COUNTERS + tuple(
        c if c.help_known else facts.Counter(c.name, c.type, "Off by default in dcgm-exporter.")
        for c in facts.OFF_BY_DEFAULT_PROF))
    _, d = csv_gpumon(csv)
    e = wait_exposition(d, "profiling fields", has_prof)
    fx = gu.load_fixture(FIXTURE)
    for c in facts.OFF_BY_DEFAULT_PROF:
        assert e.type.get(c.name) == "gauge", c.name
        if c.help_known:
            assert e.help.get(c.name) == c.help, c.name
        for i in whole_gpus(fx):
            want = _want_prof(c.name, fx["gpus"][i]["gpm"]["metrics"])
            assert e.value(c.name, gpu=i) == pytest.approx(want, rel=1e-4, abs=1e-6), \
                (c.name, i)
        on_mig = e.of(c.name, gpu=MIG_GPU)
        if c.name in facts.NOT_ON_MIG_INSTANCES:
            assert not on_mig, on_mig
        else:
            assert sorted(s.labels["GPU_I_ID"] for s in on_mig) == sorted(MIG_INSTANCES), c.name
        for s in e.of(c.name):
            assert s.label_names == facts.label_order(c.name, s.mig), s
            if c.name in facts.PROF_RATIOS:
                assert 0 <= s.value <= 1, s


def test_collectors_unknown_field_fails_naming_the_line(workdir):  # noqa: F811
    rows = list(facts.DEFAULT_COUNTERS[:3])
    rows.insert(1, facts.Counter("DCGM_FI_DEV_NO_SUCH_FIELD", "gauge", "Not a DCGM field."))
    path, d = start_with_csv(workdir, facts.collectors_csv(rows))
    # The header is 3 comment lines; the bad row is the second row: line 5.
    try:
        rc = d.proc.wait(15)
    finally:
        problem = gu.check_stopped(d)
    log = d.proc.log()
    assert not problem, problem
    assert rc > 0, f"gpumon exited {rc} with an unknown field in its collectors file:\n{log}"
    assert "DCGM_FI_DEV_NO_SUCH_FIELD" in log, log
    assert re.search(r"(:|line )5\b", log), f"the line number (5) is not named:\n{log}"
