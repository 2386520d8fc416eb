#!/usr/bin/python3
"""capsule benchmark harness (standard library only). Not a test: nothing passes or fails.

Part 1, cold pull: `capsule pull` of a multi-layer image from a docker-registry on 127.0.0.1
against `skopeo copy docker://... oci:DIR:tag` + `umoci unpack --rootless`: the tools Debian
ships for the same job without root (fetch an image into an OCI layout, unpack it into a root
filesystem), each from an empty cache every run, interleaved. enroot is not the peer: it is not
in Debian, and it does the job differently (curl, then a squashfs image).
Part 2, warm start to exit of /bin/true: `capsule run` against `docker run --rm` on a private
dockerd and against the floor, `unshare -Urm chroot ROOTFS /bin/true`, timed by hyperfine.
Part 3, the node cache (nodebench.py): a second user's first `capsule run` of an image another
user pulled through capsule-cached, against the same user's cold start and the warm floor.
Every figure is printed next to its peer, measured in this invocation on this machine.

bench/capsule/run starts this in its own process group and ends that group on exit; the
harness also stops what it started itself (registry, dockerd, capsule-cached, the test users)
when it ends or is signalled.
See bench/capsule/README.md.
"""

import argparse
import json
import os
import shlex
import shutil
import signal
import subprocess
import sys
import time
from pathlib import Path

REPO = Path(__file__).resolve().parents[2]
# A script, not a pytest run: the helpers' folders that pytest.ini's pythonpath gives the tests.
sys.path[:0] = [str(REPO / "tests" / "pylib"), str(REPO / "capsule" / "tests" / "system")]
import capsuleutil as cu  # noqa: E402 - the system tests' registry and image builders
from benchlib import (  # noqa: E402
    ENTRY_COUNT,
    BenchError,
    median,
    note,
    output_of,
    ratio,
    remove_tree,
    run_logged,
    summary,
    tree_bytes,
    version_of,
)
from nodebench import NodeBench  # noqa: E402

DEEP_LAYERS = 40
BUSYBOX_APPLETS = ("sh", "true", "ls", "cat", "echo", "find", "wc", "test", "env", "id")
LIBS_DIR = Path("/usr/lib/x86_64-linux-gnu")
LIBS_BUDGET = 40 << 20  # bytes of shared libraries in the libs layer
LIB_MAX = 4 << 20  # skip the giants (libLLVM...): many mid-sized files, as real images have


# ---- the images ----


def fill_base(root):
    for d in ("bin", "etc", "tmp", "usr/lib", "usr/share"):
        (root / d).mkdir(parents=True, exist_ok=True)
    shutil.copy("/bin/busybox", root / "bin" / "busybox")
    for applet in BUSYBOX_APPLETS:
        (root / "bin" / applet).symlink_to("busybox")
    (root / "etc" / "passwd").write_text("root:x:0:0:root:/root:/bin/sh\n")
    (root / "etc" / "group").write_text("root:x:0:\n")
    (root / "etc" / "removed-later").write_text("a whiteout hides this\n")


def fill_python(root):
    src = sorted(Path("/usr/lib").glob("python3.*"))[0]
    shutil.copytree(src, root / "usr" / "lib" / src.name, symlinks=True)


def fill_perl(root):
    for name in ("perl", "perl5"):
        src = Path("/usr/share") / name
        if src.is_dir():
            shutil.copytree(src, root / "usr" / "share" / name, symlinks=True)


def chosen_libs():
    """Regular *.so* files of the host's multiarch dir up to LIB_MAX each, by name, until
    LIBS_BUDGET bytes, plus the symlinks among them that point at a chosen file."""
    files, total = [], 0
    for p in sorted(LIBS_DIR.glob("*.so*")):
        if p.is_symlink() or not p.is_file():
            continue
        size = p.stat().st_size
        if size > LIB_MAX:
            continue
        files.append(p)
        total += size
        if total >= LIBS_BUDGET:
            break
    names = {p.name for p in files}
    links = [p for p in sorted(LIBS_DIR.glob("*.so*"))
             if p.is_symlink() and os.readlink(p) in names]
    return files, links


def fill_libs(root):
    dst = root / "usr" / "lib" / "x86_64-linux-gnu"
    dst.mkdir(parents=True, exist_ok=True)
    files, links = chosen_libs()
    for p in files:
        shutil.copy2(p, dst / p.name)
    for p in links:
        (dst / p.name).symlink_to(os.readlink(p))


def make_whiteouts(root):
    """The last layer: whole directories and single files deleted (umoci writes whiteouts),
    one file changed, one added."""
    py = sorted((root / "usr" / "lib").glob("python3.*"))[0]
    for d in ("test", "lib2to3", "pydoc_data", "idlelib"):
        shutil.rmtree(py / d, ignore_errors=True)
    for pod in (root / "usr" / "share" / "perl").glob("*/pod"):
        shutil.rmtree(pod, ignore_errors=True)
    libs = sorted((root / "usr" / "lib" / "x86_64-linux-gnu").iterdir())
    for p in libs[::8]:
        p.unlink()
    (root / "etc" / "removed-later").unlink()
    (root / "etc" / "passwd").write_text("root:x:0:0:root:/root:/bin/sh\n"
                                         "nobody:x:65534:65534:nobody:/:/bin/false\n")
    (root / "etc" / "image-release").write_text("capsule benchmark image\n")


def build_images(work):
    """Tags "big" (5 gzip layers: busybox, python, perl, shared libraries, whiteouts) and "deep"
    (busybox plus 39 one-file layers) in one OCI layout."""
    lay = cu.Layout(work / "oci")
    lay.new_image("big", fill_base)
    for change in (fill_python, fill_perl, fill_libs, make_whiteouts):
        lay.umoci_layer("big", change)
    lay.new_image("deep", fill_base)
    for i in range(1, DEEP_LAYERS):
        lay.add_layer("deep", [("etc", "dir", None, 0o755),
                               (f"etc/layer-{i:02}", "file", f"{i}\n".encode(), 0o644)])
    return lay


class Bench:
    def __init__(self, a):
        self.a = a
        self.tmp = Path(a.tmpdir)
        self.logs = self.tmp / "logs"
        self.logs.mkdir(exist_ok=True)
        self.capsule = a.capsule
        self.registry = None
        self.dockerd = None
        self.docker_env = None
        self.node = None
        self.node_left_out = None
        self.results = {}

    def ref(self, tag):
        return f"{self.registry.host}/bench/{tag}:latest"

    def setup_images(self):
        note("building the images (umoci; about 20 s)")
        t0 = time.monotonic()
        self.layout = build_images(self.tmp / "images")
        self.registry = cu.Registry(self.tmp / "registry")
        for tag in ("big", "deep"):
            self.layout.push(tag, self.registry.host, f"bench/{tag}:latest")
        body, _ = self.registry.manifest("bench/big", "latest")
        layers = json.loads(body)["layers"]
        self.big_layers = len(layers)
        self.big_compressed = sum(layer["size"] for layer in layers)
        note(f"images built and pushed in {time.monotonic() - t0:.0f} s")

    # ---- part 1: cold pull ----

    def capsule_pull(self, home_dir, parallel=None):
        home = cu.Home(home_dir)
        if parallel is not None:
            home.write_config(parallel_downloads=parallel)
        env = dict(os.environ, **home.env())
        return run_logged([self.capsule, "-q", "pull", self.ref("big")], self.logs / "pull.log",
                          env=env)

    def peer_pull(self, work):
        """skopeo then umoci; returns ((wall, CPU) of skopeo, (wall, CPU) of umoci)."""
        work.mkdir()
        log = self.logs / "peer.log"
        t1 = run_logged(["skopeo", "copy", "--quiet", "--src-tls-verify=false",
                         f"docker://{self.ref('big')}", f"oci:{work}/oci:big"], log)
        t2 = run_logged(["umoci", "unpack", "--rootless", "--image", f"{work}/oci:big",
                         work / "bundle"], log)
        return t1, t2

    def part_pull(self):
        n = self.a.pull_runs
        pd = self.a.parallel
        note(f"part 1: {n} cold pull(s) each of capsule, capsule parallel_downloads=1 and "
             "skopeo+umoci, interleaved")
        times = {"capsule": [], "capsule1": [], "peer": [], "skopeo": [], "umoci": []}
        cpu = {k: [] for k in times}
        variants = ["capsule", "capsule1", "peer"]
        for i in range(n):
            for name in variants[i % 3:] + variants[:i % 3]:
                work = self.tmp / f"cold-{name}-{i}"
                if name == "peer":
                    s, u = self.peer_pull(work)
                    for key, (wall, c) in (("skopeo", s), ("umoci", u),
                                           ("peer", (s[0] + u[0], s[1] + u[1]))):
                        times[key].append(wall)
                        cpu[key].append(c)
                    if i == n - 1:
                        self.unpacked = tree_bytes(work / "bundle" / "rootfs")
                        self.floor_big = self.tmp / "floor-big"
                        (work / "bundle").rename(self.floor_big)
                        self.floor_big = self.floor_big / "rootfs"
                else:
                    wall, c = self.capsule_pull(work, pd if name == "capsule" else 1)
                    times[name].append(wall)
                    cpu[name].append(c)
                remove_tree(work)
        self.results["pull"] = {k: dict(summary(v), cpu=median(cpu[k]))
                                for k, v in times.items()}

    def report_pull(self):
        r = self.results["pull"]
        n = r["peer"]["n"]
        pd = f"parallel_downloads={self.a.parallel}" if self.a.parallel else "default"
        print(f"\n== 1. cold pull + unpack: {self.big_layers} gzip layers, "
              f"{self.big_compressed / 1e6:.1f} MB compressed, {self.unpacked / 1e6:.1f} MB "
              f"unpacked; {n} run(s) each, interleaved, from an empty cache every run")
        print(f"  {'':36} {'median':>8} {'min':>8} {'max':>8} {'CPU':>8}  (s)")
        rows = [("capsule pull (" + pd + ")", "capsule"),
                ("capsule pull (parallel_downloads=1)", "capsule1"),
                ("skopeo copy + umoci unpack", "peer"),
                ("  of which skopeo copy", "skopeo"), ("  of which umoci unpack", "umoci")]
        for label, key in rows:
            s = r[key]
            print(f"  {label:36} {s['median']:8.2f} {s['min']:8.2f} {s['max']:8.2f} "
                  f"{s['cpu']:8.2f}")
        c, c1, p = r["capsule"]["median"], r["capsule1"]["median"], r["peer"]["median"]
        print(f"  ratio capsule / skopeo+umoci: {ratio(c, p)} (median wall; < 1 = capsule "
              f"faster); CPU {ratio(r['capsule']['cpu'], r['peer']['cpu'])}")
        print(f"  ratio capsule parallel_downloads=1 / skopeo+umoci: {ratio(c1, p)}")
        print(f"  ratio capsule parallel_downloads=1 / {pd}: {ratio(c1, c)}")
        print("  CPU: median user+system time of the programs (the registry's is not counted)")

    # ---- part 2: warm start ----

    def prepare_start(self):
        self.warm = cu.Home(self.tmp / "warm")
        self.warm_env = dict(os.environ, **self.warm.env())
        for tag in ("big", "deep"):
            run_logged([self.capsule, "-q", "pull", self.ref(tag)], self.logs / "pull.log",
                       env=self.warm_env)
        if not getattr(self, "floor_big", None):
            self.floor_big = self.unpack_local("big")
            self.unpacked = tree_bytes(self.floor_big)
        self.floor_deep = self.unpack_local("deep")
        self.start_docker()
        # The same tree on both sides: a missing whiteout or layer would show here.
        c = output_of([self.capsule, "run", "--no-home", self.ref("big"), *ENTRY_COUNT],
                      env=self.warm_env)
        f = output_of(["unshare", "-Urm", "chroot", self.floor_big, *ENTRY_COUNT])
        self.sanity = f"entries under /bin /etc /usr: capsule {c}, floor {f}"
        if c != f:
            note(f"warning: the trees differ: {self.sanity}")

    def unpack_local(self, tag):
        bundle = self.tmp / f"floor-{tag}"
        run_logged(["umoci", "unpack", "--rootless", "--image", f"{self.layout.path}:{tag}",
                    bundle], self.logs / "peer.log")
        return bundle / "rootfs"

    def start_docker(self):
        if self.a.no_docker:
            return
        if os.geteuid() != 0:
            note("not root: no private dockerd, docker is left out (as with --no-docker)")
            return
        d = self.tmp / "docker"
        d.mkdir()
        sock = d / "docker.sock"
        note(f"starting a private dockerd (storage driver {self.a.docker_storage})")
        self.dockerd = cu.Proc(["dockerd", "--iptables=false", "--ip6tables=false",
                                "--bridge=none", f"--storage-driver={self.a.docker_storage}",
                                f"--data-root={d}/data", f"--exec-root={d}/exec",
                                "-H", f"unix://{sock}", "--pidfile", d / "pid"],
                               self.logs / "dockerd.log")
        self.docker_env = dict(os.environ, DOCKER_HOST=f"unix://{sock}")
        deadline = time.monotonic() + 60
        while subprocess.run([self.a.docker, "version"], env=self.docker_env,
                             capture_output=True).returncode != 0:
            if not self.dockerd.running() or time.monotonic() > deadline:
                raise BenchError(f"dockerd did not start:\n{self.dockerd.tail()}")
            time.sleep(0.2)
        run_logged([self.a.docker, "pull", "-q", self.ref("big")], self.logs / "docker.log",
                   env=self.docker_env)
        self.docker_version = output_of([self.a.docker, "version", "--format",
                                         "{{.Server.Version}}"], env=self.docker_env)

    def stop_docker(self):
        if self.dockerd:
            self.dockerd.stop(timeout=30)
            self.dockerd = None

    def hyperfine(self, cmds, runs, env):
        """Times every (name, argv) with hyperfine in two blocks, the second in reverse order,
        so that a slow spell of the machine does not land on one command only. Returns
        ({name: [wall seconds]}, {name: [mean CPU seconds per block]})."""
        times = {name: [] for name, _ in cmds}
        cpu = {name: [] for name, _ in cmds}
        per_block = [runs - runs // 2, runs // 2]
        for b, n in enumerate(per_block):
            order = cmds if b == 0 else list(reversed(cmds))
            out = self.tmp / f"hyperfine-{cmds[0][0].replace(' ', '_')}-{b}.json"
            argv = ["hyperfine", "-N", "--style", "basic", "--warmup", str(self.a.warmup),
                    "--runs", str(n), "--export-json", str(out)]
            for name, cmd in order:
                argv += ["-n", name, shlex.join(str(c) for c in cmd)]
            run_logged(argv, self.logs / "hyperfine.log", env=env)
            for res in json.loads(out.read_text())["results"]:
                times[res["command"]] += res["times"]
                cpu[res["command"]].append(res["user"] + res["system"])
        return times, cpu

    def interleaved(self, cmds, runs, env):
        """Times every (name, argv) `runs` times in rounds, each round running every command once
        in a rotated order, after `warmup` untimed rounds: on a shared machine a slow spell
        then hits all commands alike, where hyperfine's one-command-after-another would pin it
        on one. Each run is a posix_spawn and a wait4, stdin, stdout and stderr on /dev/null.
        Returns ({name: [wall seconds]}, {name: [CPU seconds]}), the CPU
        time being the command's and that of the children it waited for."""
        devnull = [(os.POSIX_SPAWN_OPEN, fd, os.devnull, os.O_WRONLY, 0) for fd in (1, 2)]
        devnull.append((os.POSIX_SPAWN_OPEN, 0, os.devnull, os.O_RDONLY, 0))
        progs = [(name, shutil.which(str(cmd[0])) or str(cmd[0]), [str(c) for c in cmd])
                 for name, cmd in cmds]
        times = {name: [] for name, _, _ in progs}
        cpu = {name: [] for name, _, _ in progs}
        for r in range(self.a.warmup + runs):
            k = r % len(progs)
            for name, path, argv in progs[k:] + progs[:k]:
                t0 = time.perf_counter()
                pid = os.posix_spawn(path, argv, env, file_actions=devnull)
                _, status, ru = os.wait4(pid, 0)
                elapsed = time.perf_counter() - t0
                if status != 0:
                    raise BenchError(f"{shlex.join(argv)}: wait status {status:#x}; run it by "
                                     "hand to see why")
                if r >= self.a.warmup:
                    times[name].append(elapsed)
                    cpu[name].append(ru.ru_utime + ru.ru_stime)
        return times, cpu

    def part_start(self):
        runs = self.a.start_runs
        note(f"part 2: {runs} runs each ({self.a.timer}, {self.a.warmup} warmups)")
        true = "/bin/true"
        cap = [self.capsule, "run", "--no-home"]
        cmds = [("capsule", cap + [self.ref("big"), true]),
                ("capsule --pid", [self.capsule, "run", "--pid", "--no-home",
                                   self.ref("big"), true]),
                ("floor", ["unshare", "-Urm", "chroot", self.floor_big, true]),
                ("capsule deep", cap + [self.ref("deep"), true]),
                ("floor deep", ["unshare", "-Urm", "chroot", self.floor_deep, true]),
                ("capsule --version", [self.capsule, "--version"]),
                ("true", [true])]
        timer = self.hyperfine if self.a.timer == "hyperfine" else self.interleaved
        times, cpu = timer(cmds, runs, self.warm_env)
        if self.docker_env:
            # Docker on its own, afterwards: dockerd and containerd go on working after the
            # client returns (removal, events), and in the rounds that work would land on the
            # next command, capsule's or the floor's.
            t, c = timer([("docker", [self.a.docker, "run", "--rm", "--network=none",
                                      self.ref("big"), true])], runs, self.docker_env)
            times.update(t)
            cpu.update(c)
        self.results["start"] = {k: dict(summary(v), cpu=sum(cpu[k]) / len(cpu[k]))
                                 for k, v in times.items()}

    def report_start(self):
        r = self.results["start"]
        n = r["capsule"]["n"]
        how = (f"interleaved rounds after {self.a.warmup} warmup rounds"
               if self.a.timer == "loop" else
               f"hyperfine -N in two blocks, {self.a.warmup} warmups per block")
        if "docker" in r:
            how += "; docker alone after the others"
        print(f"\n== 2. warm start to exit of /bin/true, image cached: {n} runs each, {how}")
        print(f"  {'':44} {'mean':>7} {'median':>7} {'p90':>7} {'min':>7} {'max':>7} "
              f"{'CPU':>7}  (ms)")
        labels = [
            ("capsule", f"capsule run --no-home ({self.big_layers} layers)"),
            ("capsule --pid", "capsule run --pid --no-home"),
            ("docker", f"docker run --rm --network=none ({self.a.docker_storage})"),
            ("floor", "unshare -Urm chroot ROOTFS (floor)"),
            ("capsule deep", f"capsule run --no-home (deep, {DEEP_LAYERS} layers)"),
            ("floor deep", "unshare -Urm chroot ROOTFS (deep, floor)"),
            ("capsule --version", "for scale: capsule --version"),
            ("true", "for scale: /bin/true on the host"),
        ]
        for key, label in labels:
            if key not in r:
                continue
            s = r[key]
            print(f"  {label:44} " + " ".join(f"{s[f] * 1e3:7.1f}" for f in
                                               ("mean", "median", "p90", "min", "max", "cpu")))

        def line(what, a, b, extra=""):
            print(f"  {what:30} mean {ratio(r[a]['mean'], r[b]['mean']):>6}   median "
                  f"{ratio(r[a]['median'], r[b]['median']):>6}   CPU "
                  f"{ratio(r[a]['cpu'], r[b]['cpu']):>6}{extra}")

        print("  ratios:")
        line("capsule / floor", "capsule", "floor", "   (goal <= 2)")
        line("capsule --pid / floor", "capsule --pid", "floor")
        line("capsule deep / floor deep", "capsule deep", "floor deep")
        line("capsule deep / capsule", "capsule deep", "capsule")
        if "docker" in r:
            line("docker / capsule", "docker", "capsule", "   (wall: > 1 = capsule faster)")
        print("  CPU: mean user+system time of the command and the children it waited for"
              + ("; for docker,\n  of the client alone: the work is done in dockerd, containerd "
                 "and runc" if "docker" in r else ""))
        print(f"  sanity: {self.sanity}")

    # ---- the machine ----

    def header(self):
        load = os.getloadavg()
        self.load_before = load
        print(f"capsule benchmark, {time.strftime('%Y-%m-%d %H:%M %Z')}")
        print(f"  machine: {os.cpu_count()} CPUs, kernel {os.uname().release}, load average "
              f"{load[0]:.2f} {load[1]:.2f} {load[2]:.2f} before")
        print(f"  capsule: {self.capsule} ({self.a.build_type} build), "
              f"{version_of([self.capsule, '--version'])}")
        print(f"  peers: {version_of(['skopeo', '--version'])}; "
              f"{version_of(['umoci', '--version'])}; {version_of(['hyperfine', '--version'])}; "
              f"docker-registry {version_of(['docker-registry', '--version']).split()[-1]}")
        if self.a.build_type not in ("release", "debugoptimized", "plain", "minsize"):
            print(f"  WARNING: capsule is a {self.a.build_type} build; use a release build "
                  "for figures")
        self.warn_load(load, "before")

    def warn_load(self, load, when):
        cpus = os.cpu_count() or 1
        if load[0] > 0.5 * cpus:
            print(f"  WARNING: load average {load[0]:.2f} {when} on {cpus} CPUs: other work is "
                  "running, the figures are noisy (the ratios less so)")

    def footer(self):
        load = os.getloadavg()
        print(f"\n  load average after: {load[0]:.2f} {load[1]:.2f} {load[2]:.2f}")
        if getattr(self, "docker_version", None):
            print(f"  dockerd {self.docker_version}")
        self.warn_load(load, "after")

    # ---- part 3: the node cache ----

    def part_node(self):
        """Runs nodebench's part; in a full run, one that cannot run here (not root, no
        capsule-cached) is left out with the reason in the report, as Docker is."""
        self.stop_docker()  # idle, but its daemons would share the CPUs with the starts
        self.node = NodeBench(self.tmp, self.logs, self.capsule, self.a.capsule_cached,
                              self.ref("big"), self.a.node_rounds, self.a.node_warm)
        why = self.node.cannot()
        if why and self.a.only != "node":
            note(f"node cache part left out: {why}")
            self.node_left_out = why
            return
        self.node.prepare()
        self.node.measure()
        self.results["node"] = self.node.results

    def report_node(self):
        if self.node_left_out:
            print(f"\n== 3. node cache: left out: {self.node_left_out}")
        elif "node" in self.results:
            self.node.report(self.big_layers)

    def close(self):
        """Stops dockerd, the node cache part's service and users, and the registry; safe to
        call twice."""
        self.stop_docker()
        if self.node:
            self.node.close()
        if self.registry:
            self.registry.stop()
            self.registry = None


def parse_args(argv):
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--capsule", required=True)
    p.add_argument("--build-type", default="unknown")
    p.add_argument("--tmpdir", required=True)
    p.add_argument("--quick", action="store_true",
                   help="1 cold pull, 20 starts, 3 warmups, 4 node-cache rounds")
    p.add_argument("--only", choices=("pull", "start", "node"))
    p.add_argument("--pull-runs", type=int)
    p.add_argument("--start-runs", type=int)
    p.add_argument("--warmup", type=int)
    p.add_argument("--node-rounds", type=int, help="part 3: timed rounds (cold and node-cache "
                   "first starts once per round)")
    p.add_argument("--node-warm", type=int, help="part 3: warm starts of each kind per round")
    p.add_argument("--capsule-cached", help="default: $CAPSULE_CACHED, else capsule-cached "
                   "beside capsule")
    p.add_argument("--parallel", type=int, help="capsule's parallel_downloads for its main "
                   "figure (default: capsule's own default)")
    p.add_argument("--docker", default="/usr/bin/docker")
    p.add_argument("--docker-storage", default="overlay2", choices=("overlay2", "vfs"))
    p.add_argument("--no-docker", action="store_true")
    p.add_argument("--timer", default="loop", choices=("loop", "hyperfine"),
                   help="part 2: interleaved rounds (default) or hyperfine in two blocks")
    p.add_argument("--json", help="also write the figures here")
    a = p.parse_args(argv)
    a.pull_runs = a.pull_runs or (1 if a.quick else 3)
    a.start_runs = a.start_runs or (20 if a.quick else 50)
    a.warmup = a.warmup if a.warmup is not None else (3 if a.quick else 5)
    a.node_rounds = a.node_rounds or (4 if a.quick else 10)
    a.node_warm = a.node_warm or 5
    a.capsule_cached = a.capsule_cached or os.environ.get("CAPSULE_CACHED") or \
        str(Path(a.capsule).parent / "capsule-cached")
    return a


def on_sigterm(signum, frame):
    raise KeyboardInterrupt


def main(argv):
    a = parse_args(argv)
    # A SIGTERM (run's trap, or anyone) unwinds through the finally below like Ctrl-C does.
    signal.signal(signal.SIGTERM, on_sigterm)
    b = Bench(a)
    try:
        b.header()
        b.setup_images()
        if a.only in (None, "pull"):
            b.part_pull()
        if a.only in (None, "start"):
            b.prepare_start()
            b.part_start()
        if a.only in (None, "node"):
            b.part_node()
        b.close()
        if "pull" in b.results:
            b.report_pull()
        if "start" in b.results:
            b.report_start()
        b.report_node()
        b.footer()
        if a.json:
            Path(a.json).write_text(json.dumps(b.results, indent=1))
        return 0
    except BenchError as exc:
        print(f"bench: {exc}", file=sys.stderr)
        return 1
    except KeyboardInterrupt:
        print("bench: interrupted", file=sys.stderr)
        return 130
    finally:
        b.close()


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
