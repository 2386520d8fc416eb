"""A real Slurm (Debian's slurmctld and slurmd) on this host for one test module: auth/none,
its own ports, state, spool and pid files in a temp dir, two stand-in GPUs (GRES with
File=/dev/zero and /dev/full: Slurm sets CUDA_VISIBLE_DEVICES from them), and a plugstack.conf
given by the test. Both daemons run in the foreground as children of the test and are stopped
by it (../shared/TESTBED.md has the recipe this follows)."""

import os
import shutil
import subprocess
import time
from pathlib import Path

from gntest import Proc, ProcessDied, free_port, reachable_copy, wait_for

SLURM_PROGRAMS = ("slurmctld", "slurmd", "srun", "sbatch", "sinfo", "scontrol", "squeue")


def missing():
    """What of Slurm is not installed (for a skip), or None."""
    lost = [p for p in SLURM_PROGRAMS if not shutil.which(p)]
    return ", ".join(lost) if lost else None


class Slurm:
    def __init__(self, workdir, plugstack=None, cpus=2):
        self.dir = Path(workdir)
        for d in ("state", "spool", "log"):
            (self.dir / d).mkdir(parents=True, exist_ok=True)
        os.chmod(self.dir, 0o755)
        self.conf = self.dir / "slurm.conf"
        ctld, slurmd = free_port(), free_port()
        lines = [
            "ClusterName=gntest", "SlurmctldHost=localhost", "AuthType=auth/none",
            "CredType=cred/none", "SlurmUser=root", "SlurmdUser=root",
            f"StateSaveLocation={self.dir}/state", f"SlurmdSpoolDir={self.dir}/spool",
            f"SlurmctldPidFile={self.dir}/slurmctld.pid", f"SlurmdPidFile={self.dir}/slurmd.pid",
            f"SlurmctldLogFile={self.dir}/log/ctld.log", f"SlurmdLogFile={self.dir}/log/d.log",
            f"SlurmctldPort={ctld}", f"SlurmdPort={slurmd}", "ProctrackType=proctrack/linuxproc",
            "TaskPlugin=task/none", "SelectType=select/cons_tres",
            "SelectTypeParameters=CR_Core", "ReturnToService=2", "MpiDefault=none",
            "AccountingStorageType=accounting_storage/none", "KillWait=3", "MinJobAge=5",
            "SchedulerParameters=sched_interval=1", "GresTypes=gpu", "SlurmdDebug=debug",
            f"NodeName=localhost CPUs={cpus} RealMemory=2000 Gres=gpu:2 State=UNKNOWN",
            "PartitionName=debug Nodes=localhost Default=YES MaxTime=INFINITE State=UP "
            "OverSubscribe=FORCE:4",
        ]
        if plugstack:
            (self.dir / "plugstack.conf").write_text(plugstack + "\n")
            lines.append(f"PlugStackConfig={self.dir}/plugstack.conf")
        self.conf.write_text("\n".join(lines) + "\n")
        (self.dir / "gres.conf").write_text(
            "NodeName=localhost Name=gpu File=/dev/zero\nNodeName=localhost Name=gpu File=/dev/full\n")
        env = {"SLURM_CONF": str(self.conf)}
        self.daemon_env = env
        self.ctld = Proc(["slurmctld", "-D", "-i", "-f", self.conf], self.dir / "ctld.out", env=env)
        self.slurmd = Proc(["slurmd", "-D", "-f", self.conf], self.dir / "slurmd.out", env=env)
        try:
            wait_for(self._idle, 60, "the Slurm node to come up idle")
        except AssertionError:
            self.stop()
            raise AssertionError("Slurm did not come up:\n" + self.logs()) from None

    def _idle(self):
        for p in (self.ctld, self.slurmd):
            if not p.running():
                raise ProcessDied(f"{p.argv[0]} died:\n{p.tail()}")
        r = subprocess.run(["sinfo", "-h", "-o", "%T"], capture_output=True, text=True,
                           env=self.env())
        return r.returncode == 0 and r.stdout.strip() == "idle"

    def env(self, extra=None):
        e = dict(os.environ)
        e["SLURM_CONF"] = str(self.conf)
        e.update(extra or {})
        return e

    def logs(self):
        out = []
        for f in ("log/ctld.log", "log/d.log", "ctld.out", "slurmd.out"):
            p = self.dir / f
            if p.exists():
                out.append(f"--- {f}\n" + "\n".join(p.read_text(errors="replace").splitlines()[-40:]))
        return "\n".join(out)

    def stop(self):
        for p in (self.slurmd, self.ctld):
            p.stop(timeout=10)

    def restart_slurmd(self):
        self.slurmd.stop(timeout=10)
        self.slurmd = Proc(["slurmd", "-D", "-f", self.conf], self.dir / "slurmd.out",
                           env=self.daemon_env)
        wait_for(self._idle, 60, "slurmd to come back")



def plain_plugin(built):
    """The SPANK plugin to load: `built` (the build under test's), or where that one carries a
    sanitizer runtime, the plain build's that $GPUNODE_SPANK_PLUGIN names (scripts/test.sh sets
    it for the sanitized run). slurmd and srun are not built with sanitizers, and a plugin that
    needs their runtime cannot be loaded into them (nor into the epilog's slurmstepd, whose
    environment slurmd makes, so no LD_PRELOAD gets there)."""
    def sanitized(path):
        r = subprocess.run(["ldd", str(path)], capture_output=True, text=True)
        return "libasan" in r.stdout or "libubsan" in r.stdout
    plugin = Path(built)
    if sanitized(built):
        other = os.environ.get("GPUNODE_SPANK_PLUGIN")
        if not other or sanitized(other):
            raise AssertionError(f"{built} is built with sanitizers and cannot be loaded into "
                                 "slurmd; set GPUNODE_SPANK_PLUGIN to a plain build's plugin")
        plugin = Path(other)
    # srun and sbatch load it as the job's user: a copy where they can read it (the checkout may
    # be below a folder only root can enter).
    return reachable_copy(plugin) / plugin.name
