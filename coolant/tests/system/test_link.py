"""The serial link survives what real lines do: a cable pulled and put back, noise, a controller
that reboots. None of it may shut the node down."""

import sysutil
from sysutil import metric, wait_for


def _assert_no_shutdown(daemon):
    status = daemon.status()
    assert status["shutdown"]["stage"] == "idle", status["shutdown"]
    assert status["safety"]["state"] in ("normal", "warning"), status["safety"]
    assert daemon.command_runs() == [], "the shutdown command ran"
    assert metric(daemon.metrics(), "coold_shutdown_stage") == 0


def _wait_metric(daemon, name, predicate, timeout, what):
    def check():
        value = metric(daemon.metrics(), name)
        return value is not None and predicate(value)
    wait_for(check, timeout, what, interval=0.25)


def test_unplug_reconnects_without_shutdown(coolsim, coold):
    sim = coolsim("unplug", duration=60)
    daemon = coold(sim.link)
    daemon.wait_up()
    # coolsim pulls the line twice; coold must come back both times.
    _wait_metric(daemon, "coold_reconnects_total", lambda v: v >= 2, 50,
                 "two reconnects after two unplugs")
    _wait_metric(daemon, "coold_controller_up", lambda v: v == 1, 15, "controller_up back to 1")
    status = daemon.wait_up()
    assert status["controller"]["reconnects"] >= 2
    _assert_no_shutdown(daemon)
    sim.stop()
    assert sim.report()["power_cut"] is False


def test_garbage_on_the_line_is_rejected_not_fatal(coolsim, coold):
    sim = coolsim("garbage", duration=60)
    daemon = coold(sim.link)
    daemon.wait_up()
    _wait_metric(daemon, "coold_frames_rejected_total", lambda v: v > 0, 20,
                 "rejected frames counted")
    # Valid traffic keeps flowing between the noise: fresh telemetry, link up.
    first = daemon.status()["telemetry"]["uptime_seconds"]
    wait_for(lambda: daemon.status()["telemetry"]["uptime_seconds"] >= first + 3, 15,
             "telemetry to keep advancing through the noise", interval=0.25)
    samples = daemon.metrics()
    assert metric(samples, "coold_controller_up") == 1
    assert metric(samples, "coold_telemetry_stale") == 0
    status = daemon.status()
    assert status["controller"]["frames_rejected"] > 0
    assert status["controller"]["link"] == "up"
    _assert_no_shutdown(daemon)


def test_controller_reboot_resyncs(coolsim, coold):
    sim = coolsim("controller-reboot", duration=60)
    daemon = coold(sim.link)
    daemon.wait_up()
    uptimes = []

    def rebooted():
        s = daemon.status()
        if s["controller"]["link"] == "up" and s["telemetry"]:
            uptimes.append(s["telemetry"]["uptime_seconds"])
        # The controller's uptime starts again after its reboot.
        return len(uptimes) >= 2 and uptimes[-1] < max(uptimes[:-1])

    wait_for(rebooted, 40, "the controller's uptime to restart after its reboot", interval=0.25)
    daemon.wait_up()
    events = daemon.events()
    assert any(e["source"] == "controller" and e["type"] == "BOOT" for e in events), events
    _assert_no_shutdown(daemon)
    sim.stop()
    report = sim.report()
    assert int(report["requests"]["HELLO"]) >= 2, report
    assert report["power_cut"] is False


def test_second_coold_on_the_same_device_fails_clearly(coolsim, coold):
    sim = coolsim("normal")
    first = coold(sim.link)
    first.wait_up()
    second = coold(sim.link, name="second", wait=False)
    rc = second.proc.wait(15)
    assert rc != 0
    assert "busy" in second.proc.log().lower(), second.proc.tail()
    # The owner keeps the line.
    first.wait_up()
    assert sysutil.metric(first.metrics(), "coold_controller_up") == 1
