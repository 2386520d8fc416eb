"""/metrics as Prometheus sees it: lint-clean in both states, both formats, gzip on request."""

import gzip
import shutil
import subprocess

import pytest

import sysutil
from sysutil import metric, metric_series, wait_for

SAFETY_STATES = ["normal", "warning", "precritical", "critical", "comm-lost", "shutting-down"]


def promtool_check(text):
    if not shutil.which("promtool"):
        pytest.fail("promtool not found (scripts/install-deps.sh installs prometheus)")
    r = subprocess.run(["promtool", "check", "metrics"], input=text, capture_output=True,
                       text=True, timeout=30)
    assert r.returncode == 0, f"promtool check metrics:\n{r.stdout}{r.stderr}\n---\n{text}"


def test_metrics_while_normal(coolsim, coold):
    sim = coolsim("normal")
    daemon = coold(sim.link)
    daemon.wait_up()
    r = sysutil.scrape(daemon.port)
    assert r.status == 200
    assert r.headers["content-type"].startswith("text/plain; version=0.0.4"), r.headers
    assert "content-encoding" not in r.headers
    text = r.text()
    promtool_check(text)

    s = sysutil.parse_metrics(text)
    for sensor in ("inlet", "outlet", "tank"):
        t = metric(s, "coold_coolant_temperature_celsius", sensor=sensor)
        assert t is not None and 15 < t < 60, (sensor, t)
    for pump in ("1", "2"):
        assert metric(s, "coold_pump_speed_rpm", pump=pump) > 0
        assert 0 < metric(s, "coold_pump_duty_ratio", pump=pump) <= 1
    assert metric(s, "coold_coolant_flow_liters_per_minute") > 0
    assert metric(s, "coold_controller_up") == 1
    assert metric(s, "coold_telemetry_stale") == 0
    assert metric(s, "coold_controller_last_success_timestamp_seconds") > 1.7e9
    assert metric(s, "coold_frames_rejected_total") is not None
    assert metric(s, "coold_reconnects_total") is not None
    states = {dict(k)["state"]: v for k, v in metric_series(s, "coold_safety_state").items()}
    assert sorted(states) == sorted(SAFETY_STATES), states
    assert states["normal"] == 1 and sum(states.values()) == 1, states
    assert metric(s, "coold_controller_level", level="normal") == 1
    assert metric(s, "coold_shutdown_stage") == 0
    assert any(dict(k).get("version") for k in metric_series(s, "coold_build_info"))
    assert "coold_power_cut_in_seconds" in {name for name, _ in s}


def test_openmetrics_and_gzip_negotiation(coolsim, coold):
    sim = coolsim("normal")
    daemon = coold(sim.link)
    daemon.wait_up()

    r = sysutil.scrape(daemon.port, accept="application/openmetrics-text; version=1.0.0")
    assert r.status == 200
    assert r.headers["content-type"].startswith("application/openmetrics-text"), r.headers
    assert r.text().endswith("# EOF\n"), r.text()[-200:]
    om = sysutil.parse_metrics(r.text())
    assert metric(om, "coold_controller_up") == 1

    r = sysutil.scrape(daemon.port, accept_encoding="gzip")
    assert r.status == 200
    assert r.headers.get("content-encoding") == "gzip", r.headers
    plain = gzip.decompress(r.body).decode()
    promtool_check(plain)

    r = sysutil.scrape(daemon.port, accept_encoding="gzip;q=0, identity")
    assert "content-encoding" not in r.headers, r.headers
    sysutil.parse_metrics(r.text())


def test_metrics_during_alarm(coolsim, coold):
    # Drill mode: the alarm is acted on without stopping anything, so the test can look at the
    # metrics while the controller counts down.
    sim = coolsim("pump-failure", duration=120)
    daemon = coold(sim.link, args=["--drill"])
    daemon.wait_up()

    def precritical():
        s = daemon.metrics()
        return s if metric(s, "coold_controller_level", level="precritical") == 1 else None

    wait_for(precritical, 25, "controller level precritical in /metrics", interval=0.25)
    text = sysutil.scrape(daemon.port).text()
    promtool_check(text)
    s = sysutil.parse_metrics(text)
    cut = metric(s, "coold_power_cut_in_seconds")
    assert cut is not None and 0 < cut <= 30, cut
    states = {dict(k)["state"]: v for k, v in metric_series(s, "coold_safety_state").items()}
    assert sum(states.values()) == 1, states
    assert states["precritical"] == 1 or states["shutting-down"] == 1, states
    om = sysutil.scrape(daemon.port, accept="application/openmetrics-text; version=1.0.0")
    assert om.text().endswith("# EOF\n")
    assert daemon.status()["telemetry"]["reason"] == "pump_stopped"
    assert daemon.command_runs() == [], "drill mode ran the shutdown command"
