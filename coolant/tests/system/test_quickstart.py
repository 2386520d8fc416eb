"""scripts/quickstart.sh end to end, as the README tells a new user to run it, in QUICKSTART_ROOT
mode (everything under a temp dir, no systemd): start the stack, start it again, run a gpuq job,
watch the simulated pump failure end in a clean stop (`quickstart.sh demo`, which drains gpuq),
stop everything (gpuq's running jobs excepted, by design). capsule's node cache (capsule-cached)
runs beside them, as nobody: QUICKSTART_ROOT makes no accounts."""

import json
import os
import pwd
import re
import signal
import subprocess
import time
from pathlib import Path

import pytest

import gpuqutil
import sysutil

QUICKSTART = sysutil.REPO / "scripts" / "quickstart.sh"
HALT_LINE = "simulated host: coold would power off now"
# gpuqd's GPUs: the fake NVML on this fixture, so that the count and the UUIDs are known.
GPUQ_FIXTURE = "dgx-8gpu-mig"


def _procs_under(root):
    """Pids of processes whose command line names a path under root: what the quickstart started
    there (daemons, coolsim, the demo engine's containerd and shims)."""
    needle = str(root).encode()
    pids = []
    for entry in os.listdir("/proc"):
        if not entry.isdigit() or int(entry) == os.getpid():
            continue
        try:
            with open(f"/proc/{entry}/cmdline", "rb") as f:
                if needle in f.read():
                    pids.append(int(entry))
        except OSError:
            continue
    return pids


class Quickstart:
    """One QUICKSTART_ROOT tree with its own metrics port; runs the script against the build dir
    under test."""

    def __init__(self, root):
        self.root = root
        self.env = {
            "QUICKSTART_ROOT": str(root),
            "QUICKSTART_BUILD": str(sysutil.build_dir()),
            "QUICKSTART_SKIP_DEPS": "1",
            "COOLD_METRICS_LISTEN": f"127.0.0.1:{sysutil.free_port()}",
            "GPUMON_LISTEN": f"127.0.0.1:{sysutil.free_port()}",
            # A machine without a driver, even on a GPU node: NVML where there is none.
            "GPUMON_NVML_LIBRARY": str(root / "no-driver" / "libnvidia-ml.so.1"),
            "GPUQ_METRICS_LISTEN": f"127.0.0.1:{sysutil.free_port()}",
            "GPUQ_NVML_LIBRARY": str(gpuqutil.fake_nvml_lib()),
            "FAKE_NVML_FIXTURE": str(gpuqutil.FIXTURES / f"{GPUQ_FIXTURE}.json"),
        }
        self.gpumon_port = int(self.env["GPUMON_LISTEN"].rsplit(":", 1)[1])
        self.gpuq_port = int(self.env["GPUQ_METRICS_LISTEN"].rsplit(":", 1)[1])
        self.socket = root / "run/coold/coold.sock"
        self.gpuq_socket = root / "run/gpuq/gpuq.sock"
        # Where quickstart says it started gpuqd, in a cgroup of its own.
        self.gpuq_cgroup_file = root / "run/gpuq/gpuqd.cgroup"
        self.demo_socket = root / "run/gpunode-demo/docker.sock"
        self.conf = root / "etc/coold/coold.conf"
        # capsule-cached: its store and socket below the root, its pid file and log in root's
        # folders; users' capsule finds it through the capsule.conf quickstart writes.
        self.cache_dir = root / "var/cache/capsule"
        self.cache_socket = root / "run/capsule/cache.sock"
        self.cache_pid_file = root / "run/capsule-cached.pid"
        self.capsule_conf = root / "etc/capsule.conf"

    def run(self, *args, timeout=90, env=None):
        """Runs quickstart.sh in a process group of its own, killed whole on a timeout, so
        nothing it started in the foreground outlives a failed test."""
        full_env = {k: v for k, v in os.environ.items() if k != "COOLD_DEVICE"}
        full_env.update(self.env)
        full_env.update(env or {})
        p = subprocess.Popen([str(QUICKSTART), *args], stdin=subprocess.DEVNULL,
                             stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True,
                             env=full_env, cwd=sysutil.REPO, start_new_session=True)
        try:
            out, _ = p.communicate(timeout=timeout)
        except subprocess.TimeoutExpired:
            os.killpg(p.pid, signal.SIGKILL)
            out, _ = p.communicate()
            raise AssertionError(f"quickstart.sh {' '.join(args)} still running after "
                                 f"{timeout}s:\n{out}") from None
        return p.returncode, out

    def status(self):
        r = sysutil.api(self.socket, "GET", "/v1/status", timeout=5)
        assert r.status == 200, r
        return r.json()

    def container(self):
        r = sysutil.api(self.demo_socket, "GET", "/containers/gpunode-demo-workload/json",
                        timeout=10)
        assert r.status == 200, r
        return r.json()

    def gpuq(self, *args, timeout=60):
        """The installed gpuq CLI on quickstart's gpuqd, as root."""
        return subprocess.run([str(self.root / "usr/local/bin/gpuq"), "--socket",
                               str(self.gpuq_socket), *map(str, args)], capture_output=True,
                              text=True, timeout=timeout, cwd="/")

    def gpuq_get(self, path):
        r = sysutil.api(self.gpuq_socket, "GET", path, timeout=10)
        assert r.status == 200, r
        return r.json()

    def gpuq_wait_state(self, job_id, state, timeout=30):
        return sysutil.wait_for(
            lambda: (j := self.gpuq_get(f"/v1/jobs/{job_id}")["job"])["state"] == state and j,
            timeout, f"gpuq job {job_id} to be {state}")

    def cached_images(self):
        """GET /v1/images on capsule-cached's socket, as root: the cached images, a JSON list."""
        r = sysutil.api(self.cache_socket, "GET", "/v1/images", timeout=10)
        assert r.status == 200, r
        images = r.json()
        assert isinstance(images, list), images
        return images

    def cached_pid(self):
        """capsule-cached's pid from quickstart's pid file, checked to be that program's and
        running as nobody, never root."""
        pid = int(self.cache_pid_file.read_text())
        assert Path(f"/proc/{pid}/comm").read_text() == "capsule-cached\n"
        uids = next(line.split()[1:] for line in Path(f"/proc/{pid}/status").read_text()
                    .splitlines() if line.startswith("Uid:"))
        assert set(map(int, uids)) == {pwd.getpwnam("nobody").pw_uid}, uids
        return pid

    def capsule_as(self, user, *args):
        """The installed capsule, as `user`, with the capsule.conf quickstart wrote as its own
        (capsule reads the node's /etc/capsule.conf, not the root's)."""
        return sysutil.run([self.root / "usr/local/bin/capsule", "--config", self.capsule_conf,
                            *args], user=user, timeout=30,
                           env={"CAPSULE_PULL": str(self.root / "usr/local/libexec/gpunode"
                                                    / "capsule-pull")})

    def conf_value(self, key):
        for line in self.conf.read_text().splitlines():
            k, sep, v = line.partition("=")
            if sep and k.strip() == key:
                return v.strip()
        return None

    def logs(self):
        out = []
        logs = [*(self.root / "var/log/coold").glob("*.log"),
                *(self.root / "var/log/gpumon").glob("*.log"),
                *(self.root / "var/log/gpuq").glob("*.log"),
                *(self.root / "var/log").glob("capsule-cached.log")]
        for log in sorted(logs):
            out.append(f"--- {log.name} ---\n" + "\n".join(log.read_text(errors="replace")
                                                          .splitlines()[-30:]))
        return "\n".join(out)


@pytest.fixture
def quickstart(request):
    root = sysutil.short_tmpdir("gn-qs-")
    qs = Quickstart(root)
    yield qs
    failed = getattr(request.node, "rep_call", None) is None or request.node.rep_call.failed
    if failed:
        print(qs.logs())
    # --stop is what a user has; whatever it missed is stopped here by pid, so a failed run
    # leaves nothing behind either.
    try:
        qs.run("--stop", timeout=90)
    except AssertionError as exc:
        print(exc)
    for pid in _procs_under(root):
        try:
            os.kill(pid, signal.SIGKILL)
        except ProcessLookupError:
            pass
    # gpuq's jobs outlive --stop by design: whatever ran in gpuqd's cgroup goes with it.
    if qs.gpuq_cgroup_file.exists():
        gpuqutil.cgroup_kill_tree(qs.gpuq_cgroup_file.read_text().strip())
    time.sleep(0.5)
    sysutil._unmount_below(root)
    if not os.environ.get("GPUNODE_KEEP_TMP"):
        subprocess.run(["rm", "-rf", "--one-file-system", str(root)], capture_output=True)


def test_quickstart_demo_ends_in_a_clean_stop(quickstart, users):
    qs = quickstart
    rc, out = qs.run(timeout=120)
    assert rc == 0, out
    # Simulator mode acts on alarms, harmlessly: demo halt script, demo Docker Engine.
    assert qs.conf_value("drill") == "no"
    assert qs.conf_value("command").startswith(
        str(qs.root / "usr/local/libexec/gpunode/coolant-demo-halt")), qs.conf_value("command")
    assert qs.conf_value("docker_socket") == str(qs.demo_socket)
    assert qs.status()["controller"]["link"] == "up"
    first = qs.container()
    assert first["State"]["Running"], first["State"]
    assert f"QUICKSTART_ROOT={qs.root} {QUICKSTART} demo" in out, out
    # gpumon runs beside coold: without a GPU it says why, on /metrics and in the script's output.
    metrics = sysutil.parse_metrics(sysutil.scrape(qs.gpumon_port).text())
    assert sysutil.metric(metrics, "gpumon_up") == 0, metrics
    reasons = [dict(labels)["reason"]
               for labels in sysutil.metric_series(metrics, "gpumon_last_error_info")]
    nvml = qs.env["GPUMON_NVML_LIBRARY"]
    assert reasons and nvml in reasons[0], reasons
    assert "gpumon: no GPUs to watch here (" in out and nvml in out, out
    assert (qs.root / "etc/gpumon/gpumon.conf").read_text().count(
        f"nvml_library = {nvml}\n") == 1
    assert (qs.root / "etc/gpumon/gpumon.conf").read_text().count(
        f"listen = 127.0.0.1:{qs.gpumon_port}") == 1

    # capsule-cached runs beside them as nobody, on a store and a socket folder of that account's,
    # and answers everyone; the capsule.conf quickstart wrote makes users' capsule use it.
    assert qs.cached_images() == []
    cached = qs.cached_pid()
    nobody = pwd.getpwnam("nobody")
    for path, mode in ((qs.cache_dir, 0o711), (qs.cache_socket.parent, 0o755)):
        st = path.stat()
        assert (st.st_uid, st.st_mode & 0o7777) == (nobody.pw_uid, mode), (path, oct(st.st_mode))
    assert (qs.cache_dir / "node.key").stat().st_uid == nobody.pw_uid
    assert "\n[capsule]\n" in qs.capsule_conf.read_text()
    assert f"\nnode_cache = {qs.cache_socket}\n" in qs.capsule_conf.read_text()
    r = qs.capsule_as(users.ids("reader"), "images", "--node", "--format", "json")
    assert r.returncode == 0 and json.loads(r.stdout) == [], r.stdout + r.stderr
    assert (f"capsule-cached: node cache {qs.cache_dir} with 0 image(s), on {qs.cache_socket}"
            in out), out
    assert f"--config {qs.capsule_conf} images --node" in out, out

    # gpuqd runs beside them: one queue over every GPU NVML shows, and the installed gpuq-run
    # runs a job on one of them, in a scope below the cgroup quickstart gave gpuqd.
    whole, mig = gpuqutil.fixture_gpus(GPUQ_FIXTURE)
    slots = len(whole) + len(mig)
    queues = qs.gpuq_get("/v1/queues")
    assert queues["gpus_total"] == slots and not queues["drained"], queues
    assert [q["name"] for q in queues["queues"]] == ["default"], queues
    gq = f"{qs.root}/usr/local/bin/gpuq --socket {qs.gpuq_socket}"
    assert (f"gpuq: {slots} GPU(s) and MIG instance(s) to schedule (queues: default); "
            f"try: {gq} submit --gpus 1 -- nvidia-smi -L") in out, out
    metrics = sysutil.parse_metrics(sysutil.scrape(qs.gpuq_port).text())
    assert sysutil.metric(metrics, "gpuq_gpus") == slots, metrics
    r = qs.gpuq("submit", "--wait", "--gpus", "1", "--", "sh", "-c",
                'echo "gpus=$CUDA_VISIBLE_DEVICES"; cat /proc/self/cgroup')
    assert r.returncode == 0, r.stdout + r.stderr
    job = int(re.search(r"Submitted job (\d+)", r.stdout).group(1))
    log = qs.gpuq("logs", job).stdout
    assert re.search(r"^gpus=(\S+)$", log, re.M).group(1) in whole, log
    if _gpuqd_cgroup_expected():
        cgroup = Path(qs.gpuq_cgroup_file.read_text().strip())
        assert f"0::/{cgroup.name}/gpuq-job-{job}.scope\n" in log, log
    else:
        assert not qs.gpuq_cgroup_file.exists()

    # A job that runs on through everything below; its command line names the root, so that the
    # fixture finds it.
    r = qs.gpuq("submit", "--parsable", "-J", "sleeper", "--", "/usr/bin/python3", "-c",
                "import time; time.sleep(600)", qs.root)
    assert r.returncode == 0, r.stdout + r.stderr
    sleeper = int(r.stdout)
    qs.gpuq_wait_state(sleeper, "RUNNING")

    # Idempotent: a second run keeps the configuration and the running demo container; it
    # restarts gpuqd, whose running job runs on (the same run).
    conf, capsule_conf = qs.conf.read_text(), qs.capsule_conf.read_text()
    node_key = (qs.cache_dir / "node.key").read_bytes()
    rc, out = qs.run(timeout=90)
    assert rc == 0, out
    assert qs.conf.read_text() == conf
    assert qs.container()["Id"] == first["Id"]
    assert "started gpuqd" in out, out
    # ... and capsule-cached: a new process on the same store (its key kept), with the same
    # capsule.conf.
    assert f"stopped capsule-cached (pid {cached})" in out, out
    assert not Path(f"/proc/{cached}").exists()
    assert qs.cached_pid() != cached
    assert qs.cached_images() == []
    assert (qs.cache_dir / "node.key").read_bytes() == node_key
    assert qs.capsule_conf.read_text() == capsule_conf
    j = qs.gpuq_get(f"/v1/jobs/{sleeper}")["job"]
    assert j["state"] == "RUNNING" and j["runs"] == 1, j

    rc, out = qs.run("demo", timeout=90)
    assert rc == 0, out
    assert "Clean stop" in out, out
    assert "shutting-down" in out, "the live view never showed the shutdown:\n" + out
    assert "power cut orderly: the host had said HALT" in out, out
    # coold drained quickstart's gpuqd first, whose job went back to the queue.
    assert "shutdown stage jobs ok: gpuqd drained: stopped 1 job " in out, out
    assert out.index("shutdown stage jobs ok") < out.index("shutdown stage containers ok"), out
    # The container was stopped (and had checkpointed) before the shutdown command ran.
    assert (out.index("shutdown stage containers ok: stopped 1")
            < out.index("shutdown stage wait ok: all 1 stopped")
            < out.index("shutdown stage command ok")), out

    ckpt = qs.root / "var/lib/gpunode-demo/checkpoint/checkpoint"
    assert ckpt.read_text().startswith("saved"), ckpt.read_text()
    halts = (qs.root / "var/log/coold/demo-halt.log").read_text().splitlines()
    assert len(halts) == 1 and HALT_LINE in halts[0], halts
    report = json.loads((qs.root / "run/coolsim/demo-report.json").read_text())
    assert report["scenario"] == "pump-failure", report
    assert report["power_cut"] and report["orderly"] and report["halt_received"], report
    assert report["exit_status"] == 0, report
    assert report["requests"]["HALT"] >= 1, report

    # Afterwards the stack runs on: normal simulator, a fresh coold, the workload again.
    status = qs.status()
    assert status["controller"]["link"] == "up", status["controller"]
    assert status["safety"]["state"] == "normal", status["safety"]
    assert status["shutdown"]["stage"] == "idle", status["shutdown"]
    assert status["telemetry"]["level"] == "normal", status["telemetry"]
    again = qs.container()
    assert again["State"]["Running"] and again["Id"] != first["Id"], again["State"]
    # ... and gpuq admits jobs again: the drained job runs once more.
    assert not qs.gpuq_get("/v1/queues")["drained"]
    j = qs.gpuq_wait_state(sleeper, "RUNNING")
    assert j["runs"] == 2, j

    # --stop stops every daemon, but not gpuq's running job, and says how to stop that too.
    rc, out = qs.run("--stop", timeout=90)
    assert rc == 0, out
    assert "gpuq: 1 running job(s) keep running without gpuqd" in out, out
    assert f"{gq} drain --wait 5m" in out, out
    assert not _can_connect(qs.socket), "coold still answers after --stop"
    assert not _can_connect(qs.gpuq_socket), "gpuqd still answers after --stop"
    assert not _can_connect(qs.cache_socket), "capsule-cached still answers after --stop"
    assert not qs.cache_pid_file.exists()
    assert f"capsule: pulls fail while capsule-cached is stopped ({qs.capsule_conf}" in out, out

    def left():
        return [c for c in map(_cmdline, _procs_under(qs.root)) if c]

    sysutil.wait_for(lambda: all(b"time.sleep(600)" in c or b"gpuq-run" in c for c in left()),
                     15, "everything quickstart started but gpuq's job to end")
    assert sorted(b"gpuq-run" in c for c in left()) == [False, True], left()

    # Once the job is gone, --stop removes the cgroup gpuqd ran in, and nothing is left.
    for pid in _procs_under(qs.root):
        os.kill(pid, signal.SIGKILL)
    sysutil.wait_for(lambda: not _procs_under(qs.root), 15, "gpuq's job to end")
    cgroup = qs.gpuq_cgroup_file.exists() and Path(qs.gpuq_cgroup_file.read_text().strip())
    rc, out = qs.run("--stop", timeout=90)
    assert rc == 0, out
    if cgroup:
        sysutil.wait_for(lambda: not cgroup.exists(), 5, f"{cgroup} to be removed")
        assert not qs.gpuq_cgroup_file.exists()


def _cmdline(pid):
    try:
        with open(f"/proc/{pid}/cmdline", "rb") as f:
            return f.read()
    except OSError:
        return b""


def _gpuqd_cgroup_expected():
    """Whether quickstart can give gpuqd a cgroup of its own: cgroup v2 in sight, and no systemd
    managing the tree (outside a unit's delegated cgroup it is not ours to change)."""
    return not Path("/run/systemd/system").exists() and any(
        Path(p, "cgroup.subtree_control").exists() for p in ("/sys/fs/cgroup",
                                                             "/sys/fs/cgroup/unified"))


def _can_connect(path):
    try:
        sysutil.api(path, "GET", "/v1/status", timeout=2)
        return True
    except OSError:
        return False


def test_quickstart_node_cache_needs_a_reachable_root_and_keeps_a_capsule_conf(quickstart):
    """capsule-cached runs as nobody under QUICKSTART_ROOT: a root nobody cannot enter means no
    node cache, said so, while the rest starts; and an administrator's capsule.conf is never
    rewritten, only named in a note."""
    qs = quickstart
    qs.root.chmod(0o700)
    rc, out = qs.run(timeout=120)
    assert rc == 0, out
    assert "note: capsule-cached not started: nobody cannot reach" in out, out
    assert f"every folder above {qs.root} must be open to all" in out, out
    assert not qs.cache_pid_file.exists() and not qs.cache_socket.exists()
    assert not qs.capsule_conf.exists(), "capsule.conf names a node cache that does not run"
    assert "images --node" not in out, out
    assert qs.status()["controller"]["link"] == "up"

    qs.root.chmod(0o755)
    own = "[capsule]\nremap_root = no\n"
    qs.capsule_conf.write_text(own)
    rc, out = qs.run(timeout=90)
    assert rc == 0, out
    assert qs.cached_images() == []
    qs.cached_pid()
    assert qs.capsule_conf.read_text() == own
    assert (f"note: keeping {qs.capsule_conf}, which has no node_cache" in out
            and f"add 'node_cache = {qs.cache_socket}' to its [capsule] section" in out), out
    # Without node_cache users' capsule cannot see the node cache: the summary shows the socket.
    assert f"curl -s --unix-socket {qs.cache_socket} http://capsule/v1/images" in out, out

    rc, out = qs.run("--stop", timeout=90)
    assert rc == 0, out
    assert "stopped capsule-cached" in out, out
    assert not _can_connect(qs.cache_socket)
    assert "pulls fail while capsule-cached is stopped" not in out, out
    # Started once (the first run could not), with nothing for a sanitizer build to report.
    log = (qs.root / "var/log/capsule-cached.log").read_text()
    assert log.count("Serving the node cache") == 1, log
    assert not any(m in log for m in sysutil.SANITIZER_MARKERS), log


def test_demo_refuses_a_real_controller_and_an_unsafe_config(quickstart):
    qs = quickstart
    rc, out = qs.run("demo", env={"COOLD_DEVICE": "/dev/ttyACM0"}, timeout=30)
    assert rc != 0 and "simulator only" in out, out

    # An installed tree whose coold.conf would rehearse (or really act) instead of the demo's
    # harmless stop: the demo refuses before it touches anything.
    sbin = qs.root / "usr/local/sbin"
    sbin.mkdir(parents=True)
    (sbin / "coold").write_text("#!/bin/sh\nexit 1\n")
    (sbin / "coold").chmod(0o755)
    qs.conf.parent.mkdir(parents=True)
    qs.conf.write_text(
        f"[controller]\ndevice = {qs.root}/run/coolsim/ttyCOOL0\n"
        f"[control]\nsocket = {qs.socket}\n"
        "[shutdown]\ncommand = systemctl poweroff\ndocker_socket = /run/docker.sock\n"
        "drill = yes\n")
    rc, out = qs.run("demo", timeout=30)
    assert rc != 0, out
    assert "not set up for the demo" in out, out
    for problem in ("drill = yes", "docker_socket = /run/docker.sock",
                    "command = systemctl poweroff"):
        assert problem in out, out
    assert not (qs.root / "run/coolsim").exists(), "the demo started coolsim anyway"
    assert not qs.demo_socket.exists(), "the demo started its engine anyway"


def test_quickstart_installs_the_release_build():
    """What users install is what the benchmarks measure: meson's release build, build-release/
    (the dir bench/ uses by default), unless QUICKSTART_BUILD names another."""
    env = {k: v for k, v in os.environ.items() if k != "QUICKSTART_BUILD"}
    r = subprocess.run([QUICKSTART, "--build-info"], capture_output=True, text=True, env=env,
                       timeout=30)
    assert r.returncode == 0 and r.stdout == "build-release release\n", (r.stdout, r.stderr)
    for bench in ("run", "capsule/run", "gpumon/run"):
        text = (sysutil.REPO / "bench" / bench).read_text()
        assert "${BUILD:-$repo/build-release}" in text, bench
    r = subprocess.run([QUICKSTART, "--build-info"], capture_output=True, text=True,
                       env={**env, "QUICKSTART_BUILD": "/x/b"}, timeout=30)
    assert r.stdout == "/x/b (as set up)\n", r.stdout
