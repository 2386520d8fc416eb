"""A real Prometheus scrapes a real gpumon (on the fake NVML), as on a node: what dashboards and
alerts written for dcgm-exporter query must come out of Prometheus' storage under the same names.

Prometheus asks for OpenMetrics first, and gpumon answers in it; OpenMetrics would rename a
counter without "_total", so this is where dcgm-exporter's counter names (typed "unknown" there)
are proven to survive, next to gpumon's own counters."""

import shutil
import urllib.error

import pytest

import gpumonutil as gu
from gpumonutil import gpumon, workdir  # noqa: F401 - pytest fixtures


@pytest.fixture
def prometheus(workdir):  # noqa: F811 - the pytest fixture imported above
    if not shutil.which("prometheus"):
        pytest.fail("prometheus is missing: scripts/install-deps.sh installs it")
    started = []

    def start(port):
        p = gu.Prometheus(workdir, port)
        started.append(p)
        return p

    yield start
    for p in started:
        p.proc.stop()


def test_prometheus_stores_dcgm_names(gpumon, prometheus):  # noqa: F811
    fx = gu.load_fixture("dgx-8gpu-mig")
    gu.hide_pids(fx)
    d = gpumon(fx)
    prom = prometheus(d.port)
    prom.wait("up", lambda r: len(r) == 1 and r[0]["value"][1] == "1")

    # Prometheus asks for OpenMetrics first but takes text 0.0.4, and gets text: the one format
    # in which dcgm's counters without _total are counters.
    accept = ("application/openmetrics-text;version=1.0.0,application/openmetrics-text;"
              "version=0.0.1;q=0.75,text/plain;version=0.0.4;q=0.5,*/*;q=0.1")
    reply = d.scrape(accept=accept)
    assert reply.headers["content-type"].startswith("text/plain; version=0.0.4"), reply

    gpus = len(fx["gpus"])
    util = prom.wait("DCGM_FI_DEV_GPU_UTIL", lambda r: len(r) >= gpus - 1)
    labels = util[0]["metric"]
    for name in ("gpu", "UUID", "pci_bus_id", "device", "modelName", "Hostname",
                 "DCGM_FI_DRIVER_VERSION"):
        assert name in labels, labels
    assert labels["job"] == "gpumon" and labels["Hostname"] == "testhost", labels

    # dcgm-exporter's counters keep their names; rate() works on them as on counters.
    # (GPU 3 is in MIG mode: one series per GPU instance, none for the GPU itself.)
    energy = prom.wait("max by (gpu) (DCGM_FI_DEV_TOTAL_ENERGY_CONSUMPTION)",
                       lambda r: len(r) == gpus)
    assert all(float(r["value"][1]) > 0 for r in energy), energy
    assert not prom.query("DCGM_FI_DEV_TOTAL_ENERGY_CONSUMPTION_total")
    prom.wait("rate(DCGM_FI_DEV_TOTAL_ENERGY_CONSUMPTION[5s]) > 0", lambda r: len(r) >= 1)
    assert prom.query("DCGM_FI_DEV_PCIE_REPLAY_COUNTER")
    # ... and Prometheus' metadata (what Grafana and rate() lints read) calls them counters.
    meta = gu.prometheus_api(prom.port, "metadata")
    for name in ("DCGM_FI_DEV_TOTAL_ENERGY_CONSUMPTION", "DCGM_FI_DEV_PCIE_REPLAY_COUNTER",
                 "gpumon_xid_errors_total"):
        assert [m["type"] for m in meta.get(name, [])] == ["counter"], (name, meta.get(name))

    # MIG instances arrive as their own series of the same families.
    mig = prom.wait('DCGM_FI_DEV_FB_USED{GPU_I_PROFILE!=""}', lambda r: len(r) >= 1)
    assert all(r["metric"]["GPU_I_ID"] for r in mig), mig

    # gpumon's own counters are stored under their _total names, XIDs per XID.
    xids = prom.wait("gpumon_xid_errors_total", lambda r: len(r) >= 2)
    assert {r["metric"]["xid"] for r in xids} >= {"13", "48"}, xids
    assert prom.query("gpumon_up")[0]["value"][1] == "1"

    # What the alert rules in deploy/prometheus query evaluates here too.
    prom.wait('gpumon_clock_event_active{reason="hw_slowdown"} == 1', lambda r: len(r) == 1)
