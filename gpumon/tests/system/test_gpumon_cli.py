"""gpumon's command line and lifecycle: flags and config file (errors included), --check-config,
--version/--help, a busy port, and SIGTERM."""

import http.client
import signal
import socket
import time

import pytest

import gpumonutil as gu
from gpumonutil import gpumon, one, workdir  # noqa: F401 - pytest fixtures


def run_gpumon(*args, timeout=20):
    return gu.run([gu.gpumon_binary(), *args], timeout=timeout,
                  env={"LD_LIBRARY_PATH": gu.fake_nvml_dir(),
                       "FAKE_NVML_FIXTURE": str(gu.fixture_path("consumer-1gpu"))})


def assert_no_sanitizer(r):
    out = r.stdout + r.stderr
    assert not any(m in out for m in gu.SANITIZER_MARKERS), out


def test_version_and_help():
    r = run_gpumon("--version")
    assert r.returncode == 0 and r.stdout.startswith("gpumon "), (r.stdout, r.stderr)
    r = run_gpumon("--help")
    assert r.returncode == 0, r.stderr
    for flag in ("--config", "--listen", "--interval", "--slow-interval", "--nvml-library",
                 "--hostname", "--proc-root", "--check-config"):
        assert flag in r.stdout, flag


@pytest.mark.parametrize("args, names", [
    (["--interval", "0"], "interval"),
    (["--interval", "soon"], "interval"),
    (["--slow-interval", "2h"], "slow"),
    (["--listen", "127.0.0.1:99999"], "listen"),
    (["--listen", "nowhere"], "listen"),
    (["--hostname", "n" * 300], "hostname"),
    (["--log-level", "loud"], "log"),
    (["--proc-root", "relative/proc"], "proc"),
    (["--no-such-flag"], "no-such-flag"),
    (["--interval"], "interval"),
])
def test_bad_flags_fail_clearly(args, names):
    # Port 0 first: should a bad flag be accepted after all, gpumon binds nothing that matters
    # (and the run's timeout fails the test).
    r = run_gpumon("--listen", "127.0.0.1:0", *args, timeout=10)
    assert r.returncode != 0, (args, r.stdout, r.stderr)
    # The first line says what was wrong (a usage text may follow).
    assert names in r.stderr.splitlines()[0].lower(), (args, r.stderr)
    assert_no_sanitizer(r)


def test_bad_config_file_fails_clearly(workdir):
    conf = workdir / "gpumon.conf"
    conf.write_text("[gpumon]\ninterval = 1s\nintervall = 2s\n")
    r = run_gpumon("--config", conf)
    assert r.returncode != 0
    assert "gpumon.conf:3" in r.stderr and "intervall" in r.stderr, r.stderr

    conf.write_text("[gpumon]\nslow_interval = 100ms\ninterval = 1s\n")
    r = run_gpumon("--config", conf)
    assert r.returncode != 0 and "slow_interval" in r.stderr, r.stderr

    conf.write_text("[exporter]\nlisten = :9400\n")
    r = run_gpumon("--config", conf)
    assert r.returncode != 0 and "exporter" in r.stderr, r.stderr

    r = run_gpumon("--config", workdir / "missing.conf")
    assert r.returncode != 0 and "missing.conf" in r.stderr, r.stderr
    assert_no_sanitizer(r)


def test_check_config(workdir):
    conf = workdir / "gpumon.conf"
    port = gu.free_port()
    conf.write_text(f"[gpumon]\nlisten = 127.0.0.1:{port}\ninterval = 500ms\n"
                    "slow_interval = 5s\nrescan_interval = 10s\nhostname = node07\n"
                    "process_metrics = no\npcie_throughput = yes\nproc_root = /proc\n")
    t0 = time.monotonic()
    r = run_gpumon("--config", conf, "--check-config")
    assert r.returncode == 0, (r.stdout, r.stderr)
    assert time.monotonic() - t0 < 10
    # It checked and left: nothing listens on the configured port.
    with socket.socket() as s:
        s.bind(("127.0.0.1", port))

    conf.write_text("[gpumon]\ninterval = fast\n")
    r = run_gpumon("--config", conf, "--check-config")
    assert r.returncode != 0 and "interval" in r.stderr, r.stderr
    # A flag is checked too.
    r = run_gpumon("--check-config", "--interval", "0")
    assert r.returncode != 0 and "interval" in r.stderr, r.stderr


def test_config_file_and_flags(gpumon, workdir):
    file_port = gu.free_port()
    fx = gu.load_fixture("consumer-1gpu")
    gu.hide_pids(fx)
    # The file sets listen, hostname and process_metrics; --listen and --hostname (given by
    # the test helper) override the first two, the third stays from the file.
    d = gpumon(fx, config={"listen": f"127.0.0.1:{file_port}", "hostname": "fromfile",
                           "process_metrics": "no", "pcie_throughput": "yes"})
    s = d.wait_values(fx)
    assert one(s, "gpumon_gpu_up", gpu=0, Hostname="testhost") == 1
    with pytest.raises(OSError):
        socket.create_connection(("127.0.0.1", file_port), timeout=2).close()
    assert not gu.metric_series(s, "gpumon_process_memory_bytes")
    # pcie_throughput = yes: NVML's KB/s (KiB, as NVIDIA counts) shown as bytes/s.
    g = fx["gpus"][0]
    s = d.wait_metric("PCIe throughput", lambda s: one(
        s, "gpumon_pcie_tx_bytes_per_second", gpu=0) is not None)
    assert one(s, "gpumon_pcie_tx_bytes_per_second", gpu=0) == g["pcie_tx_kbps"] * 1024
    assert one(s, "gpumon_pcie_rx_bytes_per_second", gpu=0) == g["pcie_rx_kbps"] * 1024
    d.checked()


def test_hostname_from_config_file(workdir):
    conf = workdir / "gpumon.conf"
    port = gu.free_port()
    conf.write_text(f"[gpumon]\nlisten = 127.0.0.1:{port}\nhostname = node07\n")
    fx = workdir / "fixture.json"
    fx.write_text(gu.fixture_path("consumer-1gpu").read_text())
    proc = gu.Proc([gu.gpumon_binary(), "--config", conf], workdir / "gpumon.log",
                   env={"LD_LIBRARY_PATH": gu.fake_nvml_dir(), "FAKE_NVML_FIXTURE": str(fx)})
    try:
        s = gu.wait_for(lambda: gu.parse_metrics(gu.scrape(port, timeout=3).text()), 20,
                        "gpumon on the configured port")
        assert one(s, "gpumon_gpu_up", gpu=0, Hostname="node07") == 1
    finally:
        rc = proc.stop()
    assert rc == 0 and not proc.sanitizer_report(), proc.tail()


def test_busy_port_fails_clearly(workdir):
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        s.listen(1)
        port = s.getsockname()[1]
        r = run_gpumon("--listen", f"127.0.0.1:{port}", "--hostname", "x")
    assert r.returncode != 0
    assert str(port) in r.stderr, r.stderr
    assert_no_sanitizer(r)


def test_sigterm_exits_zero_promptly(gpumon):
    fx = gu.load_fixture("dgx-8gpu-mig")
    gu.hide_pids(fx)
    d = gpumon(fx)
    d.checked()
    # Prometheus keeps its connection open between scrapes: an idle keep-alive connection must
    # not hold the shutdown up.
    conn = http.client.HTTPConnection("127.0.0.1", d.port, timeout=10)
    conn.request("GET", "/metrics")
    conn.getresponse().read()
    t0 = time.monotonic()
    d.proc.popen.send_signal(signal.SIGTERM)
    rc = d.proc.wait(timeout=10)
    took = time.monotonic() - t0
    conn.close()
    assert rc == 0, d.proc.tail()
    assert took < 5, f"took {took:.1f}s to stop"
    assert not d.proc.sanitizer_report(), d.proc.tail()


def test_sigterm_while_driver_missing(gpumon):
    d = gpumon(None, nvml=None)
    d.checked()
    d.proc.popen.send_signal(signal.SIGTERM)
    assert d.proc.wait(timeout=10) == 0, d.proc.tail()


def test_systemd_notifications_watchdog_and_sighup(gpumon, workdir):
    """Under systemd (a NOTIFY_SOCKET of the test's own): READY=1 once serving, WATCHDOG=1 pings
    within the interval while samples are fresh, SIGHUP said and ignored (gpumon keeps serving),
    STOPPING=1 on SIGTERM, exit 0."""
    sock_path = str(workdir / "notify.sock")
    sock = socket.socket(socket.AF_UNIX, socket.SOCK_DGRAM)
    sock.bind(sock_path)
    sock.settimeout(10)
    try:
        d = gpumon("consumer-1gpu", env={"NOTIFY_SOCKET": sock_path, "WATCHDOG_USEC": "600000"})
        messages = []
        while sum(m.startswith("WATCHDOG=1") for m in messages) < 3:
            messages.append(sock.recv(4096).decode())
        assert messages[0].startswith("READY=1\nSTATUS="), messages
        d.proc.popen.send_signal(signal.SIGHUP)
        gu.wait_for(lambda: "SIGHUP ignored" in d.proc.log(), 5, "the SIGHUP to be logged")
        d.checked()
        d.proc.popen.send_signal(signal.SIGTERM)
        while "STOPPING=1" not in messages:
            messages.append(sock.recv(4096).decode())
        assert d.proc.wait(timeout=10) == 0, d.proc.tail()
    finally:
        sock.close()


def test_stuck_driver_stops_the_watchdog_without_spinning(gpumon, workdir):
    """A sampler stuck in the driver: gpumon stops pinging systemd's watchdog (so systemd
    restarts it) and, meanwhile, waits rather than spins on the overdue ping."""
    sock_path = str(workdir / "notify.sock")
    sock = socket.socket(socket.AF_UNIX, socket.SOCK_DGRAM)
    sock.bind(sock_path)
    sock.settimeout(10)
    try:
        fx = gu.load_fixture("consumer-1gpu")
        d = gpumon(fx, env={"NOTIFY_SOCKET": sock_path, "WATCHDOG_USEC": "600000"})
        while "WATCHDOG=1" not in sock.recv(4096).decode():
            pass
        # Every sampling call now hangs 10 s: the snapshot goes stale within 3 intervals.
        fx["gpus"][0]["delay_us"] = {"nvmlDeviceGetUtilizationRates": 10_000_000}
        d.write_fixture(fx)
        # Pings come every 0.3 s while the snapshot is fresh; a second without one means the
        # sampler is stuck. What came before that is drained here, not counted below.
        sock.settimeout(1)
        deadline = time.monotonic() + 6
        try:
            while time.monotonic() < deadline:
                sock.recv(4096)
            raise AssertionError("the watchdog pings went on for 6 s with the sampler stuck")
        except socket.timeout:
            pass

        def cpu_ticks():
            fields = open(f"/proc/{d.proc.pid}/stat").read().rsplit(")", 1)[1].split()
            return int(fields[11]) + int(fields[12])  # utime + stime

        before = cpu_ticks()
        pings = 0
        sock.settimeout(2)
        try:
            while True:
                pings += "WATCHDOG=1" in sock.recv(4096).decode()
        except socket.timeout:
            pass
        used = cpu_ticks() - before
        assert pings == 0, f"{pings} watchdog pings while the sampler was stuck"
        # Two seconds of wall time; a spinning loop uses about as much CPU time (200 ticks).
        assert used < 25, f"{used} ticks of CPU in 2 s while waiting"
        del fx["gpus"][0]["delay_us"]
        d.write_fixture(fx)
    finally:
        sock.close()
