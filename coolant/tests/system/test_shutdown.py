"""The staged shutdown end to end: a pump fails, the controller schedules a power cut, and coold
must have the GPU queue's jobs and the containers checkpointed and stopped, tell the controller,
and run the shutdown command exactly once, all before the cut. The jobs run under the real gpuqd
(on a node without GPUs), submitted with the real gpuq CLI."""

import json
import re
import time

import pytest

import gpuqutil
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
    assert sysutil.metric(daemon.metrics(), "coold_shutdown_stage") == 7
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


# ---- the GPU job queue: gpuqd drained as the first stage ----

# A job that checkpoints on SIGTERM (at once, so the file is there when the next stage starts)
# and says when its trap is set.
GPUQ_JOB = ('trap "echo checkpointed > {ck}; exit 0" TERM; echo up > {up}; '
            "while :; do sleep 0.1; done")

# A hook (the announce stage, after the jobs) recording whether the job's checkpoint exists.
CHECKPOINT_HOOK = """#!/bin/sh
ckpt=no; [ -f {ck} ] && ckpt=yes
echo "hook $1 checkpoint=$ckpt" >> {log}
"""


@pytest.fixture
def gpuqd(workdir):
    """The real gpuqd as root in workdir (socket workdir/gpuq.sock), on a node without GPUs (no
    NVML library: jobs without --gpus run anyway), in a fresh cgroup of its own; at the end it is
    stopped and whatever is left in its cgroup is killed."""
    d = gpuqutil.Gpuqd(workdir, config="[queue.default]\npriority = 0\n", fixture=None)
    try:
        d.start()
        yield d
    finally:
        d.destroy()


def _submit_checkpointing_job(gpuqd, workdir):
    """Submits GPUQ_JOB with the gpuq CLI (grace 5 s) and waits until its trap is set; returns
    (job id, checkpoint file)."""
    ck, up = workdir / "ck", workdir / "up"
    jid = gpuqutil.submit(gpuqd, "--grace", "5", "--", "sh", "-c",
                          GPUQ_JOB.format(ck=ck, up=up), cwd=workdir)
    gpuqd.wait_state(jid, "RUNNING")
    sysutil.wait_for(up.exists, 20, f"job {jid} to set its trap")
    assert not ck.exists()
    return jid, ck


def _shutdown_stages(daemon):
    """The stages of the real shutdown as coold's API lists them (GET /v1/events: one event a
    finished stage, in order), as {"name", "ok", "detail"}."""
    return [{"name": e["fields"]["stage"], "ok": e["fields"]["ok"],
             "detail": e["fields"]["detail"]}
            for e in daemon.events()
            if e["type"] == "shutdown" and "ok" in e.get("fields", {})
            and not e["fields"].get("drill")]


def _pump_failure(coolsim, coold, **coold_options):
    """Runs the pump-failure scenario to its power cut against a coold made with coold_options;
    returns the daemon once the cut came in order."""
    sim = coolsim("pump-failure", duration=120)
    daemon = coold(sim.link, **coold_options)
    hook = daemon.hooks_dir / "10-checkpoint"
    hook.write_text(CHECKPOINT_HOOK.format(ck=daemon.workdir / "ck",
                                           log=daemon.workdir / "hook.log"))
    hook.chmod(0o755)
    daemon.wait_up()
    rc = sim.wait(90)
    report = sim.report()
    assert rc == 0, f"coolsim verdict {rc}: {json.dumps(report)}"
    assert report["orderly"] is True, report
    assert len(daemon.command_runs()) == 1, daemon.command_runs()
    return daemon


def test_pump_failure_drains_gpuq_jobs_first(workdir, gpuqd, coolsim, coold):
    jid, ck = _submit_checkpointing_job(gpuqd, workdir)

    daemon = _pump_failure(coolsim, coold, gpuqd_socket=gpuqd.socket)

    # The job got its checkpoint signal and had written its checkpoint when the hooks ran (the
    # stage after the jobs).
    assert ck.read_text().strip() == "checkpointed"
    hook_log = (workdir / "hook.log").read_text().splitlines()
    assert hook_log == ["hook precritical checkpoint=yes"], hook_log
    stages = _shutdown_stages(daemon)
    assert [s["name"] for s in stages] == sysutil.SHUTDOWN_STAGES, stages
    jobs = stages[0]
    assert jobs["ok"], jobs
    m = re.fullmatch(r"gpuqd drained: stopped 1 job \(grace up to ([0-9.]+)s\), 0 left running",
                     jobs["detail"])
    assert m and float(m.group(1)) > 5, jobs  # the job's own 5 s fitted in the stage

    # gpuqd sent SIGTERM with the job's own grace, and the job is back in the queue, held there
    # by the drain.
    r = gpuqd.api("GET", f"/v1/jobs/{jid}")
    assert r.status == 200, r.text()
    job, events = r.json()["job"], r.json()["events"]
    assert job["state"] == "PENDING" and job["reason"] == "Drained", job
    assert job["preemptions"] == 1, job
    assert any("SIGTERM sent, SIGKILL after 5s" in e["text"] for e in events), events
    status = gpuqd.api("GET", "/v1/status").json()
    assert status["drained"] is True, status
    assert status["jobs"].get("RUNNING", 0) == 0, status


def test_pump_failure_without_gpuqd_skips_the_jobs_stage(workdir, coolsim, coold):
    absent = workdir / "gpuq.sock"
    daemon = _pump_failure(coolsim, coold, gpuqd_socket=absent)
    stages = _shutdown_stages(daemon)
    assert [s["name"] for s in stages] == sysutil.SHUTDOWN_STAGES, stages
    assert stages[0] == {"name": "jobs", "ok": True,
                         "detail": f"gpuqd is not running (no socket at {absent})"}, stages
    assert (workdir / "hook.log").read_text().splitlines() == [
        "hook precritical checkpoint=no"]


def test_drill_asks_gpuqd_and_stops_no_job(workdir, gpuqd, coolsim, coold):
    jid, ck = _submit_checkpointing_job(gpuqd, workdir)
    sim = coolsim("normal")
    daemon = coold(sim.link, gpuqd_socket=gpuqd.socket)
    daemon.wait_up()
    r = daemon.post("/v1/drill")
    assert r.status == 200, r
    stages = r.json()["stages"]
    assert stages[0] == {"name": "jobs", "ok": True, "seconds": stages[0]["seconds"],
                         "detail": "would drain gpuqd and stop 1 running job"}, stages
    assert gpuqd.job(jid)["state"] == "RUNNING"
    assert gpuqd.api("GET", "/v1/status").json()["drained"] is False
    assert not ck.exists(), "a drill signalled a job"
