"""The staged shutdown end to end: a pump fails, the controller schedules a power cut, and coold
must have the containers checkpointed and stopped, tell the controller, and run the shutdown
command exactly once, all before the cut."""

import json
import re
import time

import sysutil

# A workload that checkpoints on SIGTERM: the checkpoint takes a second (as a real one would),
# then the file appears and the container exits. `wait` lets the trap run at once.
CHECKPOINTING_WORKLOAD = (
    'trap "sleep 1; echo saved > /ckpt/checkpoint; exit 0" TERM; '
    "while :; do sleep 0.1 & wait $!; done"
)

# The shutdown command: records, at the moment it runs, whether the checkpoint exists and
# whether the container still runs.
CHECKING_COMMAND = """#!/bin/sh
ckpt=no; [ -f {ckpt}/checkpoint ] && ckpt=yes
running=$(DOCKER_HOST={host} {cli} inspect -f '{{{{.State.Running}}}}' {name} 2>&1)
echo "$(date +%s.%N) checkpoint=$ckpt running=$running" >> {log}
"""


def _requests(report, verb):
    """How many requests of a verb coolsim got from the host."""
    return int(report.get("requests", {}).get(verb, 0))


def test_pump_failure_checkpoints_containers_before_the_command(
        workdir, dockerd, container, coolsim, coold):
    ckpt = workdir / "ckpt"
    ckpt.mkdir(mode=0o777)
    ckpt.chmod(0o777)
    name = f"gn-ckpt-{workdir.name}"
    container(name, CHECKPOINTING_WORKLOAD, volumes=[(ckpt, "/ckpt")])
    log = workdir / "command.log"
    command = CHECKING_COMMAND.format(ckpt=ckpt, host=dockerd.host, cli=dockerd.cli, name=name,
                                      log=log)

    sim = coolsim("pump-failure", duration=120)
    daemon = coold(sim.link, docker_socket=dockerd.socket, command_script=command)
    daemon.wait_up()

    rc = sim.wait(90)
    report = sim.report()
    assert rc == 0, f"coolsim verdict {rc}: {json.dumps(report)}"
    assert report["orderly"] is True or report["power_cut"] is False, report
    assert _requests(report, "HALT") >= 1, report

    runs = log.read_text().splitlines() if log.exists() else []
    assert len(runs) == 1, f"shutdown command ran {len(runs)} times: {runs}"
    assert "checkpoint=yes" in runs[0], runs[0]
    assert "running=false" in runs[0], runs[0]
    assert (ckpt / "checkpoint").read_text().strip() == "saved"

    # The controller is gone now (it cut power); a lost, hot controller must not start a second
    # shutdown: the latch holds.
    status = daemon.status()
    assert status["shutdown"]["stage"] == "done", status["shutdown"]
    assert status["safety"]["state"] == "shutting-down", status["safety"]
    assert sysutil.metric(daemon.metrics(), "coold_shutdown_stage") == 6
    time.sleep(2)
    runs = log.read_text().splitlines()
    assert len(runs) == 1, f"shutdown command ran again: {runs}"


def test_hung_docker_engine_does_not_delay_the_halt(workdir, coolsim, coold):
    engine = sysutil.SilentEngine(workdir / "hung-docker.sock")
    try:
        sim = coolsim("pump-failure", duration=120)
        # The default grace (20 s) would fit inside the cut delay on its own; a hung engine must
        # not stretch it to the cut.
        daemon = coold(sim.link, docker_socket=engine.path,
                       overrides={"shutdown.container_grace": "20s"})
        daemon.wait_up()
        rc = sim.wait(90)
        report = sim.report()
        assert rc == 0, f"coolsim verdict {rc}: {json.dumps(report)}"
        assert _requests(report, "HALT") >= 1, report
        assert len(daemon.command_runs()) == 1, daemon.command_runs()
        assert engine.accepted >= 1, "coold never tried the Docker Engine"
    finally:
        engine.close()


def test_drill_runs_every_stage_and_stops_nothing(workdir, dockerd, container, coolsim, coold):
    name = f"gn-drill-{workdir.name}"
    container(name, CHECKPOINTING_WORKLOAD, volumes=[])
    sim = coolsim("normal")
    daemon = coold(sim.link, docker_socket=dockerd.socket)
    hook_log = workdir / "hook.log"
    hook = daemon.hooks_dir / "10-record"
    hook.write_text(f'#!/bin/sh\necho "$1 $COOLD_EVENT drill=$COOLD_DRILL" >> {hook_log}\n')
    hook.chmod(0o755)
    daemon.wait_up()

    r = daemon.post("/v1/drill")
    assert r.status == 200, r
    stages = r.json()["stages"]
    assert [s["name"] for s in stages] == sysutil.SHUTDOWN_STAGES, stages
    failed = [s for s in stages if not s["ok"]]
    assert not failed, stages
    # The drill names what a real stop would stop: at least our container (the session's engine
    # may run other tests' containers at the same time).
    containers = next(s for s in stages if s["name"] == "containers")
    m = re.fullmatch(r"would stop (\d+): (.*)", containers["detail"])
    assert m and int(m.group(1)) >= 1, containers
    assert name in m.group(2).split(", ") and len(m.group(2).split(", ")) == int(m.group(1)), \
        containers

    assert dockerd.running(name), "a drill stopped a container"
    assert daemon.command_runs() == [], "a drill ran the shutdown command"
    assert hook_log.read_text().split() == ["drill", "drill", "drill=1"]

    # A drill does not latch: the daemon is back to normal and can still act on a real alarm.
    status = daemon.status()
    assert status["safety"]["state"] == "normal", status["safety"]
    assert status["shutdown"]["stage"] in ("idle", "done"), status["shutdown"]
    sim.stop()
    assert _requests(sim.report(), "HALT") == 0, "a drill sent HALT to the controller"

    events = daemon.events()
    assert any(e["type"] == "shutdown" and e["source"] == "daemon" for e in events), events
    r = sysutil.run([sysutil.binary("coolctl"), "--socket", daemon.socket, "events"])
    assert r.returncode == 0 and "shutdown" in r.stdout, r.stdout + r.stderr
