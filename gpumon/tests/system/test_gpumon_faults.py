"""What goes wrong on real nodes: a GPU falls off the bus, the driver is missing or not loaded
yet, values change, an NVML call hangs, the driver is old. gpumon must stay up, keep serving and
say what it knows."""

import copy
import threading
import time

import gpumonutil as gu
from gpumonutil import gpumon, one, wait_for, workdir  # noqa: F401 - pytest fixtures


def consumer():
    fx = gu.load_fixture("consumer-1gpu")
    gu.hide_pids(fx)
    return fx


def test_gpu_lost_mid_run(gpumon):
    fx = gu.load_fixture("gpu-lost")
    gu.hide_pids(fx)
    lost = [i for i, g in enumerate(fx["gpus"]) if "lost_at" in g]
    healthy = [i for i, g in enumerate(fx["gpus"]) if "lost_at" not in g]
    assert lost == [1] and healthy, "gpu-lost is meant to lose GPU 1 and keep the others"
    # gpumon re-opens NVML every rescan interval while a GPU is lost (to find it again after a
    # reset); 1 s here, so the checks below span several re-opens.
    d = gpumon(fx, rescan_interval="1s")

    # Before the loss (lost_at is seconds after nvmlInit), GPU 1 reports normally.
    _, s = d.checked()
    if one(s, "gpumon_gpu_up", gpu=1) == 1:
        assert one(s, "DCGM_FI_DEV_GPU_TEMP", gpu=1) is not None

    s = d.wait_metric("GPU 1 to be reported lost with XID 79",
                      lambda s: one(s, "gpumon_gpu_up", gpu=1) == 0
                      and one(s, "DCGM_FI_DEV_XID_ERRORS", gpu=1) == 79, timeout=20)
    assert one(s, "gpumon_up") == 1
    assert one(s, "gpumon_gpus") == len(fx["gpus"])
    # The GPU keeps its identity labels, so alerts can name it.
    assert one(s, "gpumon_gpu_up", gpu=1, UUID=fx["gpus"][1]["uuid"]) == 0
    assert one(s, "DCGM_FI_DEV_GPU_TEMP", gpu=1) is None
    assert one(s, "gpumon_xid_errors_total", gpu=1, xid=79) == 1
    assert one(s, "gpumon_xid_last_seen_timestamp_seconds", gpu=1, xid=79) > time.time() - 60

    # A lost GPU stays lost, and its XID stays shown, across the re-opens; nothing is counted
    # twice. The healthy GPU keeps updating meanwhile.
    fx2 = d.read_fixture()
    fx2["gpus"][0]["temperature"] = fx["gpus"][0]["temperature"] + 7
    d.write_fixture(fx2)
    seen_new_temp = False
    end = time.monotonic() + 4.5
    while time.monotonic() < end:
        _, s = d.checked()
        state = (one(s, "gpumon_gpu_up", gpu=1), one(s, "DCGM_FI_DEV_XID_ERRORS", gpu=1),
                 one(s, "gpumon_xid_errors_total", gpu=1, xid=79))
        assert state == (0, 79, 1), f"GPU 1 after the loss: gpu_up, XID, XID 79 count = {state}"
        for i in healthy:
            assert one(s, "gpumon_gpu_up", gpu=i) == 1
        seen_new_temp |= one(s, "DCGM_FI_DEV_GPU_TEMP", gpu=0) == fx2["gpus"][0]["temperature"]
        time.sleep(0.25)
    assert seen_new_temp, "GPU 0 stopped updating after GPU 1 was lost"
    assert time.time() - one(s, "gpumon_sample_timestamp_seconds") < 5
    assert d.get("/health").status == 200


def test_no_driver_at_all(gpumon):
    d = gpumon(None, nvml=None)
    text, s = d.checked()
    assert one(s, "gpumon_up") == 0
    reasons = gu.metric_series(s, "gpumon_last_error_info")
    assert len(reasons) == 1, reasons
    assert "libnvidia-ml.so.1" in reasons[0][0]["reason"], reasons
    assert not [f for f in gu.families(s) if f.startswith("DCGM_")], text
    assert one(s, "gpumon_gpus") in (None, 0)
    r = d.get("/health")
    assert r.status == 503, r
    assert b"libnvidia-ml.so.1" in r.body, r
    # It keeps serving (and retrying) rather than exiting.
    time.sleep(1.5)
    assert one(d.metrics(), "gpumon_up") == 0


def test_driver_loaded_later(gpumon):
    fx = consumer()
    fx["init_error"] = "DRIVER_NOT_LOADED"
    d = gpumon(fx, rescan_interval="1s")
    _, s = d.checked()
    assert one(s, "gpumon_up") == 0
    (labels, _), = gu.metric_series(s, "gpumon_last_error_info")
    assert labels["reason"], labels
    assert d.get("/health").status == 503
    pid = d.proc.pid

    # The driver "loads": same fixture without the init error. No restart needed.
    del fx["init_error"]
    d.write_fixture(fx)
    d.wait_metric("the GPU to appear after the driver loaded",
                  lambda s: one(s, "gpumon_up") == 1
                  and one(s, "DCGM_FI_DEV_GPU_TEMP", gpu=0) is not None, timeout=10)
    s = d.wait_values(fx)  # the slow fields follow with the slow thread's next pass
    assert d.proc.pid == pid and d.proc.running()
    assert "gpumon_last_error_info" not in gu.families(s)
    assert d.get("/health").status == 200
    d.checked()


def test_values_follow_the_fixture(gpumon):
    fx = consumer()
    d = gpumon(fx, interval="200ms")
    d.wait_metric("first values", lambda s: one(s, "DCGM_FI_DEV_GPU_TEMP", gpu=0) is not None)
    g = fx["gpus"][0]
    g["temperature"] = 83
    g["utilization"]["gpu"] = 77
    g["power_usage_mw"] = 312_500
    g["memory"]["used"] = 5 * (1 << 30) + 12345
    g["clocks"]["sm"] = 1234
    d.write_fixture(fx)
    s = d.wait_metric("the changed values", lambda s: one(s, "DCGM_FI_DEV_GPU_TEMP", gpu=0) == 83,
                      timeout=5)
    # One pass reads all fast fields, so the rest changed with the temperature.
    assert one(s, "DCGM_FI_DEV_GPU_UTIL", gpu=0) == 77
    assert one(s, "DCGM_FI_DEV_POWER_USAGE", gpu=0) == 312.5
    assert one(s, "DCGM_FI_DEV_FB_USED", gpu=0) == 5 * 1024
    assert one(s, "DCGM_FI_DEV_SM_CLOCK", gpu=0) == 1234
    gu.check_gpu_values(s, fx, 0)


# A slow call: the brief's 200 ms, times ten, so that a scrape stuck behind it could not pass the
# one-second bound below (no bound tighter than seconds: sanitizer builds are slow).
SLOW_US = 2_000_000


def test_slow_nvml_call_does_not_slow_scrapes(gpumon):
    fx = consumer()
    fx["gpus"][0]["delay_us"] = {"nvmlDeviceGetTotalEnergyConsumption": SLOW_US}
    # A slow interval of 2 s: the slow thread is in the 2 s call half the time, and its values
    # stay younger than the three slow intervals after which gpumon drops them as stale.
    d = gpumon(fx, interval="200ms", slow_interval="2s")
    d.wait_metric("first values", lambda s: one(s, "DCGM_FI_DEV_GPU_TEMP", gpu=0) is not None,
                  timeout=20)
    # From now on the slow thread sits in the 2 s call every other 2 s.
    worst = oldest = 0.0
    answered = 0
    changed_at = None
    deadline = time.monotonic() + 5
    while time.monotonic() < deadline:
        t0 = time.monotonic()
        r = d.scrape(timeout=10)
        worst = max(worst, time.monotonic() - t0)
        assert r.status == 200, r
        answered += 1
        # The fast thread keeps publishing: a pass blocked behind the slow call would let the
        # shown sample grow as old as the call is long.
        oldest = max(oldest, time.time() - one(gu.parse_metrics(r.text()),
                                                "gpumon_sample_timestamp_seconds"))
        if changed_at is None and time.monotonic() > deadline - 4:
            # The fast fields keep coming while the slow call is in progress.
            fx["gpus"][0]["temperature"] = 91
            d.write_fixture(fx)
            changed_at = time.monotonic()
        time.sleep(0.05)
    assert worst < 1.0, f"a scrape took {worst:.2f}s while an NVML call was slow"
    assert answered >= 20
    assert oldest < 1.5, f"a scrape showed a sample {oldest:.2f}s old"
    s = d.metrics()
    assert one(s, "DCGM_FI_DEV_GPU_TEMP", gpu=0) == 91, "fast fields stalled behind the slow one"
    assert one(s, "DCGM_FI_DEV_TOTAL_ENERGY_CONSUMPTION", gpu=0) is not None


def test_old_driver(gpumon):
    # dgx-8gpu-mig has what the old driver lacks (remapped rows, HBM temperature), so the
    # absence below means something.
    fx = gu.load_fixture("dgx-8gpu-mig")
    gu.hide_pids(fx)
    current = gu.expected_gpu(fx, 0, gu.exported_symbols("current"))
    old_symbols = gu.exported_symbols("old")
    old = gu.expected_gpu(fx, 0, old_symbols)
    lost_families = [f for f in current if current[f] is not None and old[f] is None]
    assert lost_families, "the old variant should lack something the fixture uses"

    d = gpumon(fx, nvml="old")
    # Every GPU read by a fast and a slow pass (energy comes from the slow one, beside the
    # remapped rows the old driver lacks), so that what is absent below is absent for a reason.
    d.wait_metric("the GPUs through the old driver, fast and slow fields",
                  lambda s: one(s, "gpumon_up") == 1 and all(
                      gu.metric_series(s, "DCGM_FI_DEV_FB_TOTAL", gpu=i)
                      and gu.metric_series(s, "DCGM_FI_DEV_TOTAL_ENERGY_CONSUMPTION", gpu=i)
                      for i in range(len(fx["gpus"]))), timeout=15)
    _, s = d.checked()
    for i in range(len(fx["gpus"])):
        gu.check_gpu_values(s, fx, i, old_symbols)
        assert one(s, "gpumon_gpu_up", gpu=i) == 1
    for family in lost_families:
        assert family not in gu.families(s), family
    if "nvmlSystemGetCudaDriverVersion_v2" not in old_symbols:
        (labels, _), = gu.metric_series(s, "gpumon_info")
        assert labels["cuda_version"] == "", labels
    assert one(s, "gpumon_nvml_errors_total") == 0


def test_failing_call_counts_as_error_not_as_zero(gpumon):
    fx = consumer()
    fx["gpus"][0]["errors"] = {"nvmlDeviceGetPowerUsage": "UNKNOWN"}
    d = gpumon(fx)
    s = d.wait_metric("errors counted", lambda s: one(s, "gpumon_nvml_errors_total") > 0)
    assert one(s, "DCGM_FI_DEV_POWER_USAGE", gpu=0) is None
    assert one(s, "DCGM_FI_DEV_GPU_TEMP", gpu=0) == fx["gpus"][0]["temperature"]
    assert one(s, "gpumon_gpu_up", gpu=0) == 1
    # NOT_SUPPORTED is not an error: a field the card lacks does not count.
    fx2 = copy.deepcopy(fx)
    del fx2["gpus"][0]["errors"]
    fx2["gpus"][0]["unsupported"] = ["nvmlDeviceGetPowerUsage"]
    d2 = gpumon(fx2, name="gpumon-unsupported")
    # Absence means something only once both passes have read the GPU: the temperature comes from
    # the fast pass that asks for the power too, the energy from the slow pass.
    s2 = d2.wait_metric("a fast and a slow pass", lambda s: one(
        s, "DCGM_FI_DEV_GPU_TEMP", gpu=0) is not None and one(
        s, "DCGM_FI_DEV_TOTAL_ENERGY_CONSUMPTION", gpu=0) is not None)
    assert one(s2, "DCGM_FI_DEV_POWER_USAGE", gpu=0) is None
    assert one(s2, "gpumon_nvml_errors_total") == 0


def test_concurrent_scrapes_during_changes(gpumon):
    fx = gu.load_fixture("dgx-8gpu-mig")
    gu.hide_pids(fx)
    d = gpumon(fx, interval="100ms")
    errors = []
    stop = threading.Event()

    def scraper():
        while not stop.is_set():
            try:
                r = d.scrape(timeout=10)
                assert r.status == 200, r
                gu.parse_metrics(r.text())
            except Exception as exc:  # noqa: BLE001 - reported below
                errors.append(exc)
                return

    threads = [threading.Thread(target=scraper) for _ in range(4)]
    for t in threads:
        t.start()
    try:
        for step in range(10):
            fx["gpus"][step % 8]["temperature"] = 40 + step
            d.write_fixture(fx)
            time.sleep(0.15)
    finally:
        stop.set()
        for t in threads:
            t.join(timeout=30)
    assert not errors, errors
    wait_for(lambda: one(d.metrics(), "DCGM_FI_DEV_GPU_TEMP", gpu=1) == 49, 5,
             "the last change")


def test_gpm_sampling_refused(gpumon):
    """A driver that says a GPU has GPM but then refuses its samples (NOT_SUPPORTED), for the
    whole GPU or for MIG instances: no profiling fields, the reason shown, and no NVML error
    counted in every pass (an alert on the error rate would fire for ever)."""
    fx = gu.load_fixture("dgx-8gpu-mig")
    gu.hide_pids(fx)
    fx["gpus"][0]["unsupported"] = ["nvmlGpmSampleGet"]
    fx["gpus"][3]["unsupported"] = ["nvmlGpmMigSampleGet"]
    d = gpumon(fx, interval="100ms")
    s = d.wait_metric("GPU 1's profiling fields",
                      lambda s: one(s, "DCGM_FI_PROF_SM_ACTIVE", gpu=1) is not None)
    time.sleep(1)  # ten passes
    _, s = d.checked()
    for gpu in (0, 3):
        assert not gu.metric_series(s, "DCGM_FI_PROF_SM_ACTIVE", gpu=gpu)
        reasons = gu.metric_series(s, "gpumon_profiling_unavailable_info", gpu=gpu)
        assert len(reasons) == 1 and "nvmlGpm" in reasons[0][0]["reason"], reasons
    assert one(s, "gpumon_nvml_errors_total") == 0
