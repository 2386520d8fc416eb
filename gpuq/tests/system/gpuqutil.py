"""Helpers for gpuq's system tests: gpuqd started as root on the fake NVML's fixtures with a
config of the test's, in a temp dir of its own (socket, state, logs, audit log, metrics port),
optionally on a clock the test sets (libfaketime, gpuqd alone); the gpuq CLI run as test users;
the control API called as root."""

import json
import os
import shutil
import signal
import subprocess
import time
from pathlib import Path

import gntest
from gntest import (  # noqa: F401 - re-exported for the tests
    SANITIZER_MARKERS,
    ProcessDied,
    Proc,
    TestUsers,
    build_dir,
    free_port,
    need_built,
    parse_metrics,
    run,
    scrape,
    short_tmpdir,
    unix_api,
    wait_for,
)

REPO = gntest.REPO
FIXTURES = REPO / "tests" / "fixtures" / "nvml"
FAKETIME_LIB = "/usr/lib/x86_64-linux-gnu/faketime/libfaketimeMT.so.1"


def gpuqd_path():
    return need_built(build_dir() / "gpuq" / "gpuqd" / "gpuqd", "gpuqd", executable=True)


def gpuq_path():
    """The CLI, copied where test users can run it (the checkout may be root's alone)."""
    exe = need_built(build_dir() / "gpuq" / "gpuq" / "gpuq", "gpuq", executable=True)
    return gntest.reachable_copy(exe) / "gpuq"


def capsule_paths():
    b = build_dir() / "capsule"
    cap = need_built(b / "capsule", "capsule", executable=True)
    pull = need_built(b / "capsule-pull", "capsule-pull", executable=True)
    return gntest.reachable_copy(cap, pull) / "capsule"


def cgroup_v2():
    """The cgroup v2 mount: /sys/fs/cgroup on a pure v2 host, its unified folder on a hybrid one."""
    for p in ("/sys/fs/cgroup", "/sys/fs/cgroup/unified"):
        if Path(p, "cgroup.procs").exists() and Path(p, "cgroup.subtree_control").exists():
            return Path(p)
    import pytest
    pytest.fail("no cgroup v2 hierarchy on this machine")


def cgroup_kill_tree(path):
    """Kills every process of the cgroup path and below, and removes the cgroups."""
    path = Path(path)
    if not path.exists():
        return
    def pids():
        # gpuq-run removes scopes meanwhile: a cgroup gone between listing and reading is empty.
        out = []
        for f in path.rglob("cgroup.procs"):
            try:
                out += [int(p) for p in f.read_text().split()]
            except FileNotFoundError:
                pass
        return out

    for _ in range(50):
        found = pids()
        if not found:
            break
        for pid in found:
            try:
                os.kill(pid, signal.SIGKILL)
            except ProcessLookupError:
                pass
        time.sleep(0.1)
    for d in sorted((p for p in path.rglob("*") if p.is_dir()), key=lambda p: -len(p.parts)):
        try:
            d.rmdir()
        except OSError:
            pass
    try:
        path.rmdir()
    except OSError:
        pass


def fake_nvml_lib():
    return need_built(build_dir() / "tests" / "fake-nvml" / "libnvidia-ml.so.1",
                      "fake libnvidia-ml.so.1")


class Gpuqd:
    """gpuqd as root in workdir, on a fixture of the fake NVML (a name under
    tests/fixtures/nvml, or None for a node without GPUs). config: the text after the [gpuqd]
    section the helper writes (queues, windows, [scheduler]). clock: None (the real one) or a
    "YYYY-MM-DD HH:MM:SS" UTC start time that then runs on (set_clock moves it)."""

    def __init__(self, workdir, config="", fixture="dgx-8gpu-mig", clock=None, admin_group=None,
                 extra=""):
        self.workdir = Path(workdir)
        self.socket = self.workdir / "gpuq.sock"
        self.state = self.workdir / "state"
        self.audit = self.workdir / "audit.log"
        self.port = free_port()
        self.config = self.workdir / "gpuqd.conf"
        gpuqd_section = (f"[gpuqd]\nsocket = {self.socket}\nstate_dir = {self.state}\n"
                         f"metrics_listen = 127.0.0.1:{self.port}\naudit_log = {self.audit}\n")
        if admin_group:
            gpuqd_section += f"admin_group = {admin_group}\n"
        # Keys of a [gpuqd] section in config join the one written here.
        if config.lstrip().startswith("[gpuqd]"):
            config = config.lstrip()[len("[gpuqd]"):]
        self.config.write_text(gpuqd_section + extra + config)
        self.fixture = None
        if fixture:
            self.fixture = self.workdir / "nvml.json"
            shutil.copy(FIXTURES / f"{fixture}.json", self.fixture)
        self.clock_file = self.workdir / "clock" if clock else None
        if clock:
            self.set_clock(clock)
        self.proc = None
        self.starts = 0
        # A cgroup of its own, as systemd gives a unit with Delegate=yes and
        # DelegateSubgroup=daemon: gpuqd runs in its leaf "daemon", its jobs' scopes go beside it,
        # apart from every other gpuqd a parallel test runs.
        self.cgroup = cgroup_v2() / f"gq-test-{os.getpid()}-{self.workdir.name}"
        (self.cgroup / "daemon").mkdir(parents=True, exist_ok=True)

    def env(self):
        env = dict(os.environ)
        env.pop("LD_LIBRARY_PATH", None)
        env.pop("FAKE_NVML_FIXTURE", None)
        if self.fixture:
            env["FAKE_NVML_FIXTURE"] = str(self.fixture)
        if self.clock_file:
            env["LD_PRELOAD"] = FAKETIME_LIB
            env["FAKETIME_TIMESTAMP_FILE"] = str(self.clock_file)
            env["FAKETIME_NO_CACHE"] = "1"
            # A sanitized gpuqd: its runtime would insist on being preloaded first; libfaketime
            # defines no allocator, so the order does not matter to it.
            opts = env.get("ASAN_OPTIONS", "")
            env["ASAN_OPTIONS"] = (opts + ":" if opts else "") + "verify_asan_link_order=0"
            env["TZ"] = "UTC"
        return env

    def set_clock(self, when):
        """Moves gpuqd's wall clock: "@YYYY-MM-DD HH:MM:SS" (UTC) from which it runs on."""
        self.clock_file.write_text(f"@{when}\n")

    def start(self, wait=True):
        argv = ["sh", "-c", 'echo $$ > "$0/cgroup.procs" && exec "$@"', self.cgroup / "daemon",
                gpuqd_path(), "--config", self.config, "--log-level", "debug"]
        if self.fixture:
            argv += ["--nvml-library", fake_nvml_lib()]
        self.starts += 1
        self.proc = Proc(argv, self.workdir / f"gpuqd-{self.starts}.log", env=self.env(),
                         replace_env=True)
        if wait:
            self.wait_ready()
        return self

    def check_alive(self):
        if not self.proc.running():
            raise ProcessDied(f"gpuqd exited ({self.proc.popen.returncode}):\n{self.proc.tail()}")

    def wait_ready(self, timeout=20):
        def ready():
            self.check_alive()
            return self.api("GET", "/v1/status").status == 200
        wait_for(ready, timeout, "gpuqd to serve")

    def stop(self):
        if self.proc:
            self.proc.stop()

    def destroy(self):
        """Stops gpuqd and kills every job it left running."""
        self.stop()
        cgroup_kill_tree(self.cgroup)

    def kill9(self):
        self.proc.popen.send_signal(signal.SIGKILL)
        self.proc.popen.wait(10)

    def api(self, method, path, body=None, timeout=30):
        return unix_api(self.socket, method, path, body, timeout)

    def job(self, job_id):
        r = self.api("GET", f"/v1/jobs/{job_id}")
        assert r.status == 200, r.text()
        return r.json()["job"]

    def wait_state(self, job_id, states, timeout=30):
        states = (states,) if isinstance(states, str) else tuple(states)
        return wait_for(lambda: (j := self.job(job_id))["state"] in states and j, timeout,
                        f"job {job_id} to be {'/'.join(states)}", interval=0.05)

    def wait_reason(self, job_id, timeout=10):
        """The job once a scheduling pass has given it a reason: a job just submitted has none
        until the next pass, which a busy machine may run a moment after the submit's answer."""
        return wait_for(lambda: (j := self.job(job_id))["reason"] and j, timeout,
                        f"job {job_id} to have a reason", interval=0.05)

    def log(self):
        return "".join(p.read_text(errors="replace")
                       for p in sorted(self.workdir.glob("gpuqd-*.log")))

    def joblog(self, job_id):
        p = self.state / "logs" / f"{job_id}.log"
        return p.read_text(errors="replace") if p.exists() else ""


def gpuq(d, *args, user=None, env=None, check=True, cwd=None, timeout=30):
    """The gpuq CLI against d (a Gpuqd), as user (a (uid, gid) pair) or root."""
    argv = [str(gpuq_path()), "--socket", str(d.socket), *map(str, args)]
    if user is not None:
        argv = gntest.as_user(user, argv)
    full = dict(os.environ)
    full.pop("LD_PRELOAD", None)
    full.update(env or {})
    r = subprocess.run(argv, capture_output=True, text=True, timeout=timeout, env=full,
                       cwd=cwd, stdin=subprocess.DEVNULL)
    if check and r.returncode != 0:
        raise AssertionError(f"gpuq {' '.join(map(str, args))} exited {r.returncode}:\n"
                             f"{r.stdout}{r.stderr}")
    return r


def submit(d, *args, user=None, cwd=None, env=None):
    """Submits and returns the new job's id."""
    r = gpuq(d, "submit", "--parsable", *args, user=user, cwd=cwd, env=env)
    return int(r.stdout.strip())


def scope_of(pid):
    """The v2 cgroup path of a process ("/gpuq-job-3.scope"); "" for one that is gone (a scan
    of /proc races with every process that ends meanwhile)."""
    try:
        text = Path(f"/proc/{pid}/cgroup").read_text()
    except (FileNotFoundError, ProcessLookupError):
        return ""
    for line in text.splitlines():
        if line.startswith("0::"):
            return line[3:]
    return ""


def trapping_script(workdir, name, trap, ready):
    """A job script that sets `trap`, then creates `ready` and loops: a test waits for `ready`
    before signalling, since a signal that comes before the trap is set ends the shell (on a
    loaded machine the job may be RUNNING well before its shell got that far)."""
    return script(workdir, name, f"{trap}\n: > {ready}\nwhile :; do sleep 0.1; done\n")


# Queues most tests use: a guaranteed interactive queue, a burstable batch queue, a best-effort
# scavenger queue; short backoffs so that retries happen within a test.
QUEUES = """
[gpuqd]
cpus = 64
memory = 512G

[scheduler]
backoff_base = 1s
backoff_max = 2s

[priority-class.high]
value = 100

[queue.batch]
priority = 10
class = burstable
gpus = 4

[queue.interactive]
priority = 100
class = guaranteed
gpus = 2

[queue.scavenger]
priority = 0
class = besteffort
"""


def script(workdir, name, text):
    """An executable shell script any user can run, in the test's shared folder."""
    p = Path(workdir) / "shared" / name
    p.write_text("#!/bin/sh\n" + text)
    p.chmod(0o755)
    return p


def fixture_gpus(name="dgx-8gpu-mig"):
    """The fixture's whole GPUs (those not in MIG mode) and its MIG instances, each a list of
    UUIDs in NVML index order: what the scheduler hands out."""
    data = json.loads((FIXTURES / f"{name}.json").read_text())
    whole, mig = [], []
    for g in data["gpus"]:
        m = g.get("mig", {})
        if m.get("enabled"):
            mig += [i["uuid"] for i in m.get("instances", [])]
        else:
            whole.append(g["uuid"])
    return whole, mig
