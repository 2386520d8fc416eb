"""gpuq's jobs as users see them: who a job runs as, with which GPUs, environment, cgroup scope
and log; who may act on whose job; the Kubernetes Job YAML; a container job through capsule."""

import json
import os
import pwd
import stat
from pathlib import Path

import gpuqutil as gu
from gpuqutil import QUEUES, gpuq, submit


def test_job_runs_as_its_submitter_with_exactly_its_gpus(gpuqd, workdir, users):
    d = gpuqd(config=QUEUES)
    ann = users.user("ann")
    probe = gu.script(workdir, "probe.sh",
                      'echo "uid=$(id -u) gid=$(id -g)"\n'
                      'echo "cuda=$CUDA_VISIBLE_DEVICES"\n'
                      'echo "nvidia=$NVIDIA_VISIBLE_DEVICES"\n'
                      'echo "job=$GPUQ_JOB_ID"\n'
                      'echo "mine=$MY_SETTING"\n'
                      'echo "cwd=$(pwd)"\n'
                      'grep "^0::" /proc/self/cgroup\n'
                      'echo oops >&2\n')
    jid = submit(d, "--gpus", "2", "--", probe, user=ann, cwd=workdir / "shared",
                 env={"MY_SETTING": "kept"})
    job = d.wait_state(jid, ("COMPLETED", "FAILED"))
    assert job["state"] == "COMPLETED", job
    whole, _ = gu.fixture_gpus()
    log = d.joblog(jid)
    assert f"uid={ann[0]} gid={ann[1]}" in log
    # By UUID, in NVML order: the first two free whole GPUs.
    assert f"cuda={whole[0]},{whole[1]}\n" in log
    assert f"nvidia={whole[0]},{whole[1]}\n" in log
    assert f"job={jid}\n" in log
    assert "mine=kept\n" in log
    assert f"cwd={workdir / 'shared'}\n" in log
    assert f"/gpuq-job-{jid}.scope\n" in log  # the scope gpumon attributes GPU memory by
    assert "oops" in log  # stderr too
    st = (d.state / "logs" / f"{jid}.log").stat()
    assert st.st_uid == ann[0] and stat.S_IMODE(st.st_mode) == 0o600
    assert job["uid"] == ann[0] and job["user"] == users.name("ann")
    assert job["allocated"] == whole[:2]
    # The log reads back through the CLI as the job's owner.
    assert gpuq(d, "logs", jid, user=ann).stdout == log


def test_a_user_claiming_another_uid_still_runs_as_themself(gpuqd, workdir, users):
    """The job's user comes from the socket's peer credentials; a uid in the request is refused
    as an unknown field, not obeyed."""
    d = gpuqd(config=QUEUES)
    ann = users.user("ann")
    body = json.dumps({"command": ["id", "-u"], "uid": 0, "cwd": "/"})
    r = gu.run(["curl", "-s", "--unix-socket", str(d.socket), "-XPOST", "http://x/v1/jobs",
                "-d", body], user=ann)
    assert "unknown key 'uid'" in r.stdout, r.stdout
    body = json.dumps({"command": ["id", "-u"], "env": ["USER=root", "LOGNAME=root"], "cwd": "/"})
    r = gu.run(["curl", "-s", "--unix-socket", str(d.socket), "-XPOST", "http://x/v1/jobs",
                "-d", body], user=ann)
    jid = json.loads(r.stdout)["id"]
    assert d.wait_state(jid, ("COMPLETED", "FAILED"))["uid"] == ann[0]
    assert d.joblog(jid) == f"{ann[0]}\n"


def test_users_act_on_their_own_jobs_only(gpuqd, workdir, users):
    admins = users.group("admins")
    d = gpuqd(config=QUEUES, admin_group=admins)
    ann, bob, eve = users.user("ann"), users.user("bob"), users.user("eve", group="admins")
    shared = workdir / "shared"
    a1 = submit(d, "--", "sleep", "300", user=ann, cwd=shared)
    a2 = submit(d, "--hold", "--", "sleep", "300", user=ann, cwd=shared)
    d.wait_state(a1, "RUNNING")
    for action in ("cancel", "hold", "release"):
        r = gpuq(d, action, a1 if action == "cancel" else a2, user=bob, check=False)
        assert r.returncode == 1 and "another user" in r.stderr, r.stderr
    assert d.job(a1)["state"] == "RUNNING"
    assert d.job(a2)["held"]
    # Bob sees Ann's jobs (as squeue shows everyone's) but not her command or environment.
    listed = json.loads(gpuq(d, "ls", "--json", user=bob).stdout)["jobs"]
    mine = [j for j in listed if j["id"] == a1][0]
    assert "command" not in mine and "env" not in mine
    r = gpuq(d, "logs", a1, user=bob, check=False)
    assert r.returncode == 1
    # The owner and an admin may.
    gpuq(d, "release", a2, user=ann)
    gpuq(d, "cancel", a1, user=eve)
    assert d.wait_state(a1, "CANCELLED")["state"] == "CANCELLED"
    # Every attempt is in the audit log, the refused ones too.
    audit = [json.loads(line) for line in d.audit.read_text().splitlines()]
    denied = [a for a in audit if a["outcome"] == "denied" and a["uid"] == bob[0]]
    assert len(denied) >= 3
    assert any(a["outcome"] == "applied" and a["uid"] == eve[0]
               and a["path"] == f"/v1/jobs/{a1}/cancel" for a in audit)


def test_only_admins_drain(gpuqd, workdir, users):
    d = gpuqd(config=QUEUES)
    ann = users.user("ann")
    r = gpuq(d, "drain", user=ann, check=False)
    assert r.returncode == 1 and "only root" in r.stderr
    assert not d.api("GET", "/v1/status").json()["drained"]


def test_seed_job_yaml_accepted(gpuqd, workdir, users):
    cfg = QUEUES + "\n[queue.nightly-compute]\npriority = 5\nclass = burstable\n"
    d = gpuqd(config=cfg)
    ann = users.user("ann")
    seed = gu.REPO / "deploy" / "gpuq" / "examples" / "physics-simulation.yaml"
    yaml = workdir / "shared" / "job.yaml"
    yaml.write_text(seed.read_text())
    jid = submit(d, "-f", yaml, "--hold", user=ann, cwd=workdir / "shared")
    job = d.job(jid)
    assert job["queue"] == "nightly-compute"
    assert job["name"].startswith("physics-simulation-") and len(job["name"]) == 24
    assert job["image"] == "registry.infn.it/physics/sim:v1.2"
    assert job["gpus"]["count"] == 1 and job["gpus"]["kind"] == "whole"
    assert job["cpu_milli"] == 8000 and job["mem_bytes"] == 32 * 2**30
    assert job["backoff_limit"] == 3
    assert job["held"]


def test_job_yaml_with_an_unsupported_field_refused(gpuqd, workdir, users):
    d = gpuqd(config=QUEUES)
    ann = users.user("ann")
    yaml = workdir / "shared" / "job.yaml"
    yaml.write_text("""apiVersion: batch/v1
kind: Job
metadata:
  name: with-volume
spec:
  template:
    spec:
      containers:
      - name: main
        image: busybox
        command: ["true"]
        volumeMounts:
        - name: data
          mountPath: /data
      restartPolicy: Never
""")
    r = gpuq(d, "submit", "-f", yaml, user=ann, cwd=workdir / "shared", check=False)
    assert r.returncode != 0
    assert "spec.template.spec.containers[0].volumeMounts" in r.stderr, r.stderr
    assert d.api("GET", "/v1/jobs?all=1").json()["jobs"] == []


def test_a_job_that_can_never_fit_is_refused(gpuqd, workdir, users):
    d = gpuqd(config=QUEUES)
    ann = users.user("ann")
    r = gpuq(d, "submit", "--gpus", "99", "--", "true", user=ann, cwd=workdir / "shared",
             check=False)
    assert r.returncode != 0 and "never run on this node" in r.stderr
    r = gpuq(d, "submit", "--queue", "nosuch", "--", "true", user=ann, cwd=workdir / "shared",
             check=False)
    assert r.returncode != 0 and "nosuch" in r.stderr


def test_gpumon_attributes_the_jobs_gpu_memory_by_its_scope(gpuqd, workdir, users):
    """The job's process sits in gpuq-job-ID.scope, which it cannot leave; gpumon labels its GPU
    memory with the job from there, whatever GPUQ_JOB_ID the process claims."""
    import gpumonutil as gm

    d = gpuqd(config=QUEUES)
    ann = users.user("ann")
    shared = workdir / "shared"
    pidfile = shared / "pid"
    jid = submit(d, "--gpus", "1", "--", "sh", "-c",
                 f"echo $$ > {pidfile}; exec env GPUQ_JOB_ID=999 sleep 300", user=ann, cwd=shared)
    gu.wait_for(lambda: pidfile.exists() and pidfile.read_text().strip(), 20, "the job's pid")
    pid = int(pidfile.read_text())
    fx = gm.load_fixture("consumer-1gpu")
    fx["gpus"][0]["processes"] = [{"pid": pid, "used_memory": 2 << 30, "type": "compute"}]
    (workdir / "gpumon").mkdir()
    mon = gm.Gpumon(workdir / "gpumon", fx)
    try:
        mon.wait_ready()
        s = mon.wait_metric("the job's process", lambda s: gm.metric_series(
            s, "gpumon_process_memory_bytes", pid=str(pid)))
        (labels, value), = gm.metric_series(s, "gpumon_process_memory_bytes", pid=str(pid))
        assert value == 2 << 30
        assert labels["hpc_job"] == f"gpuq://{jid}", labels
        assert labels["user"] == users.name("ann")
    finally:
        problem = gm.check_stopped(mon)
    assert not problem, problem


def test_the_job_has_its_submitters_umask(gpuqd, workdir, users):
    d = gpuqd(config=QUEUES)
    ann = users.user("ann")
    shared = workdir / "shared"
    out = shared / "made-by-job"
    argv = gu.gntest.as_user(ann, ["sh", "-c", f'umask 077; exec "$0" --socket {d.socket} submit '
                                        f'--parsable -- sh -c "umask; touch {out}"',
                            str(gu.gpuq_path())])
    r = gu.subprocess.run(argv, capture_output=True, text=True, cwd=shared, timeout=30)
    assert r.returncode == 0, r.stderr
    jid = int(r.stdout)
    assert d.wait_state(jid, ("COMPLETED", "FAILED"))["state"] == "COMPLETED"
    assert d.joblog(jid).strip() == "0077"
    assert stat.S_IMODE(out.stat().st_mode) == 0o600
