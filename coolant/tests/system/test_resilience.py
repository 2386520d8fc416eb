"""coold under what production throws at it: a crash in the middle of an alarm, and a full disk
under its audit log."""

import json
import os
import signal
import subprocess
import time

import pytest

import sysutil


def test_coold_killed_before_the_alarm_restarts_and_still_halts_in_time(workdir, coolsim):
    """The daemon dies (SIGKILL: no cleanup, a stale socket and lock left behind) before the pump
    fails, and comes back only after the alarm. The new daemon must take over the line, see the
    standing alarm and still stop the host before the cut."""
    sim = coolsim("pump-failure", duration=120)
    first = sysutil.Coold(workdir, sim.link, name="first")
    first.wait_up()
    first.proc.popen.send_signal(signal.SIGKILL)
    first.proc.wait(10)

    # The pump stops ~5 s into the run and the cut is due 30 s after the alarm: come back late.
    time.sleep(9)
    second = sysutil.Coold(workdir, sim.link, name="first")
    try:
        status = second.wait_up()
        assert status["telemetry"]["level"] == "precritical", status["telemetry"]
        rc = sim.wait(90)
        report = sim.report()
        assert rc == 0, f"coolsim verdict {rc}: {json.dumps(report)}"
        assert report["orderly"] is True, report
        assert len(second.command_runs()) == 1, second.command_runs()
    finally:
        second.stop()


@pytest.fixture
def tiny_fs(workdir):
    """A 64 KiB tmpfs that a test can fill up."""
    mnt = workdir / "tiny"
    mnt.mkdir()
    subprocess.run(["mount", "-t", "tmpfs", "-o", "size=64k", "tmpfs", str(mnt)], check=True)
    yield mnt
    subprocess.run(["umount", "-l", str(mnt)], check=False)


def _fill(path):
    fd = os.open(path, os.O_WRONLY | os.O_CREAT, 0o600)
    try:
        while os.write(fd, b"x" * 4096) > 0:
            pass
    except OSError:
        pass
    finally:
        os.close(fd)


def test_full_disk_under_the_audit_log_refuses_writes(workdir, tiny_fs, coolsim, coold):
    """A change that cannot be audited is not made; reads go on; writes work again once there is
    space."""
    sim = coolsim("normal")
    daemon = coold(sim.link, overrides={"control.audit_log": tiny_fs / "audit.log"})
    daemon.wait_up()
    before = daemon.settings()["limit.warning"]
    filler = tiny_fs / "filler"
    _fill(filler)

    r = daemon.put("/v1/settings", {"settings": {"limit.warning": "41"}})
    assert r.status == 503, r
    assert "audit log" in r.json()["error"], r.json()
    assert daemon.settings()["limit.warning"] == before
    assert daemon.status()["controller"]["link"] == "up"

    os.unlink(filler)
    r = daemon.put("/v1/settings", {"settings": {"limit.warning": "41"}})
    assert r.status == 200, r
    assert daemon.settings()["limit.warning"] == "41.00"
    records = [json.loads(line) for line in (tiny_fs / "audit.log").read_text().splitlines()]
    assert [rec["outcome"] for rec in records][-2:] == ["requested", "applied"], records


def test_unwritable_audit_log_keeps_watching_but_refuses_changes(workdir, coolsim, coold):
    """Watching the coolant matters more than auditing: coold starts without its audit log, keeps
    its telemetry and safety logic, and refuses every change it could not record."""
    sim = coolsim("normal")
    daemon = coold(sim.link, overrides={"control.audit_log": "/proc/no-such-dir/audit.log"})
    daemon.wait_up()
    assert "refused" in daemon.proc.log()
    r = daemon.put("/v1/settings", {"settings": {"limit.warning": "41"}})
    assert r.status == 503, r
    assert daemon.settings()["limit.warning"] == "45.00"
    assert daemon.post("/v1/drill").status == 503
    assert sysutil.metric(daemon.metrics(), "coold_controller_up") == 1


FLOOD = r"""
import http.client, socket, sys
class C(http.client.HTTPConnection):
    def connect(self):
        self.sock = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
        self.sock.connect(sys.argv[1])
body = '{"settings": {"limit.warning": "%s"}}' % ("4" * 60000)
codes = set()
for _ in range(200):
    c = C("localhost")
    c.request("PUT", "/v1/settings", body=body, headers={"Content-Type": "application/json"})
    codes.add(c.getresponse().status)
    c.close()
print(sorted(codes))
"""


def test_refused_writes_cannot_fill_the_audit_log(workdir, coolsim, coold, users):
    """A local user without rights hammering the write endpoints with large bodies leaves a
    bounded trace: no bodies, at most a few records a second, and a count of the rest."""
    sim = coolsim("normal")
    daemon = coold(sim.link)
    daemon.wait_up()
    r = sysutil.run(["/usr/bin/python3", "-c", FLOOD, daemon.socket], user=users.ids("reader"),
                    timeout=60)
    assert r.returncode == 0 and r.stdout.strip() == "[403]", (r.stdout, r.stderr)
    size = daemon.audit_log.stat().st_size
    records = [json.loads(line) for line in daemon.audit_log.read_text().splitlines()]
    assert all(rec["outcome"] == "denied" and rec["request"] is None for rec in records), records
    assert len(records) < 100, len(records)
    assert size < 40000, size
    # The next refusal recorded after the burst accounts for the ones left out.
    time.sleep(1.1)
    r = sysutil.run(["/usr/bin/python3", "-c", FLOOD.replace("range(200)", "range(1)"),
                     daemon.socket], user=users.ids("reader"))
    records = [json.loads(line) for line in daemon.audit_log.read_text().splitlines()]
    left_out = sum(rec.get("denied_not_recorded", 0) for rec in records)
    assert left_out > 0 and left_out + len(records) == 201, (left_out, len(records))


def test_sigterm_during_an_emergency_shutdown_finishes_it_first(workdir, coolsim, coold):
    """`systemctl stop coold` (or a hook that powers off) while the staged shutdown runs must not
    cut it short: HALT still reaches the controller and the command still runs, then coold
    exits cleanly."""
    sim = coolsim("pump-failure", duration=120)
    daemon = coold(sim.link)
    hook = daemon.hooks_dir / "10-slow"
    hook.write_text("#!/bin/sh\nsleep 3\n")
    hook.chmod(0o755)
    daemon.wait_up()
    sysutil.wait_for(lambda: daemon.status()["shutdown"]["stage"] == "announce", 30,
                     "the shutdown to start")
    daemon.proc.popen.send_signal(signal.SIGTERM)
    assert daemon.proc.wait(60) == 0, daemon.proc.tail()
    assert "finishing it first" in daemon.proc.log()
    assert len(daemon.command_runs()) == 1, daemon.command_runs()
    rc = sim.wait(60)
    report = sim.report()
    assert rc == 0 and report["orderly"] is True, report
