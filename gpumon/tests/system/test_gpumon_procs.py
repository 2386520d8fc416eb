"""Who uses the GPU and what went wrong on it: processes attributed to users, containers and jobs
(real processes of this host), and XID events counted per GPU and XID."""

import os
import pwd
import subprocess
import time

import pytest

import gpumonutil as gu
from gpumonutil import gpumon, one, workdir  # noqa: F401 - pytest fixtures

GIB = 1 << 30


@pytest.fixture(scope="module")
def test_user():
    """A local user without a home, for a process that is not root's."""
    users = gu.TestUsers("gnmon-")
    uid, _ = users.user("proc")
    yield pwd.getpwuid(uid)
    users.remove()


@pytest.fixture
def spawn():
    """Factory: spawn(argv, env=None) -> Popen of a long-sleeping process; all killed at the
    end."""
    procs = []

    def start(argv, env=None):
        full = {"PATH": os.environ.get("PATH", "/usr/bin:/bin")}
        full.update(env or {})
        p = subprocess.Popen(argv, env=full, stdin=subprocess.DEVNULL,
                             stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
        procs.append(p)
        return p

    yield start
    for p in procs:
        p.kill()
        p.wait()


def process_series(s, pid):
    found = gu.metric_series(s, "gpumon_process_memory_bytes", pid=pid)
    assert len(found) <= 1, found
    return found[0] if found else (None, None)


def test_processes_attributed_to_user_container_and_job(gpumon, spawn, test_user):
    job = spawn(["sleep", "300"], env={"CAPSULE_NAME": "demo", "GPUQ_JOB_ID": "42"})
    other = spawn(["setpriv", f"--reuid={test_user.pw_uid}", f"--regid={test_user.pw_gid}",
                   "--clear-groups", "--", "sleep", "301"])
    # setpriv execs sleep in place: same pid, once the exec happened.
    gu.wait_for(lambda: open(f"/proc/{other.pid}/comm").read().strip() == "sleep", 5,
                "setpriv to exec sleep")
    fx = gu.load_fixture("consumer-1gpu")
    fx["gpus"][0]["processes"] = [
        {"pid": job.pid, "used_memory": 3 * GIB, "type": "compute"},
        {"pid": other.pid, "used_memory": GIB, "type": "both"},
        {"pid": gu.HIDDEN_PID_BASE, "used_memory": None},
    ]
    d = gpumon(fx)
    s = d.wait_metric("both processes", lambda s: process_series(s, job.pid)[0] is not None
                      and process_series(s, other.pid)[0] is not None)
    labels, value = process_series(s, job.pid)
    assert value == 3 * GIB
    assert {k: labels[k] for k in ("process", "user", "container", "hpc_job")} == {
        "process": "sleep", "user": "root", "container": "capsule://demo", "hpc_job": "gpuq://42"
    }, labels
    assert labels["UUID"] == fx["gpus"][0]["uuid"] and labels["Hostname"] == "testhost"

    labels, value = process_series(s, other.pid)
    # In both the compute and the graphics list (nvidia-smi's "C+G"): one process. NVML gives
    # the process's whole usage in each list, so it counts once, as nvidia-smi shows it.
    assert value == GIB, f"{value} bytes: a C+G process's memory counted twice"
    assert labels["user"] == test_user.pw_name, labels
    assert labels["process"] == "sleep" and labels["container"] == "" and labels["hpc_job"] == ""

    # NVML did not know the memory of the third process: no series rather than a made-up 0.
    assert process_series(s, gu.HIDDEN_PID_BASE) == (None, None)
    d.checked()

    # A process that ends disappears with the fixture's next version.
    fx["gpus"][0]["processes"] = fx["gpus"][0]["processes"][1:]
    d.write_fixture(fx)
    d.wait_metric("the ended process to disappear",
                  lambda s: process_series(s, job.pid)[0] is None)


def test_process_attribution_from_proc_root(gpumon, workdir):
    # A /proc of another shape: a docker container's process and a Slurm job's, as cgroup paths
    # name them. --proc-root is how gpumon runs in a container with the host's /proc mounted.
    root = workdir / "hostproc"
    docker_id = "4f2a" * 16
    entries = {
        4242: ("python3", 0, f"0::/system.slice/docker-{docker_id}.scope\n"),
        4343: ("train", 0, "0::/system.slice/slurmstepd.scope/job_9876/step_0/user/task_0\n"),
    }
    for pid, (comm, uid, cgroup) in entries.items():
        p = root / str(pid)
        p.mkdir(parents=True)
        (p / "comm").write_text(comm + "\n")
        (p / "status").write_text(f"Name:\t{comm}\nUid:\t{uid}\t{uid}\t{uid}\t{uid}\n")
        (p / "cgroup").write_text(cgroup)
        (p / "environ").write_bytes(b"")
        (p / "stat").write_text(f"{pid} ({comm}) S 1 {pid} {pid} 0 -1 4194560 0 0 0 0 0 0 0 0 "
                                "20 0 1 0 12345 0 0\n")
    fx = gu.load_fixture("consumer-1gpu")
    fx["gpus"][0]["processes"] = [{"pid": pid, "used_memory": GIB} for pid in entries]
    d = gpumon(fx, args=["--proc-root", root])
    s = d.wait_metric("both processes", lambda s: all(process_series(s, p)[0] for p in entries))
    labels, _ = process_series(s, 4242)
    assert (labels["process"], labels["container"], labels["user"]) == (
        "python3", f"docker://{docker_id[:12]}", "root"), labels
    labels, _ = process_series(s, 4343)
    assert (labels["process"], labels["hpc_job"]) == ("train", "slurm://9876"), labels


def test_xid_events_counted_per_xid(gpumon):
    fx = gu.load_fixture("consumer-1gpu")
    gu.hide_pids(fx)
    d = gpumon(fx)
    _, s = d.checked()
    # Registered for XIDs, none seen: dcgm's family says 0, ours has no series yet.
    assert one(s, "DCGM_FI_DEV_XID_ERRORS", gpu=0) == 0
    assert not gu.metric_series(s, "gpumon_xid_errors_total")

    before = time.time()
    # Events whose time has passed are delivered at once (the fake's rule for appended events).
    fx["gpus"][0]["events"] = [{"at": 0.0, "xid": 31}, {"at": 0.1, "xid": 31},
                               {"at": 0.2, "xid": 43}]
    d.write_fixture(fx)
    s = d.wait_metric("three XIDs", lambda s: one(s, "gpumon_xid_errors_total", gpu=0, xid=31) == 2
                      and one(s, "gpumon_xid_errors_total", gpu=0, xid=43) == 1)
    assert one(s, "DCGM_FI_DEV_XID_ERRORS", gpu=0) == 43  # the last one delivered
    seen31 = one(s, "gpumon_xid_last_seen_timestamp_seconds", gpu=0, xid=31)
    seen43 = one(s, "gpumon_xid_last_seen_timestamp_seconds", gpu=0, xid=43)
    assert before - 1 <= seen31 <= seen43 <= time.time() + 1, (before, seen31, seen43)
    gu.promtool_check(d.text())

    time.sleep(0.5)
    fx["gpus"][0]["events"].append({"at": 0.3, "xid": 31})
    d.write_fixture(fx)
    s = d.wait_metric("the fourth XID",
                      lambda s: one(s, "gpumon_xid_errors_total", gpu=0, xid=31) == 3)
    assert one(s, "DCGM_FI_DEV_XID_ERRORS", gpu=0) == 31
    assert one(s, "gpumon_xid_errors_total", gpu=0, xid=43) == 1
    assert one(s, "gpumon_xid_last_seen_timestamp_seconds", gpu=0, xid=31) > seen31
    assert one(s, "gpumon_xid_last_seen_timestamp_seconds", gpu=0, xid=43) == seen43


def test_gpu_without_xid_events(gpumon):
    fx = gu.load_fixture("consumer-1gpu")
    gu.hide_pids(fx)
    fx["gpus"][0]["xid_events"] = False
    d = gpumon(fx)
    _, s = d.checked()
    # Not registered: no "0 XIDs" claim that nobody could make.
    assert one(s, "DCGM_FI_DEV_XID_ERRORS", gpu=0) is None
    assert one(s, "gpumon_gpu_up", gpu=0) == 1
