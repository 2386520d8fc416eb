"""The monitoring deployment in deploy/ works as shipped: both Prometheus configurations load
with their rule files, the alert and recording rules pass their promtool unit tests, every
query of the Grafana dashboard parses, and every metric name the rules, their tests and the
dashboard use is one that gpumon, coold, gpuqd or node_exporter really exports (a typo there makes an
alert that can never fire and a panel that is always empty, which no parser notices).

Last, a real Prometheus runs prometheus.yml with the rule files against static expositions in
the exporters' layout, so that relabelling, recording rules, alerts and dashboard queries meet
what a scrape really stores.

This module needs nothing built: it reads deploy/ and the exporters' sources (for their metric
names) and runs promtool and prometheus, hence the no_build mark.
"""

import http.server
import json
import re
import shutil
import socket
import subprocess
import threading
import time
import urllib.error
from pathlib import Path

import pytest

import gpumonutil

pytestmark = pytest.mark.no_build

REPO = Path(__file__).resolve().parents[3]
DEPLOY = REPO / "deploy"
PROM = DEPLOY / "prometheus"
DASHBOARD = DEPLOY / "grafana" / "gpunode.json"
UNIT = DEPLOY / "systemd" / "gpumon.service"

# The series that recording-rules.yml records and prometheus-longterm.yml federates.
FEDERATED = re.compile(r".+:.+_5m")
# Metric names of the exporters, as they appear in PromQL or in prose.
METRIC_NAME = re.compile(r"\b(?:DCGM_FI_[A-Z0-9_]+|gpumon_[a-z0-9_]+|coold_[a-z0-9_]+"
                         r"|gpuq_[a-z0-9_]+|node_[a-z0-9_]+)\b")
# node_exporter's metrics that the deployment uses (its names are not in this tree), and words
# that look like metric names but name programs.
NODE_EXPORTER_METRICS = {"node_filesystem_avail_bytes", "node_filesystem_size_bytes"}
NOT_METRICS = {"node_exporter"}


# ---- helpers ----


@pytest.fixture(scope="module")
def promtool():
    path = shutil.which("promtool") or "/usr/bin/promtool"
    if not Path(path).exists():
        pytest.fail("promtool is missing: scripts/install-deps.sh installs package prometheus")
    return path


def run(cmd, cwd=PROM):
    out = subprocess.run(cmd, cwd=cwd, capture_output=True, text=True, timeout=120)
    return out.returncode, out.stdout + out.stderr


def c_string_literals(path, pattern):
    """The string literals of a C source that match pattern entirely."""
    return {m for m in re.findall(r'"([^"\\]*)"', path.read_text()) if re.fullmatch(pattern, m)}


def gpuq_sample_names():
    """gpuqd's metric names: its families (string literals of metrics.c), but the counters as
    their samples name them (with _total), and the wait histogram's series."""
    families = c_string_literals(REPO / "gpuq" / "gpuqd" / "metrics.c", r"gpuq_[a-z0-9_]+")
    assert {"gpuq_jobs", "gpuq_preemptions", "gpuq_job_wait_seconds"} <= families, \
        "gpuq/gpuqd/metrics.c not found"
    counters = {"gpuq_preemptions", "gpuq_retries"}
    return (families - counters) | {f"{c}_total" for c in counters} | {
        f"gpuq_job_wait_seconds_{s}" for s in ("bucket", "sum", "count")}


@pytest.fixture(scope="module")
def exported_names():
    """Every metric name the deployment may use: gpumon's, coold's and gpuqd's from their sources
    (the names are string literals there), node_exporter's from the list above."""
    gpumon = set()
    for src in (REPO / "gpumon").glob("*.c"):
        gpumon |= c_string_literals(src, r"DCGM_FI_[A-Z0-9_]+|gpumon_[a-z0-9_]+")
    coold = c_string_literals(REPO / "coolant" / "coold" / "metrics.c", r"coold_[a-z0-9_]+")
    # The sources must be where this test looks, or every name would count as unknown.
    assert "DCGM_FI_DEV_GPU_UTIL" in gpumon and "gpumon_up" in gpumon, "gpumon/*.c not found"
    assert "coold_controller_up" in coold, "coolant/coold/metrics.c not found"
    return gpumon | coold | gpuq_sample_names() | NODE_EXPORTER_METRICS


def dashboard():
    return json.loads(DASHBOARD.read_text())


def all_panels(dash):
    """Top-level panels and those inside collapsed rows."""
    for p in dash["panels"]:
        yield p
        yield from p.get("panels", [])


def grafana_to_promql(expr):
    """Replaces Grafana's variables with values PromQL accepts where they are used: intervals
    inside [...] and label values inside quotes."""
    expr = re.sub(r"\$__(rate_interval|interval|range)\b", "5m", expr)
    return re.sub(r"\$\{[A-Za-z0-9_]+(:[a-z]+)?\}|\$[A-Za-z_][A-Za-z0-9_]*", "x", expr)


def dashboard_queries(dash):
    """(name, PromQL) of every panel target and of every query variable (the series selector
    of label_values(selector, label))."""
    for p in all_panels(dash):
        for t in p.get("targets", []):
            yield f"dashboard:panel_{p['id']}:{t['refId']}", t["expr"]
    for v in dash["templating"]["list"]:
        if v["type"] != "query":
            continue
        q = v["query"]["query"] if isinstance(v["query"], dict) else v["query"]
        m = re.fullmatch(r"label_values\((.+),\s*[A-Za-z_][A-Za-z0-9_]*\)", q)
        assert m, f"variable {v['name']}: {q} is not label_values(selector, label)"
        yield f"dashboard:variable:{v['name']}", m.group(1)


def check_promql(promtool, tmp_path, queries):
    """Runs promtool check rules on the queries written as recording rules; returns (rc,
    output). JSON is YAML, so the rule file needs no YAML writer."""
    rules = {"groups": [{"name": "queries", "rules": [
        {"record": name, "expr": grafana_to_promql(expr)} for name, expr in queries]}]}
    path = tmp_path / "queries.rules.json"
    path.write_text(json.dumps(rules, indent=1))
    return run([promtool, "check", "rules", str(path)], cwd=tmp_path)


def unit_settings(path):
    """(section, key) -> [values] of a systemd unit; keys may repeat."""
    settings, section = {}, None
    for line in path.read_text().splitlines():
        line = line.strip()
        if not line or line.startswith(("#", ";")):
            continue
        if line.startswith("["):
            section = line.strip("[]")
            continue
        key, _, value = line.partition("=")
        settings.setdefault((section, key), []).append(value)
    return settings


def scrape_targets(config_text):
    """job_name -> the targets of its static_configs, from our own prometheus.yml's layout."""
    jobs = {}
    for block in re.split(r"\n  - job_name: ", config_text)[1:]:
        name = block.split("\n", 1)[0].strip()
        jobs[name] = re.findall(r"'([^']+:[0-9]+)'", "".join(
            re.findall(r"targets: \[([^\]]*)\]", block)))
    return jobs


# ---- Prometheus configuration ----


@pytest.mark.parametrize("config", ["prometheus.yml", "prometheus-longterm.yml"])
def test_prometheus_config_is_valid(promtool, config):
    rc, out = run([promtool, "check", "config", config])
    assert rc == 0, out


def test_raw_prometheus_loads_every_rule_file(promtool):
    rc, out = run([promtool, "check", "config", "prometheus.yml"])
    assert rc == 0, out
    loaded = set(re.findall(r"Checking (\S+-rules\.yml)", out))
    assert loaded == {p.name for p in PROM.glob("*-rules.yml")}, out


def test_scrape_targets_are_the_exporters_ports():
    jobs = scrape_targets((PROM / "prometheus.yml").read_text())
    assert set(jobs) == {"gpumon", "coold", "gpuq", "node"}
    coold_listen = re.search(r"^listen\s*=\s*\S+:([0-9]+)\s*$",
                             (DEPLOY / "coold.conf.example").read_text(), re.M)
    assert coold_listen, "no [metrics] listen in deploy/coold.conf.example"
    # gpuqd's default (the one it uses without a config) and the example config's.
    gpuq_default = re.search(r'GPUQD_DEFAULT_METRICS_LISTEN\s+"\S+:([0-9]+)"',
                             (REPO / "gpuq" / "policy" / "gpuq-config.h").read_text())
    gpuq_example = re.search(r"^metrics_listen\s*=\s*\S+:([0-9]+)\s*$",
                             (DEPLOY / "gpuq" / "gpuqd.conf").read_text(), re.M)
    assert gpuq_default and gpuq_example, "gpuqd's metrics_listen not found"
    assert gpuq_default.group(1) == gpuq_example.group(1)
    assert jobs["gpumon"] == ["localhost:9400"]  # gpumon's default, dcgm-exporter's port
    assert jobs["coold"] == [f"localhost:{coold_listen.group(1)}"]
    assert jobs["gpuq"] == [f"localhost:{gpuq_default.group(1)}"]
    assert jobs["node"] == ["localhost:9100"]


def test_retention_plan():
    raw = (PROM / "prometheus.yml").read_text()
    longterm = (PROM / "prometheus-longterm.yml").read_text()
    readme = (PROM / "README.md").read_text()
    assert "--storage.tsdb.retention.time=7d" in raw
    assert "--storage.tsdb.retention.time=30d" in longterm
    for flag in ("--storage.tsdb.retention.time=7d", "--storage.tsdb.retention.time=30d",
                 "--config.file=/etc/prometheus/prometheus.yml",
                 "--config.file=/etc/prometheus/prometheus-longterm.yml"):
        assert flag in readme, flag
    # The long-term instance federates the recorded series and nothing else.
    assert "metrics_path: /federate" in longterm
    assert re.findall(r"^\s+- '(\{.*\})'$", longterm, re.M) == ['{__name__=~".+:.+_5m"}']
    assert "honor_labels: true" in longterm


def test_every_recorded_series_is_federated():
    names = re.findall(r"^\s+- record: (\S+)$", (PROM / "recording-rules.yml").read_text(),
                       re.M)
    assert len(names) >= 10
    for name in names:
        assert FEDERATED.fullmatch(name), f"{name} would not reach the long-term Prometheus"
    assert len(set(names)) == len(names)


# ---- rules ----


def test_rule_files_are_valid(promtool):
    rc, out = run([promtool, "check", "rules", "gpu-rules.yml", "recording-rules.yml"])
    assert rc == 0, out


@pytest.mark.parametrize("tests", ["gpu-rules.test.yml", "recording-rules.test.yml"])
def test_rules_behave_as_specified(promtool, tests):
    rc, out = run([promtool, "test", "rules", tests])
    assert rc == 0, out


def test_every_alert_has_severity_and_is_tested():
    rules = (PROM / "gpu-rules.yml").read_text()
    tests = (PROM / "gpu-rules.test.yml").read_text()
    alerts = re.findall(r"^\s+- alert: (\S+)$", rules, re.M)
    assert len(alerts) == len(set(alerts))
    coold_alerts = re.findall(r"^\s+- alert: (\S+)$",
                              (PROM / "coold-rules.yml").read_text(), re.M)
    assert not set(alerts) & set(coold_alerts), "alerts duplicated from coold-rules.yml"
    # Each rule block names a severity and both annotations.
    for block in re.split(r"\n(?= +- alert: )", rules)[1:]:
        name = re.search(r"- alert: (\S+)", block).group(1)
        assert re.search(r"severity: (critical|warning|info)\b", block), name
        assert "summary:" in block and "description:" in block, name
        # Firing is checked with the labels and annotations (exp_alerts with exp_labels).
        firing = re.search(rf"alertname: {name}\n\s+exp_alerts:\n\s+- exp_labels:", tests)
        silent = re.search(rf"alertname: {name}\n\s+exp_alerts: \[\]", tests)
        assert firing and silent, f"{name}: needs a firing and a silent case in the test file"


# ---- names ----


@pytest.mark.parametrize("path", [
    "deploy/prometheus/gpu-rules.yml", "deploy/prometheus/gpu-rules.test.yml",
    "deploy/prometheus/recording-rules.yml", "deploy/prometheus/recording-rules.test.yml",
    "deploy/prometheus/coold-rules.yml", "deploy/prometheus/README.md",
    "deploy/grafana/gpunode.json"])
def test_metric_names_exist(exported_names, path):
    used = set(METRIC_NAME.findall((REPO / path).read_text())) - NOT_METRICS
    assert used, f"{path} names no metric"
    assert not used - exported_names, f"{path}: no exporter has {sorted(used - exported_names)}"


def test_clock_event_reasons_exist():
    """The reason label values the rules and the dashboard select are gpumon's."""
    known = set()
    for src in (REPO / "gpumon").glob("*.c"):
        known |= c_string_literals(src, r"[a-z_]+_(slowdown|cap|idle|clocks|boost|setting)"
                                        r"|hw_slowdown|display_clock|applications_clocks")
    assert {"hw_thermal_slowdown", "sw_power_cap"} <= known, "gpumon's reasons not found"
    text = (PROM / "gpu-rules.yml").read_text() + DASHBOARD.read_text()
    used = set()
    for alternatives in re.findall(r'reason[!=]~?\\?"([^"\\]+)\\?"', text):
        used |= set(alternatives.split("|"))
    assert {"hw_thermal_slowdown", "sw_thermal_slowdown", "hw_power_brake_slowdown"} <= used
    assert not used - known, f"unknown reasons {sorted(used - known)}"


# ---- Grafana dashboard ----


def test_dashboard_queries_parse(promtool, tmp_path):
    queries = list(dashboard_queries(dashboard()))
    assert len(queries) >= 25
    rc, out = check_promql(promtool, tmp_path, queries)
    assert rc == 0, out
    assert f"SUCCESS: {len(queries)} rules found" in out, out


def test_query_check_rejects_a_broken_query(promtool, tmp_path):
    """The check above would catch a broken query (and Grafana's variables are replaced, not
    left to break every query)."""
    rc, out = check_promql(promtool, tmp_path, [
        ("a:ok", 'rate(gpumon_xid_errors_total{instance=~"$instance"}[$__rate_interval])'),
        ("a:broken", 'sum(rate(DCGM_FI_DEV_GPU_UTIL{gpu=~"${gpu}"}[5m])')])
    assert rc != 0 and "a:broken" in out and "a:ok" not in out, out


def test_dashboard_structure():
    dash = dashboard()
    assert dash["schemaVersion"] >= 36
    variables = {v["name"]: v for v in dash["templating"]["list"]}
    assert variables["datasource"]["type"] == "datasource"
    assert variables["datasource"]["query"] == "prometheus"
    for name in ("instance", "gpu"):
        assert variables[name]["type"] == "query"
        assert variables[name]["datasource"]["uid"] == "${datasource}"
    panels = list(all_panels(dash))
    ids = [p["id"] for p in panels]
    assert len(ids) == len(set(ids)), "panel ids must be unique"
    for p in panels:
        if p["type"] == "row":
            continue
        where = f"panel {p['id']} {p.get('title')!r}"
        assert p.get("datasource") == {"type": "prometheus", "uid": "${datasource}"}, where
        assert p.get("targets"), where
        refs = [t["refId"] for t in p["targets"]]
        assert len(refs) == len(set(refs)), where
        for t in p["targets"]:
            assert t.get("datasource", {}).get("uid") == "${datasource}", where
            assert t.get("expr", "").strip(), where
            # Every query follows the node selector (and GPU metrics the GPU selector).
            assert '=~"$instance"' in t["expr"], where
            if re.search(r"\b(DCGM_FI_|gpumon_)", t["expr"]):
                assert '=~"$gpu"' in t["expr"], where


def test_dashboard_rows_and_layout():
    dash = dashboard()
    rows, current = {}, None
    for p in dash["panels"]:
        if p["type"] == "row":
            current = rows.setdefault(p["title"], [])
            current.extend(p.get("panels", []))
        else:
            assert current is not None, "a panel above the first row"
            current.append(p)
    assert list(rows) == ["Overview", "GPUs", "Errors", "Processes", "Cooling"]

    def exprs(row):
        return " ".join(t["expr"] for p in rows[row] for t in p["targets"])

    overview = rows["Overview"]
    assert {p["type"] for p in overview} == {"stat"}
    titles = " ".join(p["title"] for p in overview)
    for word in ("GPUs", "Busy", "power", "XID"):
        assert word in titles, word
    for metric in ("DCGM_FI_DEV_GPU_UTIL", "DCGM_FI_DEV_FB_USED", "DCGM_FI_DEV_GPU_TEMP",
                   "DCGM_FI_DEV_POWER_USAGE", "DCGM_FI_DEV_SM_CLOCK",
                   "gpumon_clock_event_active"):
        assert metric in exprs("GPUs"), metric
    for metric in ("gpumon_xid_errors_total", "DCGM_FI_DEV_ECC_DBE_VOL_TOTAL",
                   "DCGM_FI_DEV_UNCORRECTABLE_REMAPPED_ROWS"):
        assert metric in exprs("Errors"), metric
    procs = rows["Processes"]
    assert [p["type"] for p in procs] == ["table"]
    assert "gpumon_process_memory_bytes" in exprs("Processes")
    for metric in ("coold_coolant_temperature_celsius", "coold_coolant_flow_liters_per_minute",
                   "coold_pump_speed_rpm", "coold_controller_level"):
        assert metric in exprs("Cooling"), metric

    # Panels lie inside the 24-column grid and do not overlap.
    cells = {}
    for p in all_panels(dash):
        g = p["gridPos"]
        assert g["x"] >= 0 and g["w"] > 0 and g["x"] + g["w"] <= 24, p["id"]
        for x in range(g["x"], g["x"] + g["w"]):
            for y in range(g["y"], g["y"] + g["h"]):
                assert (x, y) not in cells, f"panels {cells.get((x, y))} and {p['id']} overlap"
                cells[(x, y)] = p["id"]


# ---- systemd unit ----


def test_gpumon_unit_settings():
    s = unit_settings(UNIT)

    def one(key, section="Service"):
        values = s.get((section, key))
        assert values and len(values) == 1, f"{key}= set {values}"
        return values[0]

    assert one("Type") == "notify"
    assert re.fullmatch(r"[0-9]+s", one("WatchdogSec"))
    assert one("Restart") == "always"
    assert one("ProtectSystem") == "strict"
    assert one("ProtectHome") == "read-only"
    assert one("NoNewPrivileges") == "yes"
    assert one("PrivateTmp") == "yes"
    assert one("ExecStart").startswith("/usr/local/bin/gpumon ")
    assert one("WantedBy", "Install") == "multi-user.target"
    # Settings that would leave gpumon blind: no /dev/nvidia*, or no other users' /proc.
    assert ("Service", "DynamicUser") not in s
    assert s.get(("Service", "PrivateDevices"), ["no"]) == ["no"]
    for blocker in ("ProtectClock", "DeviceAllow", "DevicePolicy", "ProtectProc", "ProcSubset"):
        assert ("Service", blocker) not in s, blocker
    for cap in s.get(("Service", "CapabilityBoundingSet"), []):
        assert cap.startswith("~") and "CAP_SYS_PTRACE" not in cap, cap


def test_gpuqd_unit_settings():
    """gpuqd's contract with its unit (gpuq/run/run-control.h), and no sandbox setting its jobs
    would inherit to their harm."""
    s = unit_settings(DEPLOY / "systemd" / "gpuqd.service")

    def one(key, section="Service"):
        values = s.get((section, key))
        assert values and len(values) == 1, f"{key}= set {values}"
        return values[0]

    assert one("Type") == "notify"
    assert re.fullmatch(r"[0-9]+s", one("WatchdogSec"))
    assert one("ExecStart").split()[0] == "/usr/local/sbin/gpuqd"
    # Stopping or restarting gpuqd must not kill the runs' supervisors in its cgroup, which it
    # must be allowed to split into job scopes.
    assert one("KillMode") == "process"
    assert one("Delegate") == "yes"
    # A job killed at its memory limit must not stop gpuqd.
    assert one("OOMPolicy") == "continue"
    assert one("RuntimeDirectory") == "gpuq" and one("RuntimeDirectoryMode") == "0755"
    assert one("StateDirectory") == "gpuq" and one("LogsDirectory") == "gpunode"
    assert one("User") == "root"
    assert one("ProtectSystem") in ("yes", "full")
    assert one("WantedBy", "Install") == "multi-user.target"
    # Each of these would reach the jobs: setuid programs, the shared /tmp and homes, the GPUs,
    # capsule's namespaces and /proc, arbitrary system calls and JITs.
    for key in ("NoNewPrivileges", "PrivateTmp", "ProtectHome", "PrivateDevices", "DevicePolicy",
                "DeviceAllow", "ProtectClock", "ProtectKernelTunables", "ProtectKernelModules",
                "ProtectKernelLogs", "ProtectControlGroups", "ProtectProc", "ProcSubset",
                "RestrictNamespaces", "SystemCallFilter", "MemoryDenyWriteExecute",
                "LockPersonality", "RestrictSUIDSGID", "PrivateUsers", "DynamicUser", "UMask"):
        assert ("Service", key) not in s, key
    for caps in s.get(("Service", "CapabilityBoundingSet"), []):
        assert caps.startswith("~"), caps
        for needed in ("CAP_SETUID", "CAP_SETGID", "CAP_KILL", "CAP_SYS_ADMIN", "CAP_SYS_MODULE"):
            assert needed not in caps, needed
    # coold drains gpuqd's jobs at the first shutdown stage: it starts after gpuqd and so stops
    # before it.
    coold = unit_settings(DEPLOY / "systemd" / "coold.service")
    assert "gpuqd.service" in " ".join(coold[("Unit", "After")]).split()


@pytest.mark.parametrize("name", sorted(p.name for p in (DEPLOY / "systemd").glob("*.service")))
def test_units_verify(tmp_path, name):
    """Every shipped unit passes systemd-analyze verify (systemd is in install-deps.sh)."""
    analyze = shutil.which("systemd-analyze")
    if not analyze:
        pytest.skip("systemd-analyze is not installed")
    # verify wants ExecStart's binary to exist; gpunode's programs are not installed here.
    text = (DEPLOY / "systemd" / name).read_text()
    start = re.search(r"^ExecStart=(\S+)", text, re.M)
    assert start, name
    unit = tmp_path / name
    unit.write_text(text.replace(f"ExecStart={start.group(1)}", "ExecStart=/bin/true", 1))
    rc, out = run([analyze, "verify", str(unit)], cwd=tmp_path)
    assert rc == 0 and not out.strip(), out


# ---- a real Prometheus with the shipped configuration ----
#
# Static expositions in gpumon's, coold's and node_exporter's layout, served over HTTP and
# scraped by a real Prometheus that runs prometheus.yml with its rule files (intervals
# shortened): the relabelling, the recording rules, the alert expressions and every dashboard
# query are checked against what a scrape really stores.

GPU_LABEL_NAMES = ("gpu", "UUID", "pci_bus_id", "device", "modelName")
CLOCK_REASONS = ("gpu_idle", "applications_clocks", "sw_power_cap", "hw_slowdown", "sync_boost",
                 "sw_thermal_slowdown", "hw_thermal_slowdown", "hw_power_brake_slowdown",
                 "display_clock")


def gpu_labels(i, mig=None, **extra):
    values = (str(i), f"GPU-e2e-{i}", f"00000000:{0x19 + i:02X}:00.0", f"nvidia{i}",
              "NVIDIA H200")
    pairs = list(zip(GPU_LABEL_NAMES, values))
    if mig:
        pairs += [("GPU_I_PROFILE", mig[0]), ("GPU_I_ID", mig[1])]
    pairs += [("Hostname", "e2e"), ("DCGM_FI_DRIVER_VERSION", "580.159.04")]
    pairs += list(extra.items())
    return "{" + ",".join(f'{k}="{v}"' for k, v in pairs) + "}"


def gpumon_exposition(now):
    """GPU 0: busy, hot enough to throttle, XIDs 48 and 13, GPM profiling, NVLink; GPU 1: MIG
    mode with two instances, laid out as dcgm-exporter lays it out (every dcgm series per GPU
    instance, none for the GPU itself); two processes, one of a gpuq job."""
    fields = {  # name: (GPU 0, GPU 1)
        "DCGM_FI_DEV_GPU_TEMP": (88, 40), "DCGM_FI_DEV_MEMORY_TEMP": (80, 45),
        "DCGM_FI_DEV_POWER_USAGE": (600, 100), "DCGM_FI_DEV_ENFORCED_POWER_LIMIT": (700, 700),
        "DCGM_FI_DEV_SM_CLOCK": (1500, 1980), "DCGM_FI_DEV_MEM_CLOCK": (2619, 2619),
        "DCGM_FI_DEV_PCIE_REPLAY_COUNTER": (0, 0),
        "DCGM_FI_DEV_ECC_SBE_VOL_TOTAL": (3, 0), "DCGM_FI_DEV_ECC_DBE_VOL_TOTAL": (0, 0),
        "DCGM_FI_DEV_ECC_DBE_AGG_TOTAL": (0, 0),
        "DCGM_FI_DEV_CORRECTABLE_REMAPPED_ROWS": (1, 0),
        "DCGM_FI_DEV_UNCORRECTABLE_REMAPPED_ROWS": (0, 0),
        "DCGM_FI_DEV_ROW_REMAP_PENDING": (0, 0), "DCGM_FI_DEV_ROW_REMAP_FAILURE": (0, 0),
        "DCGM_FI_DEV_NVLINK_BANDWIDTH_TOTAL": (1200.5, 0),
        "DCGM_FI_DEV_VGPU_LICENSE_STATUS": (0, 0)}
    instance_fields = {  # name: (GPU 0, GPU 1's instances)
        "DCGM_FI_DEV_FB_USED": (1000, (300, 200)), "DCGM_FI_DEV_FB_FREE": (100, (100, 400)),
        "DCGM_FI_DEV_FB_RESERVED": (512, (0, 0)),
        "DCGM_FI_PROF_GR_ENGINE_ACTIVE": (0.9, (0.5, 0.25)),
        "DCGM_FI_PROF_SM_ACTIVE": (0.8, (0.4, 0.2)),
        "DCGM_FI_PROF_PIPE_TENSOR_ACTIVE": (0.6, (0.3, 0.1)),
        "DCGM_FI_PROF_DRAM_ACTIVE": (0.5, (0.2, 0.1))}
    whole_fields = {  # GPU 0 only: no per-instance value, so none on a GPU in MIG mode
        "DCGM_FI_DEV_GPU_UTIL": 95, "DCGM_FI_PROF_PCIE_TX_BYTES": 1.5e9,
        "DCGM_FI_PROF_PCIE_RX_BYTES": 2.5e8}
    migs = (("3g.71gb", "1"), ("4g.71gb", "2"))
    lines = ["gpumon_up 1", "gpumon_gpus 2"]
    lines += [f"{name}{gpu_labels(0)} {v}" for name, v in whole_fields.items()]
    for name, (v0, v1) in fields.items():
        lines.append(f"{name}{gpu_labels(0)} {v0}")
        lines += [f"{name}{gpu_labels(1, mig)} {v1}" for mig in migs]
    for name, (v0, per_instance) in instance_fields.items():
        lines.append(f"{name}{gpu_labels(0)} {v0}")
        lines += [f"{name}{gpu_labels(1, mig)} {v}" for mig, v in zip(migs, per_instance)]
    lines.append("DCGM_FI_DEV_XID_ERRORS"
                 f"{gpu_labels(0, err_code='48', err_msg='Double Bit ECC Error')} 48")
    lines += ["DCGM_FI_DEV_XID_ERRORS"
              f"{gpu_labels(1, mig, err_code='0', err_msg='No Error')} 0" for mig in migs]
    lines += [f"gpumon_gpu_up{gpu_labels(i)} 1" for i in (0, 1)]
    lines.append(f"gpumon_sample_timestamp_seconds {now:.3f}")
    for reason in CLOCK_REASONS:
        for i in (0, 1):
            active = i == 0 and reason in ("sw_power_cap", "hw_thermal_slowdown")
            lines.append(f"gpumon_clock_event_active{gpu_labels(i, reason=reason)} {int(active)}")
    for xid, count in (("48", 1), ("13", 2)):
        lines += [f"gpumon_xid_errors_total{gpu_labels(0, xid=xid)} {count}",
                  f"gpumon_xid_last_seen_timestamp_seconds{gpu_labels(0, xid=xid)} {now:.0f}"]
    proc = dict(pid="101", process="python3", user="root", container="capsule://demo",
                hpc_job="gpuq://42")
    lines.append(f"gpumon_process_memory_bytes{gpu_labels(0, **proc)} 1048576000")
    proc = dict(pid="102", process="bash", user="alice", container="", hpc_job="")
    lines.append(f"gpumon_process_memory_bytes{gpu_labels(1, ('3g.71gb', '1'), **proc)} 314572800")
    return "\n".join(lines) + "\n"


COOLD_EXPOSITION = """coold_controller_up 1
coold_telemetry_stale 0
coold_frames_rejected_total 0
coold_coolant_flow_liters_per_minute 12.4
coold_power_cut_in_seconds -1
coold_coolant_temperature_celsius{sensor="t1"} 31.2
coold_coolant_temperature_celsius{sensor="t2"} 35
coold_sensor_fault{sensor="t1"} 0
coold_sensor_fault{sensor="t2"} 0
coold_pump_speed_rpm{pump="1"} 2410
coold_pump_duty_ratio{pump="1"} 0.55
coold_controller_level{level="normal"} 1
coold_controller_level{level="warning"} 0
coold_controller_level{level="precritical"} 0
coold_controller_level{level="critical"} 0
coold_shutdown_stage 0
"""

# gpuqd's layout: one queue with a job running and one waiting.
GPUQ_EXPOSITION = """gpuq_gpus 8
gpuq_gpus_allocated 2
gpuq_drained 0
gpuq_jobs{queue="batch",state="PENDING"} 1
gpuq_jobs{queue="batch",state="RUNNING"} 1
gpuq_quota{queue="batch",resource="gpus"} 4
gpuq_preemptions_total{queue="batch"} 0
gpuq_retries_total{queue="batch"} 0
gpuq_job_wait_seconds_bucket{queue="batch",le="+Inf"} 1
gpuq_job_wait_seconds_sum{queue="batch"} 12
gpuq_job_wait_seconds_count{queue="batch"} 1
"""

NODE_EXPOSITION = """node_filesystem_avail_bytes{device="/dev/sda1",fstype="ext4",mountpoint="/"} 10
node_filesystem_size_bytes{device="/dev/sda1",fstype="ext4",mountpoint="/"} 100
node_filesystem_avail_bytes{device="tmpfs",fstype="tmpfs",mountpoint="/run"} 1
node_filesystem_size_bytes{device="tmpfs",fstype="tmpfs",mountpoint="/run"} 100
"""


def free_port():
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def serve(body):
    """An HTTP server in a thread answering every GET with body as a Prometheus exposition."""
    data = body.encode()

    class Handler(http.server.BaseHTTPRequestHandler):
        def do_GET(self):
            self.send_response(200)
            self.send_header("Content-Type", "text/plain; version=0.0.4")
            self.send_header("Content-Length", str(len(data)))
            self.end_headers()
            self.wfile.write(data)

        def log_message(self, *args):
            pass

    server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), Handler)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    return server


class Prometheus:
    def __init__(self, workdir, ports):
        self.port = free_port()
        config = (PROM / "prometheus.yml").read_text()
        for default, port in ports.items():
            assert f"'localhost:{default}'" in config, default
            config = config.replace(f"'localhost:{default}'", f"'127.0.0.1:{port}'")
        # Seconds instead of minutes, so that rules and scrapes have data at once.
        config = re.sub(r"(scrape_interval|evaluation_interval|scrape_timeout): \w+",
                        r"\1: 1s", config)
        (workdir / "prometheus.yml").write_text(config)
        for rules in PROM.glob("*-rules.yml"):
            text = re.sub(r"^    interval: \w+\n", "", rules.read_text(), flags=re.M)
            (workdir / rules.name).write_text(text)
        self.log = open(workdir / "prometheus.log", "w")
        self.proc = subprocess.Popen(
            ["prometheus", f"--config.file={workdir / 'prometheus.yml'}",
             f"--storage.tsdb.path={workdir / 'data'}",
             f"--web.listen-address=127.0.0.1:{self.port}", "--log.level=warn"],
            stdout=self.log, stderr=subprocess.STDOUT)

    def query(self, promql):
        return gpumonutil.prometheus_query(self.port, promql)

    def wait_for(self, promql, n, timeout=60):
        """Waits until promql returns n series; returns them."""
        deadline = time.monotonic() + timeout
        result = None
        while time.monotonic() < deadline:
            assert self.proc.poll() is None, "prometheus exited"
            try:
                result = self.query(promql)
                if len(result) == n:
                    return result
            except (OSError, urllib.error.URLError):
                pass
            time.sleep(0.5)
        raise AssertionError(f"{promql}: {n} series expected, got {result}")

    def stop(self):
        self.proc.terminate()
        try:
            self.proc.wait(10)
        except subprocess.TimeoutExpired:
            self.proc.kill()
            self.proc.wait()
        self.log.close()


@pytest.fixture(scope="module")
def prometheus(tmp_path_factory):
    if not shutil.which("prometheus"):
        pytest.fail("prometheus is missing: scripts/install-deps.sh installs it")
    servers = {9400: serve(gpumon_exposition(time.time())), 9420: serve(COOLD_EXPOSITION),
               9430: serve(GPUQ_EXPOSITION), 9100: serve(NODE_EXPOSITION)}
    prom = Prometheus(tmp_path_factory.mktemp("prometheus"),
                      {d: s.server_address[1] for d, s in servers.items()})
    try:
        prom.wait_for('up{instance="127.0.0.1"} == 1', 4)
        # Every recording rule has been evaluated on scraped data at least once.
        prom.wait_for('count by (__name__) ({__name__=~".+:.+_5m"})', 11)
        # Enough samples for rate() and increase() over a minute.
        prom.wait_for('count_over_time(gpumon_up[1m]) >= 3', 1)
        yield prom
    finally:
        prom.stop()
        for s in servers.values():
            s.shutdown()
            s.server_close()


def value(prom, promql):
    result = prom.query(promql)
    assert len(result) == 1, f"{promql}: {result}"
    return float(result[0]["value"][1])


def test_e2e_instance_is_the_host(prometheus):
    jobs = {r["metric"]["job"] for r in prometheus.query('up{instance="127.0.0.1"}')}
    assert jobs == {"gpumon", "coold", "gpuq", "node"}
    # gpuqd's series are stored under the node too, beside its GPUs.
    assert value(prometheus, 'gpuq_gpus{job="gpuq",instance="127.0.0.1"}') == 8


def test_e2e_recording_rules(prometheus):
    p = prometheus
    # The MIG-mode GPU has no utilisation; its MIG instances are not GPUs of their own.
    util = p.query("gpu:DCGM_FI_DEV_GPU_UTIL:avg_5m")
    assert [r["metric"] for r in util] == [{
        "__name__": "gpu:DCGM_FI_DEV_GPU_UTIL:avg_5m", "instance": "127.0.0.1",
        "Hostname": "e2e", "gpu": "0", "UUID": "GPU-e2e-0", "modelName": "NVIDIA H200"}]
    assert float(util[0]["value"][1]) == 95
    fb = {r["metric"]["gpu"]: float(r["value"][1])
          for r in p.query("gpu:DCGM_FI_DEV_FB_USED:ratio_avg_5m")}
    assert fb == pytest.approx({"0": 1000 / 1100, "1": 0.5})
    assert value(p, "instance:DCGM_FI_DEV_POWER_USAGE:sum_avg_5m") == 700
    assert value(p, "instance:gpus:count_5m") == 2
    assert value(p, "instance:gpus_busy:count_5m") == 1
    assert value(p, "instance:coold_coolant_temperature_celsius:max_5m") == 35
    assert value(p, "instance:coold_coolant_flow_liters_per_minute:avg_5m") == 12.4


def test_e2e_alerts(prometheus):
    p = prometheus

    def alerts(name, n):
        # Rule groups run on their own schedules: wait for this one to have evaluated.
        result = p.wait_for(f'ALERTS{{alertname="{name}"}}', n) if n else p.query(
            f'ALERTS{{alertname="{name}"}}')
        return {(r["metric"]["alertstate"], r["metric"].get("xid") or r["metric"].get("reason")
                 or r["metric"].get("mountpoint") or r["metric"].get("gpu")) for r in result}
    # No `for:`: XID 48 fires on its first scrape; XID 13 is an application's, never.
    assert alerts("GpuCriticalXid", 1) == {("firing", "48")}
    assert alerts("GpuClockSlowdown", 1) == {("pending", "hw_thermal_slowdown")}
    assert alerts("GpuUtilizationHigh", 1) == {("pending", "0")}
    assert alerts("GpuTemperatureHigh", 1) == {("pending", "0")}
    assert alerts("FilesystemAlmostFull", 1) == {("pending", "/")}
    for quiet in ("GpuMemoryAlmostFull", "GpuLost", "GpumonNvmlDown", "GpumonDown",
                  "CoolantFlowLow", "CoolantControllerDown"):
        assert alerts(quiet, 0) == set(), quiet


def test_e2e_dashboard_queries_return_data(prometheus):
    """Every panel shows something for all nodes and GPUs, i.e. its selectors and label
    filters match what is really stored."""
    empty = []
    for name, expr in dashboard_queries(dashboard()):
        promql = re.sub(r"\$__(rate_interval|interval|range)\b", "1m", expr)
        promql = promql.replace("$instance", ".+").replace("$gpu", ".+")
        if not prometheus.query(promql):
            empty.append(f"{name}: {expr}")
    assert not empty, "\n".join(empty)


def test_e2e_process_table_shows_the_job(prometheus):
    """The workload's job is gpumon's hpc_job label, kept apart from the scrape job; the
    dashboard's table shows it as its job column."""
    procs = {r["metric"]["pid"]: r["metric"]
             for r in prometheus.query("gpumon_process_memory_bytes")}
    assert procs["101"]["job"] == "gpumon"
    assert procs["101"]["hpc_job"] == "gpuq://42"
    assert "hpc_job" not in procs["102"]  # gpumon's empty label is no label
    table = next(p for p in all_panels(dashboard()) if p["title"] == "GPU processes")
    organize = next(t for t in table["transformations"] if t["id"] == "organize")["options"]
    assert organize["renameByName"]["hpc_job"] == "job"
    assert organize["excludeByName"]["job"] is True
