#!/usr/bin/python3
"""gpuq benchmark harness (standard library only): gpuq against Slurm on this machine, in one
invocation. Not a test: nothing passes or fails. Every figure is printed next to its Slurm peer,
measured in the same invocation, with the ratio. bench/gpuq/run starts it; bench/gpuq/README.md
says what each part measures and what the figures were.

  1. submit throughput: N held jobs each through the gpuq CLI, gpuqd's API (POST /v1/jobs over
     the Unix socket, one keep-alive connection, and a new connection per job), sbatch, and
     libslurm's slurm_submit_batch_job (bench/gpuq/slurm-submit);
  2. scheduling with 10,000 pending jobs on 8 GPUs: gpuq's sched_pass() alone
     (bench/gpuq/sched-bench), then end to end in gpuqd and Slurm: release all held jobs, time
     until 8 run; and with the node drained (the partition down), resume, time until 8 run;
     Slurm's own scheduler timings from sdiag;
  3. submit-to-start latency of a 1-GPU interactive job on an idle node: `gpuq submit -I -G 1`
     against `srun --gres=gpu:1`, both running `date +%s.%N`.

Both sides run as root on this host: gpuqd on the fake NVML with 8 whole H100s (a variant of
tests/fixtures/nvml/dgx-8gpu-mig.json without its MIG GPU, written into the temp dir), Slurm
(slurmctld + slurmd, auth/none) with 8 GRES GPUs on stand-in device nodes.
"""

import argparse
import json
import os
import platform
import re
import signal
import statistics
import subprocess
import sys
import time
from pathlib import Path

REPO = Path(__file__).resolve().parents[2]
sys.path[:0] = [str(REPO / "tests" / "pylib"), str(REPO / "gpuq" / "tests" / "system")]
import gntest  # noqa: E402
import gpuqutil  # noqa: E402
from gntest import Proc, UnixHTTPConnection, free_port, http_call, short_tmpdir  # noqa: E402

KUEUE_FACT = ("Kueue's scheduler performance tests admit ~43 workloads/s end to end "
              "(upstream figure, a Kubernetes cluster; not measured here)")
SLURM_FACT = ("Slurm documents ~500 simple batch jobs/s submitted (high-throughput guide; "
              "not measured here)")
GPUQ_CONFIG = """
[scheduler]
starve_after = 2h

[queue.batch]
class = burstable
priority = 50
"""


class BenchError(Exception):
    pass


def note(msg):
    print(f"bench: {msg}", file=sys.stderr, flush=True)


def median(v):
    return statistics.median(v) if v else float("nan")


def p90(v):
    if not v:
        return float("nan")
    s = sorted(v)
    return s[min(len(s) - 1, int(round(0.9 * (len(s) - 1))))]


def ratio(a, b):
    if not a or not b or a != a or b != b:
        return "n/a"
    return f"{a / b:.2f}"


def run(argv, env=None, cwd=None, timeout=600, check=True):
    r = subprocess.run([str(a) for a in argv], capture_output=True, text=True, env=env, cwd=cwd,
                       timeout=timeout, stdin=subprocess.DEVNULL)
    if check and r.returncode != 0:
        raise BenchError(f"{' '.join(map(str, argv[:4]))}...: exit {r.returncode}: "
                         f"{(r.stderr or r.stdout).strip()[:500]}")
    return r


# ---- the two systems ----


def eight_gpu_fixture(path):
    """The dgx-8gpu-mig fixture with MIG turned off on its GPU 3, and without the recorded
    processes and XID events: 8 whole H100s, as Slurm's 8 GRES GPUs."""
    data = json.loads((gpuqutil.FIXTURES / "dgx-8gpu-mig.json").read_text())
    data["_comment"] = ("gpuqbench: dgx-8gpu-mig with MIG off on every GPU, no processes, no "
                        "events: 8 whole H100 80GB HBM3")
    for g in data["gpus"]:
        g["mig"] = {"enabled": False}
        g.pop("processes", None)
        g.pop("events", None)
    Path(path).write_text(json.dumps(data, indent=1))


class BenchGpuqd(gpuqutil.Gpuqd):
    """gpuqd as the system tests start it (its own cgroup, the fake NVML, a config in workdir),
    at the log level a service runs at (info, not the tests' debug), on 8 whole GPUs."""

    def __init__(self, workdir):
        super().__init__(workdir, config=GPUQ_CONFIG, fixture="dgx-8gpu-mig")
        eight_gpu_fixture(self.fixture)

    def start(self, wait=True):
        argv = ["sh", "-c", 'echo $$ > "$0/cgroup.procs" && exec "$@"', self.cgroup,
                gpuqutil.gpuqd_path(), "--config", self.config, "--log-level", "info",
                "--nvml-library", gpuqutil.fake_nvml_lib()]
        self.starts += 1
        self.proc = Proc(argv, self.workdir / f"gpuqd-{self.starts}.log", env=self.env(),
                         replace_env=True)
        if wait:
            self.wait_ready()
        return self

    def status(self):
        r = self.api("GET", "/v1/status")
        if r.status != 200:
            raise BenchError(f"GET /v1/status: {r.status} {r.text()}")
        return r.json()

    def running(self):
        return self.status()["jobs"].get("RUNNING", 0)


class BenchSlurm:
    """Debian's slurmctld and slurmd on this host as tests/pylib/slurmtest.py starts them
    (auth/none, ports, state and spool in workdir), with 8 GRES GPUs, room for many jobs, and
    slurmd in a cgroup of its own so that every job step it leaves is found and ended."""

    def __init__(self, workdir, gpus=8):
        self.dir = Path(workdir)
        for d in ("state", "spool", "log", "dev"):
            (self.dir / d).mkdir(parents=True, exist_ok=True)
        # Slurm refuses two GRES with the same File=, so each stand-in GPU is a node of its own
        # (the numbers of /dev/null: nothing ever opens them).
        for i in range(gpus):
            os.mknod(self.dir / "dev" / f"nvidia{i}", 0o666 | 0o020000, os.makedev(1, 3))
        self.conf = self.dir / "slurm.conf"
        self.sched_params = "sched_interval=1"
        lines = [
            "ClusterName=gpuqbench", "SlurmctldHost=localhost", "AuthType=auth/none",
            "CredType=cred/none", "SlurmUser=root", "SlurmdUser=root",
            f"StateSaveLocation={self.dir}/state", f"SlurmdSpoolDir={self.dir}/spool",
            f"SlurmctldPidFile={self.dir}/slurmctld.pid", f"SlurmdPidFile={self.dir}/slurmd.pid",
            f"SlurmctldLogFile={self.dir}/log/ctld.log", f"SlurmdLogFile={self.dir}/log/d.log",
            f"SlurmctldPort={free_port()}", f"SlurmdPort={free_port()}",
            "ProctrackType=proctrack/linuxproc", "TaskPlugin=task/none",
            "SelectType=select/cons_tres", "SelectTypeParameters=CR_Core", "ReturnToService=2",
            "MpiDefault=none", "AccountingStorageType=accounting_storage/none", "KillWait=3",
            "MinJobAge=5", "MaxJobCount=100000", f"SchedulerParameters={self.sched_params}",
            "GresTypes=gpu", "SlurmdParameters=config_overrides",
            f"NodeName=localhost CPUs=16 RealMemory=64000 Gres=gpu:{gpus} State=UNKNOWN",
            "PartitionName=debug Nodes=localhost Default=YES MaxTime=INFINITE State=UP",
        ]
        self.conf.write_text("\n".join(lines) + "\n")
        (self.dir / "gres.conf").write_text(
            f"NodeName=localhost Name=gpu File={self.dir}/dev/nvidia[0-{gpus - 1}]\n")
        self.cgroup = gpuqutil.cgroup_v2() / f"gq-bench-slurmd-{os.getpid()}"
        self.cgroup.mkdir(exist_ok=True)
        env = {"SLURM_CONF": str(self.conf)}
        self.ctld = Proc(["slurmctld", "-D", "-i", "-f", self.conf], self.dir / "ctld.out", env=env)
        self.slurmd = Proc(["sh", "-c", 'echo $$ > "$0/cgroup.procs" && exec "$@"', self.cgroup,
                            "slurmd", "-D", "-f", self.conf], self.dir / "slurmd.out", env=env)
        try:
            gntest.wait_for(self._idle, 60, "the Slurm node to come up idle", interval=0.2)
        except AssertionError as exc:
            raise BenchError(f"Slurm did not come up: {exc}\n{self.logs()}") from None

    def _idle(self):
        for p in (self.ctld, self.slurmd):
            if not p.running():
                raise gntest.ProcessDied(f"{p.argv[0]} died:\n{p.tail()}")
        r = subprocess.run(["sinfo", "-h", "-o", "%T"], capture_output=True, text=True,
                           env=self.env())
        return r.returncode == 0 and r.stdout.strip() == "idle"

    def env(self):
        e = {k: v for k, v in os.environ.items() if not k.startswith("SLURM_")}
        e["SLURM_CONF"] = str(self.conf)
        return e

    def run(self, *argv, **kw):
        return run(argv, env=self.env(), cwd=self.dir, **kw)

    def running(self):
        r = self.run("squeue", "-h", "-t", "RUNNING", "-o", "%i")
        return len(r.stdout.split())

    def sdiag(self):
        """sdiag's main and backfill scheduler statistics: {"main": {...}, "backfill": {...}}."""
        out = self.run("sdiag").stdout
        stats, section = {"main": {}, "backfill": {}}, None
        for line in out.splitlines():
            if line.startswith("Main schedule statistics"):
                section = "main"
            elif line.startswith("Backfilling stats"):
                section = "backfill"
            elif line and not line[0].isspace():
                section = None
            elif section and ":" in line:
                k, v = line.strip().split(":", 1)
                m = re.match(r"\s*(-?\d+)", v)
                if m:
                    stats[section][k.strip()] = int(m.group(1))
        return stats

    def logs(self):
        out = []
        for f in ("log/ctld.log", "log/d.log", "ctld.out", "slurmd.out"):
            p = self.dir / f
            if p.exists():
                out.append(f"--- {f}\n" + "\n".join(
                    p.read_text(errors="replace").splitlines()[-20:]))
        return "\n".join(out)

    def stop(self):
        # Jobs are not cancelled one by one (10,000 take a while): the daemons stop, every step
        # left is killed with slurmd's cgroup, and the state dir goes with the temp dir.
        for p in (self.slurmd, self.ctld):
            p.stop(timeout=10)
        gpuqutil.cgroup_kill_tree(self.cgroup)


# ---- the benchmark ----


class Bench:
    def __init__(self, a):
        self.a = a
        self.tmp = short_tmpdir("gpuqbench-")
        self.build = gntest.build_dir()
        self.gpuq_cli = self.build / "gpuq" / "gpuq" / "gpuq"
        self.sched_bench = self.build / "bench" / "gpuq" / "sched-bench"
        self.slurm_submit = self.build / "bench" / "gpuq" / "slurm-submit"
        self.gpuqd = self.slurm = None
        self.n_gpuqd = 0
        self.res = {}

    # -- setup --

    def check(self):
        for f in (self.gpuq_cli, self.sched_bench, self.slurm_submit,
                  self.build / "gpuq" / "gpuqd" / "gpuqd", self.build / "gpuq" / "run" / "gpuq-run",
                  self.build / "tests" / "fake-nvml" / "libnvidia-ml.so.1"):
            if not os.access(f, os.X_OK if f.suffix != ".1" else os.R_OK):
                raise BenchError(f"{f} is not built (see bench/gpuq/README.md)")
        if os.geteuid() != 0:
            raise BenchError("run as root: gpuqd and Slurm's daemons run as root")

    def fresh_gpuqd(self):
        """A new gpuqd with an empty state dir (the previous one stopped, its jobs killed)."""
        if self.gpuqd:
            self.gpuqd.destroy()
        self.n_gpuqd += 1
        work = self.tmp / f"gpuqd{self.n_gpuqd}"
        work.mkdir()
        work.chmod(0o755)
        self.gpuqd = BenchGpuqd(work).start()
        return self.gpuqd

    def start(self):
        note("starting Slurm (slurmctld + slurmd) and gpuqd")
        self.slurm = BenchSlurm(self.tmp / "slurm")
        self.fresh_gpuqd()
        st = self.gpuqd.status()
        if st["gpus_total"] != 8:
            raise BenchError(f"gpuqd sees {st['gpus_total']} GPUs, not 8")

    def gpuq(self, *args, timeout=600, check=True):
        argv = [self.gpuq_cli, "--socket", self.gpuqd.socket, *args]
        return run(argv, cwd=self.tmp, timeout=timeout, check=check)

    # -- part 1: submit throughput --

    def sub_gpuq_cli(self, n):
        t0 = time.perf_counter()
        for _ in range(n):
            self.gpuq("submit", "--hold", "--parsable", "--", "true")
        return time.perf_counter() - t0

    def _api_body(self, **extra):
        return {"command": ["true"], "held": True, "cwd": str(self.tmp), **extra}

    def sub_gpuq_api(self, n, keepalive=True, body=None):
        body = body or self._api_body()
        conn = UnixHTTPConnection(self.gpuqd.socket, timeout=60) if keepalive else None
        ids = []
        t0 = time.perf_counter()
        for _ in range(n):
            c = conn or UnixHTTPConnection(self.gpuqd.socket, timeout=60)
            r = http_call(c, "POST", "/v1/jobs", body, close=not keepalive)
            if r.status != 201:
                raise BenchError(f"POST /v1/jobs: {r.status} {r.text()}")
            ids.append(r.json()["id"])
        t = time.perf_counter() - t0
        if conn:
            conn.close()
        return t, ids

    def sub_sbatch(self, n):
        t0 = time.perf_counter()
        for _ in range(n):
            self.slurm.run("sbatch", "--hold", "-o", "/dev/null", "--wrap", "true")
        return time.perf_counter() - t0

    def sub_slurm_api(self, n, *extra, ids_file=None):
        argv = [self.slurm_submit, "-n", str(n), *extra]
        if ids_file:
            argv += ["-o", ids_file]
        out = self.slurm.run(*argv).stdout
        m = re.search(r"seconds=([\d.]+)", out)
        if not m:
            raise BenchError(f"slurm-submit said: {out!r}")
        return float(m.group(1))

    def part_submit(self):
        n, blocks = self.a.submit_jobs, 2
        methods = [
            ("gpuq_cli", lambda k: self.sub_gpuq_cli(k)),
            ("gpuq_api", lambda k: self.sub_gpuq_api(k)[0]),
            ("gpuq_api_conn", lambda k: self.sub_gpuq_api(k, keepalive=False)[0]),
            ("sbatch", lambda k: self.sub_sbatch(k)),
            ("slurm_api", lambda k: self.sub_slurm_api(k, "-H")),
        ]
        note(f"part 1: {n} held jobs through each of {len(methods)} ways, in {blocks} "
             "interleaved blocks")
        secs = {m: 0.0 for m, _ in methods}
        for b in range(blocks):
            k = n // blocks + (n % blocks if b == 0 else 0)
            order = methods if b % 2 == 0 else list(reversed(methods))
            for name, fn in order:
                secs[name] += fn(k)
        self.res["submit"] = {"n": n, "rate": {m: n / s for m, s in secs.items()}}
        # An idle node and empty queues for part 3: a new gpuqd, Slurm's held jobs cancelled.
        self.fresh_gpuqd()
        self.slurm.run("scancel", "-u", "root", timeout=120)

    # -- part 3: interactive submit-to-start latency --

    def lat_gpuq(self):
        """`gpuq submit -I -G 1 -- date +%s.%N`: (date - submit start, gpuqd's start - submit
        time); waits for the job's end through the API."""
        t0 = time.time()
        jid = int(self.gpuq("submit", "--parsable", "-I", "-G", "1", "--", "date",
                            "+%s.%N").stdout.strip())
        job = gntest.wait_for(
            lambda: (j := self.gpuqd.job(jid))["state"] not in ("PENDING", "RUNNING", "STOPPING")
            and j, 30, f"job {jid} to end", interval=0.005)
        if job["state"] != "COMPLETED":
            raise BenchError(f"job {jid} ended {job['state']}: {self.gpuqd.joblog(jid)}")
        stamp = float(self.gpuqd.joblog(jid).split()[0])
        return stamp - t0, job["start_time"] - job["submit_time"]

    def lat_gpuq_wait(self):
        t0 = time.perf_counter()
        self.gpuq("submit", "--wait", "--parsable", "-I", "-G", "1", "--", "true")
        return time.perf_counter() - t0

    def lat_srun(self):
        """`srun --gres=gpu:1 date +%s.%N`: (date - srun start, srun's whole run)."""
        t0, p0 = time.time(), time.perf_counter()
        out = self.slurm.run("srun", "--gres=gpu:1", "date", "+%s.%N").stdout
        return float(out.split()[0]) - t0, time.perf_counter() - p0

    def part_latency(self):
        n = self.a.latency_runs
        note(f"part 3: {n} interactive 1-GPU jobs each through gpuq and srun, interleaved")
        r = {"gpuq_start": [], "gpuq_daemon": [], "gpuq_wait": [], "srun_start": [],
             "srun_total": []}
        self.lat_gpuq()  # warm-ups: page cache, first-use paths
        self.lat_srun()
        for i in range(n):
            for k in (range(3) if i % 2 == 0 else reversed(range(3))):
                if k == 0:
                    s, d = self.lat_gpuq()
                    r["gpuq_start"].append(s)
                    r["gpuq_daemon"].append(d)
                elif k == 1:
                    r["gpuq_wait"].append(self.lat_gpuq_wait())
                else:
                    s, t = self.lat_srun()
                    r["srun_start"].append(s)
                    r["srun_total"].append(t)
        self.res["latency"] = r

    # -- part 2: one scheduling pass over 10,000 pending jobs --

    def run_sched_bench(self):
        out = {}
        for n in sorted({self.a.pending_jobs // 10, self.a.pending_jobs}):
            r = run([self.sched_bench, "-n", n, "-r", self.a.sched_runs], timeout=600).stdout
            for line in r.splitlines():
                kv = dict(w.split("=", 1) for w in line.split())
                out[(kv["scenario"], n)] = {k: float(v) for k, v in kv.items() if k != "scenario"}
        return out

    def wait_running(self, count_fn, want, t0, limit, proc=None):
        """Polls count_fn until want jobs run; returns seconds since t0 (perf_counter) or None
        after limit seconds. Stops early, returning None, if proc (a release) ended and
        nothing runs within 5 s of it."""
        ended = None
        while time.perf_counter() - t0 < limit:
            if count_fn() >= want:
                return time.perf_counter() - t0
            if proc is not None and ended is None and proc.poll() is not None:
                ended = time.perf_counter()
            if ended is not None and time.perf_counter() - ended > 5:
                return None
            time.sleep(0.01)
        return None

    def release_all(self, argv, env, cwd, count_fn):
        """Runs argv, the release of every held job, while polling count_fn for 8 running jobs.
        Returns seconds until 8 ran (None: they did not), seconds until argv ended (None: cut
        off after --release-window seconds) and seconds it was given."""
        window = self.a.release_window
        t0 = time.perf_counter()
        p = subprocess.Popen([str(a) for a in argv], env=env, cwd=cwd, stdin=subprocess.DEVNULL,
                             stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
        to_8 = self.wait_running(count_fn, 8, t0, window, p)
        try:
            p.wait(max(0.1, window - (time.perf_counter() - t0)))
            done = time.perf_counter() - t0
        except subprocess.TimeoutExpired:
            p.kill()
            p.wait()
            done = None
        return to_8, done, time.perf_counter() - t0

    def gpuq_e2e(self, n):
        d = self.gpuqd
        note(f"part 2: gpuqd: submitting {n} held 1-GPU jobs through the API")
        body = self._api_body(command=["sleep", "600"], gpus=1)
        t_sub, ids = self.sub_gpuq_api(n, body=body)
        r = {"submit_s": t_sub, "n": n}
        note(f"part 2: gpuqd: `gpuq release` of all {n} ({self.a.release_window:.0f} s at most)")
        r["to_8_running"], r["release_all_s"], r["release_window_s"] = self.release_all(
            [self.gpuq_cli, "--socket", d.socket, "release", *ids], None, self.tmp, d.running)
        if r["release_all_s"] is None:
            resp = d.api("GET", "/v1/jobs?state=PENDING", timeout=300)
            if resp.status != 200:
                raise BenchError(f"GET /v1/jobs: {resp.status} {resp.text()}")
            r["released"] = n - sum(1 for j in resp.json()["jobs"] if j["held"])
        # The drained case on a new gpuqd: releasing the rest one by one would take minutes
        # (each release is followed by a pass over every released job); jobs submitted while
        # the node is drained are pending and eligible as soon as it resumes.
        note(f"part 2: gpuqd: a new gpuqd, drained; {n} jobs submitted (not held), resume")
        d = self.fresh_gpuqd()
        resp = d.api("POST", "/v1/drain", {"wait": 0})
        if resp.status != 200:
            raise BenchError(f"POST /v1/drain: {resp.status} {resp.text()}")
        body["held"] = False
        r["submit_drained_s"] = self.sub_gpuq_api(n, body=body)[0]
        t0 = time.perf_counter()
        resp = d.api("POST", "/v1/resume", {})
        if resp.status != 200:
            raise BenchError(f"POST /v1/resume: {resp.status} {resp.text()}")
        r["resume_to_8_running"] = self.wait_running(d.running, 8, t0, 120)
        r["pending_after"] = d.status()["jobs"].get("PENDING", 0)
        return r

    def slurm_e2e(self, n):
        s = self.slurm
        note(f"part 2: Slurm: submitting {n} held 1-GPU jobs through libslurm")
        ids_file = self.tmp / "slurm-ids"
        t_sub = self.sub_slurm_api(n, "-H", "-g", "gpu:1", "-c", "sleep 600", ids_file=ids_file)
        ids = ids_file.read_text().split()
        r = {"submit_s": t_sub, "n": n}
        s.run("sdiag", "--reset")
        note(f"part 2: Slurm: `scontrol release` of all {n}")
        r["to_8_running"], r["release_all_s"], r["release_window_s"] = self.release_all(
            ["scontrol", "release", ",".join(ids)], s.env(), s.dir, s.running)
        r["sdiag_release"] = s.sdiag()
        note("part 2: Slurm: partition down, cancel the running jobs, release the rest if "
             "needed, partition up")
        s.run("scontrol", "update", "PartitionName=debug", "State=DOWN")
        running = s.run("squeue", "-h", "-t", "RUNNING", "-o", "%i").stdout.split()
        if running:
            s.run("scancel", *running)
        gntest.wait_for(lambda: s.running() == 0 and not s.run(
            "squeue", "-h", "-t", "COMPLETING", "-o", "%i").stdout.strip(), 60,
            "Slurm's running jobs to end", interval=0.1)
        if r["release_all_s"] is None:
            s.run("scontrol", "release", ",".join(ids), check=False, timeout=900)
        s.run("sdiag", "--reset")
        t0 = time.perf_counter()
        s.run("scontrol", "update", "PartitionName=debug", "State=UP")
        r["resume_to_8_running"] = self.wait_running(s.running, 8, t0, 120)
        r["sdiag_resume"] = s.sdiag()
        r["pending_after"] = len(s.run("squeue", "-h", "-t", "PENDING", "-o", "%i").stdout.split())
        return r

    def part_sched(self):
        n = self.a.pending_jobs
        note(f"part 2: sched-bench: sched_pass() over {n // 10} and {n} pending jobs")
        self.res["sched_bench"] = self.run_sched_bench()
        self.fresh_gpuqd()
        self.res["gpuq_e2e"] = self.gpuq_e2e(n)
        self.res["slurm_e2e"] = self.slurm_e2e(n)

    # -- report --

    def header(self):
        bt = "?"
        try:
            opts = json.loads(run(["meson", "introspect", "--buildoptions", self.build]).stdout)
            bt = next(o["value"] for o in opts if o["name"] == "buildtype")
        except Exception:  # noqa: BLE001 - only for the header
            pass
        slurm_v = self.slurm.run("sinfo", "--version", check=False).stdout.strip()
        gpuq_v = run([self.gpuq_cli, "version"], check=False).stdout.strip()
        load = " ".join(Path("/proc/loadavg").read_text().split()[:3])
        print(f"gpuq benchmark, {time.strftime('%Y-%m-%d %H:%M UTC', time.gmtime())}")
        print(f"  machine: {os.cpu_count()} CPUs, kernel {platform.release()}, load average "
              f"{load} before")
        print(f"  gpuq: {self.build} ({bt} build), {gpuq_v}; peer: {slurm_v} "
              f"(SchedulerParameters={self.slurm.sched_params}, the rest default)")
        if bt not in ("release", "?"):
            print(f"  WARNING: a {bt} build: gpuq looks slower than the release build users get")
        self.load_warning(load, "before")

    def load_warning(self, load, when):
        if float(load.split()[0]) > (os.cpu_count() or 1) / 2:
            print(f"  WARNING: load average {load.split()[0]} {when} on {os.cpu_count()} CPUs: "
                  "other work is running, the figures are noisy (the ratios less so)")

    def report_submit(self, table):
        s = self.res.get("submit")
        if not s:
            return
        rate = s["rate"]
        print(f"\n== 1. submit throughput: {s['n']} held jobs each way, one client, "
              "2 interleaved blocks (jobs/s, higher is better)")
        rows = [("gpuq submit --hold -- true (CLI)", "gpuq_cli"),
                ("sbatch --hold --wrap true (CLI; -H is the same option)", "sbatch"),
                ("gpuqd API POST /v1/jobs, one keep-alive connection", "gpuq_api"),
                ("gpuqd API POST /v1/jobs, a connection per job", "gpuq_api_conn"),
                ("libslurm slurm_submit_batch_job (a connection per job)", "slurm_api")]
        for label, k in rows:
            print(f"  {label:58s} {rate[k]:8.1f}")
        for label, short, a, b in (
                ("CLI: gpuq / sbatch", "CLI", "gpuq_cli", "sbatch"),
                ("API: gpuqd keep-alive / libslurm", "API keep-alive", "gpuq_api", "slurm_api"),
                ("API: gpuqd conn per job / libslurm", "API conn per job", "gpuq_api_conn",
                 "slurm_api")):
            print(f"  ratio {label:40s} {ratio(rate[a], rate[b])}")
            table.append((f"submit rate, {short} (jobs/s)", rate[a], rate[b],
                          ratio(rate[a], rate[b]), "higher"))

    def report_sched(self, table):
        sb = self.res.get("sched_bench")
        if not sb:
            return
        n = self.a.pending_jobs
        print(f"\n== 2. scheduling {n} pending jobs on 8 GPUs")
        print(f"  gpuq sched_pass() alone (bench/gpuq/sched-bench, {self.a.sched_runs} runs; idle, "
              "busy, held: mixed requests of 1/2/4/8 GPUs in 3 queues, a third starving; "
              "uniform: 1 GPU each in one queue, as end to end below):")
        print(f"    {'scenario':8s} {'jobs':>6s} {'min ms':>9s} {'median ms':>10s} "
              f"{'starts':>7s} {'preempts':>8s} {'reserved':>8s}")
        for (scen, jobs), v in sorted(sb.items(), key=lambda x: (x[0][1], x[0][0])):
            print(f"    {scen:8s} {jobs:6d} {v['min_us'] / 1000:9.2f} "
                  f"{v['median_us'] / 1000:10.2f} {int(v['starts']):7d} {int(v['preempts']):8d} {int(v['reserved']):8d}")
        for scen in ("idle", "uniform"):
            small, big = sb.get((scen, n // 10)), sb.get((scen, n))
            if small and big:
                print(f"    {scen} pass, {n} / {n // 10} jobs: "
                      f"{big['median_us'] / small['median_us']:.0f}x the time for 10x the jobs")
        big = sb.get(("uniform", n))
        g, s = self.res.get("gpuq_e2e"), self.res.get("slurm_e2e")
        if not g or not s:
            return

        def sec(v):
            return "   (none)" if v is None else f"{v:9.3f}"
        print(f"  end to end, {n} held 1-GPU jobs (`sleep 600`) in each:")
        print(f"    {'':52s} {'gpuq':>9s} {'Slurm':>9s}  ratio (s)")
        lines = [
            ("submit all (gpuqd API keep-alive / libslurm)", g["submit_s"], s["submit_s"]),
            ("release all: until 8 run", g["to_8_running"], s["to_8_running"]),
            ("release all: until every release is done", g["release_all_s"],
             s["release_all_s"]),
            ("node drained / partition down: resume until 8 run", g["resume_to_8_running"],
             s["resume_to_8_running"]),
        ]
        for label, a, b in lines:
            print(f"    {label:52s} {sec(a)} {sec(b)}  {ratio(a, b)}")
        for who, v in (("gpuq", g), ("Slurm", s)):
            if v["release_all_s"] is None:
                w = v["release_window_s"]
                rel = v.get("released")
                print(f"    {who}'s release was cut off after {w:.0f} s (--release-window)"
                      + (f": {rel} of {n} jobs released, {rel / w:.0f}/s" if rel is not None
                         else ""))
        print(f"    gpuq's drained case: a new gpuqd, drained, {n} jobs submitted in "
              f"{g['submit_drained_s']:.1f} s, then resumed; Slurm's: its jobs all released, "
              "the partition down, the 8 running cancelled, the partition up")
        print(f"    pending after the resume: gpuq {g['pending_after']}, "
              f"Slurm {s['pending_after']}")
        table.append(("release all -> 8 running (s)", g["to_8_running"], s["to_8_running"],
                      ratio(g["to_8_running"], s["to_8_running"]), "lower"))
        table.append(("resume -> 8 running (s)", g["resume_to_8_running"],
                      s["resume_to_8_running"],
                      ratio(g["resume_to_8_running"], s["resume_to_8_running"]), "lower"))
        def release_rate(v):
            if v["release_all_s"]:
                return n / v["release_all_s"]
            return v["released"] / v["release_window_s"] if v.get("released") is not None else None
        ga, sa = release_rate(g), release_rate(s)
        table.append((f"release of {n} held jobs (jobs/s)", ga, sa, ratio(ga, sa), "higher"))
        for when, key in (("release all", "sdiag_release"), ("partition up", "sdiag_resume")):
            m, b = s[key]["main"], s[key]["backfill"]
            print(f"  Slurm sdiag after {when} (µs): main scheduler last cycle "
                  f"{m.get('Last cycle', '?')}, mean {m.get('Mean cycle', '?')}, max "
                  f"{m.get('Max cycle', '?')}, {m.get('Total cycles', '?')} cycles, mean depth "
                  f"{m.get('Mean depth cycle', '?')}, last queue length "
                  f"{m.get('Last queue length', '?')}; backfill cycles {b.get('Total cycles', '?')}"
                  f", last {b.get('Last cycle', '?')}, depth {b.get('Last depth cycle', '?')}")
        mean = s["sdiag_resume"]["main"].get("Mean cycle")
        if big and mean:
            table.append((f"one pass over {n} pending (ms): uniform / sdiag",
                          big["median_us"] / 1000, mean / 1000,
                          ratio(big["median_us"], mean), "lower"))

    def report_latency(self, table):
        r = self.res.get("latency")
        if not r:
            return
        n = len(r["gpuq_start"])
        print(f"\n== 3. interactive 1-GPU job on an idle node, {n} runs each (ms)")
        print(f"    {'':58s} {'median':>8s} {'p90':>8s} {'min':>8s}")

        def row(label, v):
            print(f"    {label:58s} {median(v) * 1000:8.1f} {p90(v) * 1000:8.1f} "
                  f"{min(v) * 1000:8.1f}")
        row("gpuq submit -I -G 1 -- date: submit -> job's date", r["gpuq_start"])
        row("srun --gres=gpu:1 date: srun start -> job's date", r["srun_start"])
        row("gpuq submit --wait -I -G 1 -- true: whole command", r["gpuq_wait"])
        row("srun --gres=gpu:1 true... (the date run): whole command", r["srun_total"])
        row("gpuqd's own start_time - submit_time", r["gpuq_daemon"])
        a, b = median(r["gpuq_start"]), median(r["srun_start"])
        print(f"  ratio submit -> start gpuq / srun: {ratio(a, b)}; whole command gpuq --wait / "
              f"srun: {ratio(median(r['gpuq_wait']), median(r['srun_total']))} (gpuq --wait "
              "polls the job, first after 0.2 s)")
        table.append(("interactive submit -> start (ms)", a * 1000, b * 1000, ratio(a, b),
                      "lower"))
        table.append(("interactive whole command (ms)", median(r["gpuq_wait"]) * 1000,
                      median(r["srun_total"]) * 1000,
                      ratio(median(r["gpuq_wait"]), median(r["srun_total"])), "lower"))

    def report(self):
        table = []
        self.report_submit(table)
        self.report_sched(table)
        self.report_latency(table)
        print("\n== summary: gpuq / Slurm on this machine")
        print(f"  {'figure':52s} {'gpuq':>10s} {'Slurm':>10s} {'ratio':>7s}  better")
        for label, a, b, rt, better in table:
            fa = "-" if a is None else f"{a:10.2f}"
            fb = "-" if b is None else f"{b:10.2f}"
            print(f"  {label:52s} {fa:>10s} {fb:>10s} {rt:>7s}  {better}")
        print(f"  context: {KUEUE_FACT}")
        print(f"  context: {SLURM_FACT}")
        load = " ".join(Path("/proc/loadavg").read_text().split()[:3])
        print(f"\n  load average after: {load}")
        self.load_warning(load, "after")
        if self.a.json:
            res = dict(self.res)
            if "sched_bench" in res:
                res["sched_bench"] = {f"{k[0]}-{k[1]}": v for k, v in res["sched_bench"].items()}
            Path(self.a.json).write_text(json.dumps(res, indent=1) + "\n")

    def close(self):
        for what, fn in (("gpuqd", lambda: self.gpuqd and self.gpuqd.destroy()),
                         ("Slurm", lambda: self.slurm and self.slurm.stop())):
            try:
                fn()
            except Exception as exc:  # noqa: BLE001 - clean up the rest anyway
                note(f"stopping {what}: {exc}")
        if self.a.keep:
            note(f"kept {self.tmp}")
        else:
            subprocess.run(["rm", "-rf", "--one-file-system", str(self.tmp)], check=False)


def parse_args(argv):
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--submit-jobs", type=int, default=1000, help="part 1: jobs per way")
    p.add_argument("--pending-jobs", type=int, default=10000, help="part 2: pending jobs")
    p.add_argument("--sched-runs", type=int, default=9, help="part 2: sched_pass() runs")
    p.add_argument("--release-window", type=float, default=20,
                   help="part 2: seconds the release of all jobs may take before it is cut off")
    p.add_argument("--latency-runs", type=int, default=20, help="part 3: runs each")
    p.add_argument("--only", choices=("submit", "sched", "latency"), action="append")
    p.add_argument("--quick", action="store_true",
                   help="500 jobs per way, 2000 pending, 8 latency runs")
    p.add_argument("--json", help="also write the figures to this file")
    p.add_argument("--keep", action="store_true", help="keep the temp dir and every log")
    a = p.parse_args(argv)
    if a.quick:
        a.submit_jobs, a.pending_jobs, a.latency_runs, a.sched_runs = 500, 2000, 8, 5
    if a.submit_jobs < 2 or a.pending_jobs < 10 or a.latency_runs < 1 or a.sched_runs < 1:
        p.error("counts too small")
    return a


def on_sigterm(signum, frame):
    raise SystemExit(128 + signum)


def main(argv):
    a = parse_args(argv)
    signal.signal(signal.SIGTERM, on_sigterm)
    b = Bench(a)
    parts = a.only or ["submit", "sched", "latency"]
    try:
        b.check()
        b.start()
        b.header()
        t0 = time.perf_counter()
        if "submit" in parts:
            b.part_submit()
        if "latency" in parts:  # before part 2, whose 10,000 jobs fill the queues
            b.part_latency()
        if "sched" in parts:
            b.part_sched()
        note(f"measured in {time.perf_counter() - t0:.0f} s")
        b.report()
    except (BenchError, AssertionError) as e:
        print(f"bench: {e}", file=sys.stderr)
        return 1
    finally:
        b.close()
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
