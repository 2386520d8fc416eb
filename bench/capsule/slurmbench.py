#!/usr/bin/python3
"""spank_capsule benchmark (standard library only). Not a test: nothing passes or fails.

A real Slurm on this host (tests/pylib/slurmtest.py: slurmctld + slurmd, the plugin in its
plugstack.conf) and a docker-registry with capsulebench's "big" image (5 gzip layers, 41 MB):

  warm   time from starting `srun -N1 --container-image=IMAGE echo hi` to the first line of
         its output, the image in the cache, against `srun -N1 echo hi` (the floor: Slurm's own
         step launch, no container), interleaved;
  cold   the same with an empty cache every run (the pull and unpack happen in the step),
         against `skopeo copy` + `umoci unpack --rootless` of the same image (which includes no
         Slurm at all: the peer gets the step launch for free).

Every figure is printed next to its peer, measured in this invocation. Run as root
(bench/capsule/run-slurm); see bench/capsule/README.md.
"""

import argparse
import os
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path

REPO = Path(__file__).resolve().parents[2]
sys.path[:0] = [str(REPO / "tests" / "pylib"), str(REPO / "capsule" / "tests" / "system"),
                str(REPO / "bench" / "capsule")]
import capsulebench as cb  # noqa: E402 - the image builder, statistics and helpers
import capsuleutil as cu  # noqa: E402
import slurmtest  # noqa: E402


def first_line_seconds(argv, env):
    """Seconds from starting argv to the first line on its stdout; the rest is drained."""
    t0 = time.perf_counter()
    p = subprocess.Popen(argv, stdin=subprocess.DEVNULL, stdout=subprocess.PIPE,
                         stderr=subprocess.PIPE, env=env)
    line = p.stdout.readline()
    elapsed = time.perf_counter() - t0
    rest, err = p.communicate(timeout=600)
    if p.returncode != 0 or not line:
        raise cb.BenchError(f"{' '.join(argv)}: exit {p.returncode}: {err.decode().strip()}")
    return elapsed


class SlurmBench:
    def __init__(self, a):
        self.a = a
        self.tmp = Path(tempfile.mkdtemp(prefix="capsule-slurmbench-", dir="/tmp"))
        os.chmod(self.tmp, 0o755)
        self.registry = self.slurm = None

    def setup(self):
        cb.note("building the images (umoci; about 20 s)")
        lay = cb.build_images(self.tmp / "images")
        self.registry = cu.Registry(self.tmp / "registry")
        lay.push("big", self.registry.host, "bench/big:latest")
        self.image = f"{self.registry.host}/bench/big:latest"
        self.runtime = self.tmp / "run"
        self.slurm = slurmtest.Slurm(
            self.tmp / "slurm",
            plugstack=f"required {self.a.plugin} runtime_path={self.runtime} "
                      f"capsule={self.a.capsule}")
        self.home = cu.Home(self.tmp / "home")

    def env(self, home=None):
        e = self.slurm.env((home or self.home).env())
        return {k: v for k, v in e.items() if not k.startswith(("SLURM_JOB", "SLURM_STEP"))}

    def warm(self):
        n = self.a.runs
        cb.note(f"warm: {n} runs each of srun with and without the cached image, interleaved")
        first_line_seconds(["srun", "-N1", f"--container-image={self.image}", "echo", "hi"],
                           self.env())  # pulls it once
        t = {"capsule": [], "floor": []}
        for i in range(n):
            order = ["capsule", "floor"] if i % 2 == 0 else ["floor", "capsule"]
            for k in order:
                image = [f"--container-image={self.image}"] if k == "capsule" else []
                t[k].append(first_line_seconds(["srun", "-N1", *image, "echo", "hi"], self.env()))
        return t

    def cold(self):
        n = self.a.cold_runs
        cb.note(f"cold: {n} runs each of srun with an empty cache and skopeo+umoci, interleaved")
        t = {"capsule": [], "peer": []}
        for i in range(n):
            home = cu.Home(self.tmp / f"cold-home-{i}")
            t["capsule"].append(first_line_seconds(
                ["srun", "-N1", f"--container-image={self.image}", "echo", "hi"], self.env(home)))
            work = self.tmp / f"cold-peer-{i}"
            work.mkdir()
            log = self.tmp / "peer.log"
            s, _ = cb.run_logged(["skopeo", "copy", "--quiet", "--src-tls-verify=false",
                                  f"docker://{self.image}", f"oci:{work}/oci:big"], log)
            u, _ = cb.run_logged(["umoci", "unpack", "--rootless", "--image", f"{work}/oci:big",
                                  work / "bundle"], log)
            t["peer"].append(s + u)
            cb.remove_tree(work)
            cb.remove_tree(home.root)
        return t

    def report(self, warm, cold):
        def ms(v):
            return f"{cb.median(v) * 1000:8.1f} ms"
        print(f"spank_capsule benchmark: {self.a.plugin}")
        version = subprocess.run(["srun", "--version"], capture_output=True, text=True,
                                 env=self.env()).stdout.strip() or "?"
        print(f"  {version}, image {self.image} "
              "(capsulebench 'big': 5 gzip layers)")
        print("\n== warm: srun to the first line of output, image cached (median) ==")
        print(f"  srun --container-image   {ms(warm['capsule'])}   (n={len(warm['capsule'])})")
        print(f"  srun, no container       {ms(warm['floor'])}   (the floor)")
        print(f"  ratio capsule/floor      {cb.ratio(cb.median(warm['capsule']), cb.median(warm['floor']))}"
              f"   (+{(cb.median(warm['capsule']) - cb.median(warm['floor'])) * 1000:.1f} ms)")
        print("\n== cold: empty cache (median) ==")
        print(f"  srun --container-image   {ms(cold['capsule'])}   (n={len(cold['capsule'])}; "
              "includes Slurm's step launch)")
        print(f"  skopeo copy + umoci      {ms(cold['peer'])}   (no Slurm)")
        print(f"  ratio capsule/peer       {cb.ratio(cb.median(cold['capsule']), cb.median(cold['peer']))}")

    def close(self):
        if self.slurm:
            self.slurm.stop()
        if self.registry:
            self.registry.stop()
        if not self.a.keep:
            cb.remove_tree(self.tmp)
        else:
            cb.note(f"kept {self.tmp}")


def main(argv):
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--plugin", required=True)
    p.add_argument("--capsule", required=True)
    p.add_argument("--runs", type=int, default=10)
    p.add_argument("--cold-runs", type=int, default=3)
    p.add_argument("--keep", action="store_true")
    a = p.parse_args(argv)
    b = SlurmBench(a)
    try:
        b.setup()
        b.report(b.warm(), b.cold())
    except cb.BenchError as e:
        print(f"bench: {e}", file=sys.stderr)
        return 1
    finally:
        b.close()
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
