"""The shipped dashboard and rules against a real gpumon: a real Prometheus scrapes gpumon on the
fake NVML, and every panel query of deploy/grafana/*.json and every rule of
deploy/prometheus/*rules*.yml runs on what it stored.

test_deploy.py checks the same files against static expositions (no build needed); this module
meets what gpumon really serves, in its real layout: dcgm-exporter's MIG layout (a GPU in MIG
mode has series per MIG instance only, device-wide values repeated on each), the profiling
fields from GPM, the XID labels, and the metric types Prometheus records from the text format.

Fixtures: dgx-8gpu-mig (8 x H100 with GPM; GPU 3 in MIG mode with three instances; XID 13 on
GPU 5, XID 48 on GPU 6, which also has ECC errors and remapped rows; GPU 7 in HW slowdown) and
consumer-1gpu (a GeForce RTX 4090: no GPM, ECC, MIG or NVLink).
"""

import json
import re
import shutil
import urllib.error
import urllib.parse
import urllib.request
from pathlib import Path

import pytest

import dcgm_exporter_facts as facts
import gpumonutil as gu

REPO = Path(__file__).resolve().parents[3]
DASHBOARDS = sorted((REPO / "deploy" / "grafana").glob("*.json"))
RULE_FILES = sorted((REPO / "deploy" / "prometheus").glob("*rules*.yml"))
RULE_FILES = [p for p in RULE_FILES if not p.name.endswith(".test.yml")]
MIB = 1 << 20

# Metric names as the deployment writes them; gpumon's are those with its prefixes.
METRIC_RE = re.compile(r"\b(?:DCGM_FI_[A-Z0-9_]+|DCGM_EXP_[A-Z0-9_]+|gpumon_[a-z0-9_]+"
                       r"|coold_[a-z0-9_]+|gpuq_[a-z0-9_]+|node_[a-z0-9_]+)\b")
GPUMON_PREFIXES = ("DCGM_", "gpumon_")


# ---- the queries of the deployment ----


def grafana_to_promql(expr):
    """A panel query with Grafana's variables replaced: every node and GPU, a 1m rate window
    (enough for the 1 s scrapes of this test)."""
    expr = re.sub(r"\$__(rate_interval|interval|range)\b", "1m", expr)
    expr = re.sub(r"\$\{?(instance|gpu)(:[a-z]+)?\}?", ".+", expr)
    return expr


def panels(dash):
    for p in dash["panels"]:
        yield p
        yield from p.get("panels", [])


class Target:
    """One panel query."""

    def __init__(self, path, panel, target):
        self.path = path
        self.panel = panel
        self.target = target
        self.expr = target["expr"]
        self.promql = grafana_to_promql(self.expr)
        self.metrics = set(METRIC_RE.findall(self.expr))

    @property
    def id(self):
        return f"{self.path.stem}:{self.panel['id']}{self.target['refId']}:{self.panel['title']}"

    @property
    def gpumon_metrics(self):
        return {m for m in self.metrics if m.startswith(GPUMON_PREFIXES)}

    def lacking(self, exposed):
        """The gpumon metrics the query needs and `exposed` lacks: those of the `or` alternative
        that lacks the fewest (an alternative without gpumon metrics, vector(0), needs none)."""
        return min(({m for m in METRIC_RE.findall(part) if m.startswith(GPUMON_PREFIXES)}
                    - exposed for part in re.split(r"\bor\b", self.expr)), key=len)

    def legend(self, labels):
        fmt = self.target.get("legendFormat") or ""
        return re.sub(r"\{\{\s*(\w+)\s*\}\}", lambda m: labels.get(m.group(1), ""), fmt)


def dashboard_targets():
    out = []
    for path in DASHBOARDS:
        for p in panels(json.loads(path.read_text())):
            for t in p.get("targets", []):
                if t.get("expr", "").strip():
                    out.append(Target(path, p, t))
    return out


def variable_queries():
    """(name, series selector) of every label_values() query variable."""
    out = []
    for path in DASHBOARDS:
        for v in json.loads(path.read_text())["templating"]["list"]:
            if v["type"] != "query":
                continue
            q = v["query"]["query"] if isinstance(v["query"], dict) else v["query"]
            m = re.fullmatch(r"label_values\((.+),\s*(\w+)\)", q)
            assert m, f"{path.name}: variable {v['name']}: {q}"
            name = f"{path.stem}:{v['name']}"
            out.append(pytest.param(name, grafana_to_promql(m.group(1)), m.group(2), id=name))
    return out


def rule_names():
    """(file, name) of every alert and recording rule; Prometheus, which loads the files, says
    what each one is."""
    out = []
    for path in RULE_FILES:
        for name in re.findall(r"^\s+- (?:alert|record): (\S+)$", path.read_text(), re.M):
            out.append((path.name, name))
    return out


TARGETS = dashboard_targets()
GPUMON_TARGETS = [t for t in TARGETS if t.gpumon_metrics]
RULE_NAMES = rule_names()


# ---- gpumon and Prometheus ----


class Stack:
    def __init__(self, fixture, gpumon, prom, exposed):
        self.fixture = fixture
        self.gpumon = gpumon
        self.prom = prom
        self.exposed = exposed  # gpumon's families when the data was complete

    def query(self, promql):
        return self.prom.query(promql)


def start_stack(fixture_name, ready):
    """gpumon on a fixture and Prometheus scraping it, until `ready` queries return data and a
    few scrapes are stored. A generator for a pytest fixture: yields the Stack, then stops both
    (gpumon must exit cleanly)."""
    if not shutil.which("prometheus"):
        pytest.fail("prometheus is missing: scripts/install-deps.sh installs it")
    workdir = gu.short_tmpdir("gn-dash-")
    fx = gu.load_fixture(fixture_name)
    gu.hide_pids(fx)
    d = gu.Gpumon(workdir, fx, name=f"gpumon-{fixture_name}")
    prom = None
    try:
        d.wait_ready()
        prom = gu.Prometheus(workdir, d.port, RULE_FILES)
        prom.wait("up", lambda r: len(r) == 1 and r[0]["value"][1] == "1")
        # rate() and increase() over a minute want several samples.
        prom.wait("count_over_time(up[1m]) >= 5", lambda r: len(r) == 1)
        gu.wait_for(lambda: all(not r["lastEvaluation"].startswith("0001")
                                for r in prom.rules().values()), 20, "every rule evaluated")
        for promql in ready:
            try:
                prom.wait(promql, bool, timeout=20)
            except AssertionError:
                pass  # the test that needs it fails by name
        exposed = {name for name, _ in gu.parse_metrics(d.text())}
        yield Stack(fx, d, prom, exposed)
    finally:
        if prom:
            prom.proc.stop()
        problem = gu.check_stopped(d)
        shutil.rmtree(workdir, ignore_errors=True)
        assert not problem, problem


@pytest.fixture(scope="module")
def dgx():
    yield from start_stack("dgx-8gpu-mig", [
        "DCGM_FI_PROF_GR_ENGINE_ACTIVE", 'DCGM_FI_DEV_XID_ERRORS{err_code="48"}',
        'gpumon_xid_errors_total{xid="48"}', "DCGM_FI_DEV_NVLINK_BANDWIDTH_TOTAL"])


@pytest.fixture(scope="module")
def consumer():
    yield from start_stack("consumer-1gpu", [])


# ---- dashboard panels ----


def check_target(stack, t):
    result = stack.query(t.promql)
    assert result, f"no data for {t.id}:\n  {t.promql}"
    # Each line of a graph is one GPU or MIG instance: a query that lets MIG instances repeat a
    # device-wide value draws that GPU several times under one legend.
    if t.target.get("format", "time_series") == "time_series" and t.target.get("legendFormat"):
        legends = [t.legend(r["metric"]) for r in result]
        twice = sorted({x for x in legends if legends.count(x) > 1})
        assert not twice, f"{t.id}: several series under the legend {twice}:\n  {t.promql}\n" \
                          f"  {[r['metric'] for r in result]}"
    return result


@pytest.mark.parametrize("t", GPUMON_TARGETS, ids=lambda t: t.id)
def test_panel_has_data_dgx(dgx, t):
    """On the DGX fixture every panel on gpumon's metrics shows something: the fixture has data
    for all of them (panels on coold's, gpuqd's or node_exporter's metrics alone are left to
    test_deploy.py)."""
    check_target(dgx, t)


def test_panels_have_data_consumer(consumer):
    """On the consumer GPU, every panel whose metrics gpumon shows for it; a panel without data
    lacks only what that GPU really does not have (no ECC, no GPM, no NVLink, no XID yet)."""
    fx = consumer.fixture
    absent = {family for family, v in gu.expected_gpu(fx, 0).items() if v is None}
    if not any(g.get("events") for g in fx["gpus"]):
        absent |= {"gpumon_xid_errors_total", "gpumon_xid_last_seen_timestamp_seconds"}
    drawn = []
    for t in GPUMON_TARGETS:
        lacking = t.lacking(consumer.exposed)
        assert lacking <= absent, f"{t.id}: gpumon lacks {sorted(lacking - absent)} for a " \
                                  f"{fx['gpus'][0]['name']}, which has it"
        if not lacking:
            check_target(consumer, t)
            drawn.append(t.id)
    assert len(drawn) >= 10, drawn


@pytest.mark.parametrize("name,selector,label", variable_queries())
def test_variables_have_values(dgx, name, selector, label):
    result = dgx.query(selector)
    assert result and all(label in r["metric"] for r in result), f"{name}: {selector}"


def stat(stack, title):
    t = next(t for t in TARGETS if t.panel["title"] == title)
    result = check_target(stack, t)
    assert len(result) == 1, result
    return float(result[0]["value"][1])


def test_overview_counts_each_gpu_once(dgx):
    """The overview's sums see the MIG GPU once, not once per MIG instance."""
    gpus = dgx.fixture["gpus"]
    assert stat(dgx, "GPUs") == len(gpus)
    assert stat(dgx, "GPU power") == pytest.approx(sum(g["power_usage_mw"] for g in gpus) / 1000)
    # Busy: utilisation above 10 %, or for the MIG GPU an instance's graphics engine.
    busy = [i for i, g in enumerate(gpus) if g["utilization"]["gpu"] > 10
            or any(x["gpm_metrics"]["graphics_util"] > 10
                   for x in (g.get("mig") or {}).get("instances", []))]
    assert stat(dgx, "Busy GPUs") == len(busy)


def test_framebuffer_sums_count_nothing_twice(dgx):
    """sum by (gpu) of the framebuffer gives each GPU's memory once: for the MIG GPU the sum of
    its instances."""
    used = {r["metric"]["gpu"]: float(r["value"][1])
            for r in dgx.query("sum by (gpu) (DCGM_FI_DEV_FB_USED)")}
    want = {}
    for i, g in enumerate(dgx.fixture["gpus"]):
        insts = (g.get("mig") or {}).get("instances")
        want[str(i)] = (sum(x["memory"]["used"] // MIB for x in insts) if insts
                        else g["memory"]["used"] // MIB)
    assert used == want


# ---- rules ----


@pytest.mark.parametrize("path,name", RULE_NAMES, ids=[f"{p}:{n}" for p, n in RULE_NAMES])
def test_rule_evaluates(dgx, path, name):
    """Every alert and recording rule loads and evaluates without error on gpumon's data."""
    rule = dgx.prom.rules().get(name)
    assert rule, f"{path}: {name} not loaded"
    assert rule["health"] == "ok" and not rule.get("lastError"), (path, rule)


def firing(stack, name):
    """What the alert's expression returns now: the series it fires (or will, after its
    `for:`) for."""
    return stack.query(stack.prom.rules()[name]["query"])


def test_critical_xid_alert_fires_for_the_double_bit_ecc_error(dgx):
    got = {(r["metric"]["gpu"], r["metric"]["xid"]) for r in firing(dgx, "GpuCriticalXid")}
    assert got == {("6", "48")}


def test_xid_alert_selects_err_code(dgx):
    """The XID by err_code, as dcgm-exporter users select it, with dcgm-exporter's text."""
    assert "err_code" in dgx.prom.rules()["GpuXidReported"]["query"]
    got = {(r["metric"]["gpu"], r["metric"]["err_code"], r["metric"]["err_msg"])
           for r in firing(dgx, "GpuXidReported")}
    assert got == {("5", "13", facts.XID_MESSAGES[13])}
    # The XID 48 is in Prometheus under its err_code too (GpuCriticalXid counts it).
    xid48 = dgx.query('DCGM_FI_DEV_XID_ERRORS{err_code="48"}')
    assert [(r["metric"]["gpu"], r["metric"]["err_msg"]) for r in xid48] == [
        ("6", facts.XID_MESSAGES[48])]


def test_slowdown_alert_fires_for_hw_slowdown(dgx):
    got = {(r["metric"]["gpu"], r["metric"]["reason"]) for r in firing(dgx, "GpuClockSlowdown")}
    assert got == {("7", "hw_slowdown")}


def test_remapped_rows_alert_fires(dgx):
    got = [(r["metric"]["gpu"], float(r["value"][1]))
           for r in firing(dgx, "GpuUncorrectableRowsRemapped")]
    assert got == [("6", dgx.fixture["gpus"][6]["remapped_rows"]["uncorrectable"])]


def test_busy_and_full_alerts(dgx):
    gpus = dgx.fixture["gpus"]
    util = {r["metric"]["gpu"] for r in firing(dgx, "GpuUtilizationHigh")}
    assert util == {str(i) for i, g in enumerate(gpus)
                    if g["utilization"]["gpu"] > 90 and not g["mig"]["enabled"]}
    full = {r["metric"]["gpu"] for r in firing(dgx, "GpuMemoryAlmostFull")}
    assert full == {"7"}  # 79360 MiB used, 1686 free


@pytest.mark.parametrize("name", [
    "GpuLost", "GpuUncorrectableEccError", "GpuRowRemapFailure", "GpuRowRemapPending",
    "GpuTemperatureHigh", "GpumonNvmlDown", "GpumonStale"])
def test_quiet_alerts(dgx, name):
    assert firing(dgx, name) == [], name


def test_alerts_fire_once_per_gpu(dgx):
    """No alert on a device-wide field fires once per MIG instance: with the thresholds taken
    out of every GPU alert, each GPU has at most one series per alert and extra labels, and
    only the framebuffer alert (each instance's own memory) keeps GPU_I_ID."""
    checked = 0
    for name, rule in dgx.prom.rules().items():
        if rule["type"] != "alerting" or "DCGM_FI_" not in rule["query"] or \
                name == "GpuMemoryAlmostFull":
            continue
        # The comparison at the end is what fires; without it every GPU shows.
        expr = re.sub(r"\s*(==|>|<)\s*[0-9.]+\s*$", "", rule["query"].strip())
        assert expr != rule["query"].strip() or name == "GpuXidReported", (name, expr)
        result = dgx.query(expr)
        for r in result:
            assert "GPU_I_ID" not in r["metric"], (name, r["metric"])
        gpu3 = [r for r in result if r["metric"].get("gpu") == "3"]
        assert len(gpu3) <= 1, (name, gpu3)
        checked += 1
    assert checked >= 5


def test_recording_rules_per_gpu(dgx):
    """The gpu: aggregates have one series per physical GPU, the MIG one included, and the
    node's power counts the MIG GPU once."""
    gpus = dgx.fixture["gpus"]
    recorded = {n: r["query"] for n, r in dgx.prom.rules().items() if r["type"] == "recording"}
    for name, expr in recorded.items():
        if name.startswith("gpu:") and "GPU_UTIL" not in name:
            got = sorted(r["metric"]["gpu"] for r in dgx.query(expr))
            assert got == sorted(str(i) for i in range(len(gpus))), name
    ratio = {r["metric"]["gpu"]: float(r["value"][1])
             for r in dgx.query(recorded["gpu:DCGM_FI_DEV_FB_USED:ratio_avg_5m"])}
    insts = gpus[3]["mig"]["instances"]
    used = sum(x["memory"]["used"] // MIB for x in insts)
    free = sum((x["memory"]["total"] - x["memory"]["used"]) // MIB for x in insts)
    assert ratio["3"] == pytest.approx(used / (used + free), rel=1e-3)
    power = dgx.query(recorded["instance:DCGM_FI_DEV_POWER_USAGE:sum_avg_5m"])
    assert float(power[0]["value"][1]) == pytest.approx(
        sum(g["power_usage_mw"] for g in gpus) / 1000)


# ---- what Prometheus recorded about the families ----


@pytest.mark.parametrize("counter", facts.DEFAULT_SERIES, ids=lambda c: c.name)
def test_prometheus_metadata(dgx, counter):
    """Prometheus scraped text 0.0.4, so it keeps dcgm-exporter's types (a counter stays a
    counter, not "unknown" as an OpenMetrics counter without _total would be) and help."""
    status, data = dgx.prom.api("metadata", metric=counter.name)
    assert status == "success", data
    assert data.get(counter.name), f"Prometheus has no metadata for {counter.name}: {data}"
    meta = data[counter.name][0]
    assert (meta["type"], meta["help"]) == (counter.type, counter.help)


def test_prometheus_metadata_gpumon_counters(dgx):
    status, data = dgx.prom.api("metadata", metric="gpumon_xid_errors_total")
    assert status == "success" and data["gpumon_xid_errors_total"][0]["type"] == "counter", data
