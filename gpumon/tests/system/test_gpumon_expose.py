"""/metrics as a scraper and a dashboard see it: golden expositions of the reference fixtures, the
values checked against the fixture, promtool's lint, OpenMetrics, gzip, HEAD and the other
endpoints."""

import gzip

import gpumonutil as gu
from gpumonutil import gpumon, one, wait_for, workdir  # noqa: F401 - pytest fixtures

MIB = 1 << 20


def full_exposition(d, fixture):
    """Waits until every GPU of the fixture shows all it should (the slow fields come with the
    slow thread's first pass, the XIDs when the fixture's events are due) and returns (text,
    samples) of one scrape promtool accepts."""
    def complete():
        s = d.metrics()
        if one(s, "gpumon_up") != 1 or not gu.xids_delivered(s, fixture):
            return None
        for i in range(len(fixture["gpus"])):
            try:
                gu.check_gpu_values(s, fixture, i)
            except AssertionError:
                return None
        return True
    try:
        wait_for(complete, 15, "every fixture field in the exposition")
    except AssertionError:
        pass  # the checks below say which field is wrong, which is more useful
    return d.checked()


def test_golden_consumer_1gpu(gpumon):
    fx = gu.load_fixture("consumer-1gpu")
    pids = gu.hide_pids(fx)
    d = gpumon(fx)
    text, s = full_exposition(d, fx)
    gu.check_golden("consumer-1gpu", text, pids)

    gu.check_gpu_values(s, fx, 0)
    g = fx["gpus"][0]
    # What a dashboard reads, stated directly.
    assert one(s, "DCGM_FI_DEV_GPU_UTIL", gpu=0) == g["utilization"]["gpu"]
    assert one(s, "DCGM_FI_DEV_FB_USED", gpu=0) == g["memory"]["used"] // MIB
    assert one(s, "DCGM_FI_DEV_FB_TOTAL", gpu=0) == g["memory"]["total"] // MIB
    assert one(s, "DCGM_FI_DEV_POWER_USAGE", gpu=0) == g["power_usage_mw"] / 1000
    assert one(s, "DCGM_FI_DEV_GPU_TEMP", gpu=0) == g["temperature"]
    assert one(s, "DCGM_FI_DEV_SM_CLOCK", gpu=0) == g["clocks"]["sm"]
    # A consumer card has no ECC, no row remapping and no HBM temperature: left out, never 0.
    for family in ("DCGM_FI_DEV_ECC_SBE_VOL_TOTAL", "DCGM_FI_DEV_ECC_DBE_AGG_TOTAL",
                   "DCGM_FI_DEV_CORRECTABLE_REMAPPED_ROWS", "DCGM_FI_DEV_ROW_REMAP_PENDING",
                   "DCGM_FI_DEV_MEMORY_TEMP"):
        assert family not in gu.families(s), family
    assert one(s, "gpumon_up") == 1
    assert one(s, "gpumon_gpus") == 1
    assert one(s, "gpumon_gpu_up", gpu=0, UUID=g["uuid"]) == 1
    assert one(s, "gpumon_info", driver_version=fx["driver_version"]) == 1
    assert one(s, "gpumon_nvml_errors_total") == 0
    assert "gpumon_last_error_info" not in gu.families(s)
    t = gu.types(text)
    assert t["DCGM_FI_DEV_GPU_UTIL"] == "gauge"
    assert t["DCGM_FI_DEV_TOTAL_ENERGY_CONSUMPTION"] == "counter"  # dcgm's name, no _total


def test_golden_dgx_8gpu_mig(gpumon):
    fx = gu.load_fixture("dgx-8gpu-mig")
    pids = gu.hide_pids(fx)
    d = gpumon(fx)
    text, s = full_exposition(d, fx)
    gu.check_golden("dgx-8gpu-mig", text, pids)

    n = len(fx["gpus"])
    assert n == 8 and one(s, "gpumon_gpus") == 8
    for i in range(n):
        gu.check_gpu_values(s, fx, i)
        assert one(s, "gpumon_gpu_up", gpu=i) == 1
    mig_gpus = [i for i, g in enumerate(fx["gpus"]) if (g.get("mig") or {}).get("enabled")]
    assert mig_gpus, "the fixture is meant to have GPUs in MIG mode"
    for i in mig_gpus:
        g = fx["gpus"][i]
        profiles = {p["id"]: p["name"].removeprefix("MIG ") for p in g["mig_profiles"]}
        # One framebuffer series per GPU instance, labelled as dcgm-exporter labels them.
        instances = {}
        for inst in g["mig"]["instances"]:
            instances.setdefault(inst["gi"], inst)
        series = [(lab, v) for lab, v in gu.metric_series(s, "DCGM_FI_DEV_FB_USED", gpu=i)
                  if "GPU_I_ID" in lab]
        assert len(series) == len(instances), series
        for lab, v in series:
            inst = instances[int(lab["GPU_I_ID"])]
            assert lab["GPU_I_PROFILE"] == profiles[inst["profile_id"]], lab
            assert lab["UUID"] == g["uuid"] and lab["Hostname"] == "testhost", lab
            if "memory" in inst:
                assert v == inst["memory"]["used"] // MIB, (lab, v)
        # A GPU in MIG mode has no whole-GPU utilisation (NVML says NOT_SUPPORTED).
        assert one(s, "DCGM_FI_DEV_GPU_UTIL", gpu=i) is None
    # The fixture's XIDs: counted per GPU and XID, the last one in dcgm's family.
    for (i, xid), count in gu.expected_xids(fx).items():
        assert one(s, "gpumon_xid_errors_total", gpu=i, xid=xid) == count
        assert one(s, "DCGM_FI_DEV_XID_ERRORS", gpu=i) == xid
        assert one(s, "gpumon_xid_last_seen_timestamp_seconds", gpu=i, xid=xid) > 1.7e9
    assert gu.expected_xids(fx), "the fixture is meant to have XID events"
    # The non-MIG GPUs keep theirs.
    for i in set(range(n)) - set(mig_gpus):
        if fx["gpus"][i].get("utilization"):
            assert one(s, "DCGM_FI_DEV_GPU_UTIL", gpu=i) == fx["gpus"][i]["utilization"]["gpu"]


def test_golden_gpu_lost(gpumon):
    fx = gu.load_fixture("gpu-lost")
    pids = gu.hide_pids(fx)
    lost = [i for i, g in enumerate(fx["gpus"]) if "lost_at" in g]
    assert lost, "the fixture is meant to lose a GPU"
    # No rescan during the test: this file shows the state right after the loss (what a rescan
    # changes is test_gpumon_faults.py's business).
    d = gpumon(fx, rescan_interval="1h")
    d.wait_metric("the lost GPU to show gpumon_gpu_up 0 and its XID",
                  lambda s: all(one(s, "gpumon_gpu_up", gpu=i) == 0
                                and one(s, "DCGM_FI_DEV_XID_ERRORS", gpu=i) for i in lost),
                  timeout=20)
    text, s = d.checked()
    # The fast and the slow thread may both be inside a call on the GPU when it goes: one or
    # two failed calls, depending on timing.
    gu.check_golden("gpu-lost", text, pids, volatile=["gpumon_nvml_errors_total"])
    assert 1 <= one(s, "gpumon_nvml_errors_total") <= 2
    for i in lost:
        # A lost GPU shows its identity and XIDs only: no stale telemetry.
        assert one(s, "DCGM_FI_DEV_GPU_TEMP", gpu=i) is None
        assert one(s, "DCGM_FI_DEV_FB_USED", gpu=i) is None
    assert one(s, "gpumon_up") == 1


def test_openmetrics_gzip_and_head(gpumon):
    fx = gu.load_fixture("dgx-8gpu-mig")
    gu.hide_pids(fx)
    d = gpumon(fx)
    text, plain = full_exposition(d, fx)

    r = d.scrape()
    assert r.status == 200
    assert r.headers["content-type"].startswith(gu.TEXT_CONTENT_TYPE), r.headers
    assert "content-encoding" not in r.headers

    r = d.scrape(accept=gu.OPENMETRICS_ACCEPT)
    assert r.status == 200
    assert r.headers["content-type"].startswith(
        "application/openmetrics-text; version=1.0.0"), r.headers
    om_text = r.text()
    assert om_text.endswith("# EOF\n"), om_text[-200:]
    assert om_text.count("# EOF") == 1
    om = gu.parse_metrics(om_text)
    # The same series in both formats (counters keep their names; values that move aside).
    assert set(om) == set(plain), set(om) ^ set(plain)
    assert gu.types(om_text)["DCGM_FI_DEV_TOTAL_ENERGY_CONSUMPTION"] == "unknown"

    # A browser-like Accept still gets text.
    r = d.scrape(accept="text/html,application/xhtml+xml,*/*;q=0.8")
    assert r.headers["content-type"].startswith(gu.TEXT_CONTENT_TYPE), r.headers

    r = d.scrape(accept_encoding="gzip")
    assert r.status == 200
    assert r.headers.get("content-encoding") == "gzip", r.headers
    unzipped = gzip.decompress(r.body).decode()
    assert gu.normalize(unzipped) == gu.normalize(d.text())
    gu.promtool_check(unzipped)

    r = d.scrape(accept_encoding="gzip;q=0, identity")
    assert "content-encoding" not in r.headers, r.headers
    gu.parse_metrics(r.body.decode())

    r = d.get("/metrics", method="HEAD")
    assert r.status == 200 and r.body == b"", r
    assert r.headers["content-type"].startswith(gu.TEXT_CONTENT_TYPE), r.headers


def test_health_index_and_unknown_paths(gpumon):
    d = gpumon("consumer-1gpu")
    r = d.get("/health")
    assert r.status == 200 and r.body.strip() == b"ok", r
    r = d.get("/")
    assert r.status == 200 and b"/metrics" in r.body, r
    r = d.get("/nope")
    assert r.status == 404, r
    r = d.get("/metrics", method="POST")
    assert r.status in (405, 501), r
